"""3. Authorize: the principal must be granted the tool."""

from __future__ import annotations

from ...policy.grants import may_use
from ..runtime import Runtime
from ..state import CallState
from ..steps import Step
from .lookup import no_such_tool

__all__ = ["authorize"]


def authorize(rt: Runtime, st: CallState) -> Step:
    """A tool the principal may not use is refused as one that does not exist: the same code,
    message, details and record (a tool it may not see is none of its business)."""
    assert st.tool is not None
    if may_use(st.principal, st.tool.spec):
        return None
    st.tool = None  # (recorded and answered as a call to no tool)
    raise no_such_tool(rt, st)
