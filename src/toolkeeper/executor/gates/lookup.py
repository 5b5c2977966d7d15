"""2. Lookup: the tool must exist, in the principal's tenant and environment."""

from __future__ import annotations

from ...core.errors import CallRefused, ErrorCode, suggested
from ...core.ids import json_kind
from ...policy.grants import exists_for, may_use
from ..runtime import Runtime
from ..state import CallState
from ..steps import Step, refuse

__all__ = ["lookup", "no_such_tool"]


def lookup(rt: Runtime, st: CallState) -> Step:
    """A tool of another tenant or environment is refused as one that does not exist (its
    name says nothing about it)."""
    if not isinstance(st.call.name, str):
        raise refuse(
            ErrorCode.UNKNOWN_TOOL,
            f"the tool name is not text but {json_kind(st.call.name)}; name a tool",
        )
    tool = rt.catalog.get(st.call.name)
    if tool is None or not exists_for(st.principal, tool.spec):
        raise no_such_tool(rt, st)
    st.tool = tool
    return None


def no_such_tool(rt: Runtime, st: CallState) -> CallRefused:
    """The refusal of a call to a tool the principal cannot see, whether or not it exists."""
    visible = (t.spec.name for t in rt.catalog if may_use(st.principal, t.spec))
    return refuse(
        ErrorCode.UNKNOWN_TOOL,
        f"there is no tool named {st.call.name!r}",
        **suggested(st.call.name, visible),
    )
