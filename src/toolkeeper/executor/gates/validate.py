"""4. Validate: the arguments must parse to an object that matches the input schema."""

from __future__ import annotations

import logging

from ...core.errors import ErrorCode
from ...schema.validate import SchemaError
from ..arguments import check_arguments
from ..runtime import Runtime
from ..state import CallState
from ..steps import Step, refuse

__all__ = ["validate"]

_log = logging.getLogger("toolkeeper")


def validate(rt: Runtime, st: CallState) -> Step:
    """Defaults are applied and sensitive values redacted for the record (`check_arguments`)."""
    assert st.tool is not None
    if st.parse_error is not None or st.arguments is None:
        message = st.parse_error or "arguments must be a JSON object"
        raise refuse(
            ErrorCode.INVALID_ARGUMENTS,
            message,
            violations=[{"pointer": "", "keyword": "json", "message": message}],
        )
    try:
        prepared = rt.prepared(st.tool)
    except SchemaError as exc:  # an upstream's broken schema: no call to it can be checked
        _log.warning("tool %s has an invalid input schema: %s", st.tool.spec.name, exc)
        raise refuse(
            ErrorCode.TOOL_ERROR,
            f"{st.tool.spec.name!r} declares an input schema that is not valid JSON Schema, "
            "so its arguments cannot be checked; the call was not run",
        ) from exc
    check_arguments(st, prepared)
    return None
