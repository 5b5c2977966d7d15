"""Business rules: plain callables that look at one validated call and decide.

A rule takes a `RuleInput` and returns a `Decision` (or None, meaning no objection), or an
awaitable of one. Rules run after validation, in order: tool rules first, then the keeper's
global rules. The first denial wins; any `require_approval` makes the call need approval;
`allow(skip_approval=True)` from a rule waives the default approval of a destructive tool.
A rule that raises, answers something other than a Decision, or (awaited) does not answer
within the tool's `timeout` refuses the call: rules fail closed.

Ready-made rules for the common cases: `path_inside`, `domain_in`, `at_most`.
"""

from __future__ import annotations

import math
import os
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import ErrorCode
from ..core.values import Principal, ToolCall, ToolSpec, name_tuple
from ..schema.validate import json_pointer, pointer_parts
from ..schema.validate import resolve_ref as _resolve

__all__ = [
    "Decision",
    "ParameterMissing",
    "Rule",
    "RuleInput",
    "Verdict",
    "allow",
    "at_most",
    "deny",
    "domain_in",
    "path_inside",
    "require_approval",
]


class Verdict(StrEnum):
    """What a rule concluded."""

    ALLOW = "allow"
    DENY = "deny"
    REQUIRE_APPROVAL = "require_approval"


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """A rule's answer."""

    verdict: Verdict
    """Allow, deny, or require a person's approval."""
    reason: str = ""
    """Why; shown to the model on a denial and to the approver on an approval request."""
    code: ErrorCode = ErrorCode.PERMISSION_DENIED
    """For a denial: PERMISSION_DENIED, or INVALID_ARGUMENTS when the arguments are at fault."""
    pointer: str | None = None
    """For a denial about one argument: its JSON pointer."""
    skip_approval: bool = False
    """For an allow: waive the approval a destructive tool needs by default."""

    def __post_init__(self) -> None:
        # "deny" and "INVALID_ARGUMENTS" as text mean the members: compared by identity later,
        # an unconverted string would let a denial through.
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        object.__setattr__(self, "code", ErrorCode(self.code))


@dataclass(frozen=True, kw_only=True, slots=True)
class RuleInput:
    """Everything a rule may look at."""

    spec: ToolSpec
    """The tool called."""
    arguments: Mapping[str, Any]
    """Validated arguments with defaults applied."""
    principal: Principal
    """Who the call acts for."""
    call: ToolCall
    """The call as proposed."""


Rule = Callable[[RuleInput], "Decision | Awaitable[Decision | None] | None"]
"""A business rule: given a call's `RuleInput`, a `Decision` (or None: no objection), sync
or async."""


def allow(*, skip_approval: bool = False, reason: str = "") -> Decision:
    """No objection; with `skip_approval`, also waive a destructive tool's default approval."""
    return Decision(verdict=Verdict.ALLOW, skip_approval=skip_approval, reason=reason)


def deny(
    reason: str, *, code: ErrorCode = ErrorCode.PERMISSION_DENIED, pointer: str | None = None
) -> Decision:
    """Refuse the call with a reason the model can act on."""
    return Decision(verdict=Verdict.DENY, reason=reason, code=code, pointer=pointer)


def require_approval(reason: str) -> Decision:
    """Let the call run only once a person approves these exact arguments."""
    return Decision(verdict=Verdict.REQUIRE_APPROVAL, reason=reason)


class ParameterMissing(LookupError):
    """The tool has no parameter of the name a ready-made rule checks. A rule given to the
    tool itself then refuses (a misspelled name must not let everything through); a rule of
    the whole keeper does not concern that tool."""


def _property(node: Any, name: str, root: Mapping[str, Any]) -> Any:
    """The schema of property `name` of an object schema (through `$ref`, arrays and
    `anyOf` branches), or None."""
    for _ in range(16):
        node = _resolve(node, root) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            return None
        properties = node.get("properties")
        if isinstance(properties, Mapping) and name in properties:
            return properties[name]
        if isinstance(node.get("items"), Mapping):
            node = node["items"]
            continue
        for branch in (
            *(node.get("anyOf") or ()),
            *(node.get("oneOf") or ()),
            *(node.get("allOf") or ()),
        ):
            found = _property(branch, name, root)
            if found is not None:
                return found
        return None
    return None


def _arguments_at(inp: RuleInput, param: str) -> list[Any]:
    """The values a ready-made rule checks: argument `param` (a name, or a JSON pointer into
    nested objects, through arrays), each element of an array; [] when it was not given.

    Raises:
        ParameterMissing: the tool has no such parameter.
        LookupError: the pointer goes on to a property the tool's schema does not have.
    """
    parts = pointer_parts(param) if param.startswith("/") else [param]
    values: list[Any] = [inp.arguments]
    for part in parts:
        values = [
            item[part]
            for item in _flat(values)
            if isinstance(item, Mapping) and item.get(part) is not None
        ]
    if values:
        return _flat(values)  # given: checked, whatever the schema says (it may be loose)
    root = inp.spec.input_schema
    node: Any = root
    for depth, part in enumerate(parts):
        node = _property(node, part, root)
        if node is None:
            if depth == 0:
                raise ParameterMissing(f"{inp.spec.name} has no parameter {part!r}")
            where = "/" + "/".join(parts[: depth + 1])
            raise LookupError(f"{inp.spec.name} has no argument at {where}")
    return []  # a parameter the tool has, not given this time


