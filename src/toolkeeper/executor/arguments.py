"""A call's arguments: parsed once and digested (for dedupe), then validated (for the rest)."""

from __future__ import annotations

import json
from dataclasses import replace

from ..core.errors import CallRefused, ErrorCode
from ..core.ids import json_kind
from ..observe.redact import overlaps, redact
from ..schema.canonical import canonical_json, digest_bytes, parse_canonical
from ..schema.validate import Violation, apply_defaults, violations_text
from .runtime import Runtime
from .state import CallState, Prepared
from .steps import refuse

__all__ = ["check_arguments", "parse_arguments"]


def parse_arguments(rt: Runtime, st: CallState) -> None:
    """Fill in `st.arguments` and `st.request_digest`, or `st.parse_error` when the arguments
    are not a JSON object (refused later, by validate, once the ledger has been read).

    Raises:
        CallRefused: PAYLOAD_TOO_LARGE.
    """
    raw = st.call.arguments
    if isinstance(raw, str):
        # A character is at most 4 bytes of UTF-8: most texts need no encoding to be sized.
        size = (
            len(raw)
            if len(raw) * 4 <= rt.max_argument_bytes
            else len(raw.encode("utf-8", "surrogatepass"))
        )
        if size > rt.max_argument_bytes:
            raise _too_large(
                f"arguments are {size} bytes; the limit is {rt.max_argument_bytes}", rt
            )
        fast = parse_canonical(raw, rt.digest_key)
        if fast is not None and isinstance(fast[0], dict):
            st.arguments, st.request_digest = fast
            return
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:
            _unparsed(
                rt, st, f"arguments are not valid JSON: {exc}", raw.encode("utf-8", "replace")
            )
            return
    else:
        parsed = raw
    try:
        text = canonical_json(parsed)
    except (TypeError, ValueError, RecursionError) as exc:
        try:
            shown = repr(raw)
        except Exception:  # (an int too long to print, an object whose repr raises)
            shown = f"<{type(raw).__name__}>"
        _unparsed(rt, st, f"arguments are not JSON data: {exc}", shown.encode("utf-8", "replace"))
        return
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        # An unpaired \ud800-\udfff escape decodes to no Unicode character: no tool or
        # ledger can take it.
        message = (
            "arguments are not JSON data: they hold a lone UTF-16 surrogate (an unpaired "
            "\\uD800-\\uDFFF escape), which is not a character"
        )
        _unparsed(rt, st, message, text.encode("utf-8", "surrogatepass"))
        return
    if not isinstance(raw, str) and len(encoded) > rt.max_argument_bytes:
        raise _too_large(f"arguments exceed the limit of {rt.max_argument_bytes} bytes", rt)
    st.request_digest = digest_bytes(encoded, rt.digest_key)
    if isinstance(parsed, dict):
        st.arguments = parsed
    else:
        st.parse_error = f"arguments must be a JSON object, not {json_kind(parsed)}"


def _unparsed(rt: Runtime, st: CallState, why: str, raw: bytes) -> None:
    st.parse_error = why
    st.request_digest = "raw:" + digest_bytes(raw, rt.digest_key)


def _too_large(message: str, rt: Runtime) -> CallRefused:
    return refuse(ErrorCode.PAYLOAD_TOO_LARGE, message, limit=rt.max_argument_bytes)


def check_arguments(st: CallState, prepared: Prepared) -> None:
    """Validate the parsed arguments, apply defaults, and redact them for the record.

    Raises:
        CallRefused: INVALID_ARGUMENTS.
    """
    assert st.tool is not None and st.arguments is not None
    st.prepared = prepared
    violations = prepared.validator.violations(st.arguments)
    if violations:
        raise _invalid(prepared, violations)
    st.validated = (
        apply_defaults(st.tool.spec.input_schema, st.arguments)
        if prepared.has_defaults
        else st.arguments
    )
    if prepared.check is not None:
        violations = prepared.check(st.validated)
        if violations:
            raise _invalid(prepared, violations)
    st.redacted = redact(st.validated, prepared.sensitive)


def _invalid(prepared: Prepared, violations: list[Violation]) -> CallRefused:
    if prepared.sensitive:
        # A validator quotes the value it refused: never a sensitive one, nor an object or
        # array holding one (`oneOf`, `maxItems`, a model's own validator quote them whole).
        violations = [
            replace(v, message=f"the value does not satisfy {v.keyword!r} (not shown)")
            if v.keyword != "required" and overlaps(prepared.sensitive, v.pointer)
            else v
            for v in violations
        ]
    return refuse(
        ErrorCode.INVALID_ARGUMENTS,
        violations_text(violations),
        violations=[v.to_dict() for v in violations],
    )