def _flat(values: list[Any]) -> list[Any]:
    """`values` with every array, and array of arrays, replaced by its elements."""
    out: list[Any] = []
    for value in values:
        out.extend(_flat(list(value)) if isinstance(value, list | tuple) else [value])
    return out


def _pointer(param: str) -> str:
    return param if param.startswith("/") else json_pointer([param])


def _unchecked(param: str, what: str) -> Decision:
    return deny(f"{param} must be {what} to be checked", pointer=_pointer(param))


def path_inside(param: str, root: str | os.PathLike[str]) -> Rule:
    """Deny unless argument `param` (each element of it, for an array) is an absolute path
    inside `root`. `param` is a parameter name or a JSON pointer (`/target/path`).

    The tool receives the argument as it was proposed, so the rule passes only a path that
    names the same file from any working directory: a relative one (`notes.txt`, `~/x`, `.`,
    the empty string) is refused with INVALID_ARGUMENTS (checked against `root` and opened
    against the tool's working directory, it named two files); so is one holding a NUL. An
    absolute path is resolved (`..`, symbolic links) when the rule runs and must lie inside
    `root` (resolved when the rule is made), as written and in Unicode's compatibility
    normalisation (NFKC: a fullwidth `．．／` is `../` to a tool that normalises), or the call
    is denied with PERMISSION_DENIED. A link created or changed between the check and the
    tool's own open is not covered: give the tool a root no one else writes links into. Tell
    the model the root in the tool's description, as the refusal does not name it.
    """
    base = Path(root).resolve()

    def rule(inp: RuleInput) -> Decision | None:
        for value in _arguments_at(inp, param):
            if not isinstance(value, str):
                return _unchecked(param, "a path")
            if "\x00" in value or not os.path.isabs(value):
                return deny(
                    f"{param} must be an absolute path inside the sandbox directory",
                    code=ErrorCode.INVALID_ARGUMENTS,
                    pointer=_pointer(param),
                )
            # A tool (or a server in another language) that normalises text before it opens
            # a path would open `／..／etc` as `/../etc`: both spellings must lie inside.
            spellings = (
                {value} if value.isascii() else {value, unicodedata.normalize("NFKC", value)}
            )
            if not all(_inside(spelling, base) for spelling in spellings):
                return deny(
                    f"{param} must be inside the sandbox directory", pointer=_pointer(param)
                )
        return None

    return rule


def _inside(path: str, base: Path) -> bool:
    """Whether absolute `path`, resolved (`..`, symbolic links), is `base` or below it."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):  # a loop of links, a name too long, a NUL
        return False
    # (a `..` left unresolved would make `parents` lexical: denied, never trusted)
    return ".." not in resolved.parts and (resolved == base or base in resolved.parents)


def domain_in(param: str, domains: Iterable[str]) -> Rule:
    """Deny unless argument `param` (each element, for an array) is a URL whose host is one of
    `domains` or a subdomain. `param` is a parameter name or a JSON pointer; `domains` is a
    list of host names (one given as text is that one, not its characters).

    Raises:
        ValueError: a domain is empty (or only dots): it would name no host, and let every
            URL without one (`file:///etc/passwd`, a bare path) through.
    """
    allowed = tuple(d.lower().strip(".") for d in name_tuple(domains))
    if not all(allowed):
        raise ValueError("domain_in: every domain must name a host, such as 'example.com'")

    def rule(inp: RuleInput) -> Decision | None:
        for value in _arguments_at(inp, param):
            if not isinstance(value, str):
                return _unchecked(param, "a URL")
            host = (urlsplit(value).hostname or "").lower()
            if not host or not any(host == d or host.endswith("." + d) for d in allowed):
                return deny(f"{param} must be on an allowed domain", pointer=_pointer(param))
        return None

    return rule


def at_most(param: str, cap: float, *, approve_above: bool = False) -> Rule:
    """Deny (or, with `approve_above`, require approval) when numeric argument `param` (any
    element, for an array) exceeds `cap`. `param` is a parameter name or a JSON pointer
    (`/payment/amount`); a value that is not a number is denied, not let through.

    Raises:
        ValueError: `cap` is not a number, or is NaN (which no value exceeds: every value
            would pass).
    """
    if isinstance(cap, bool) or not isinstance(cap, int | float) or math.isnan(cap):
        raise ValueError(f"at_most: the cap must be a number, not {cap!r}")

    def rule(inp: RuleInput) -> Decision | None:
        for value in _arguments_at(inp, param):
            if not isinstance(value, int | float) or isinstance(value, bool):
                return _unchecked(param, "a number")
            if value > cap:
                if approve_above:
                    # Not the value: a reason reaches the model, the request and the audit log
                    # in clear, and the parameter may be sensitive (the request shows it
                    # redacted or not, as the tool says).
                    return require_approval(f"{param} is above {cap}")
                return deny(f"{param} must be at most {cap}", pointer=_pointer(param))
        return None

    return rule
