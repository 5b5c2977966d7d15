"""Argument validity on real data: labelled arguments checked against imported schemas.

Given tool specs (imported with a dialect) and dataset rows (`tool_id`, `arguments`, `label`,
`kind`, `mutated_param`), `check_arguments` validates each row the way the executor does — a
refusal is an `INVALID_ARGUMENTS` `ToolError` whose `details["violations"]` point at the
faulty arguments — optionally after the opt-in `coerce` step, and tallies: how many gold
answers pass, and whether every mutation is refused with a violation pointing at the
argument that was mutated. Pure: the caller reads the files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ErrorCode, ToolError
from ..core.values import ToolSpec
from ..schema.coerce import Coercion, coerce
from ..schema.validate import compile_validator, json_pointer, violations_text

__all__ = ["ArgumentCheck", "ArgumentReport", "check_argument", "check_arguments"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ArgumentCheck:
    """The verdict on one row."""

    row_id: str
    """The row's id."""
    kind: str
    """`gold`, or the mutation (`drop_required`, `wrong_type`, `enum_violation`)."""
    error: ToolError | None
    """The refusal (INVALID_ARGUMENTS), or None when the arguments were accepted."""
    coercions: tuple[Coercion, ...] = ()
    """What the coercion step changed (only when it ran)."""
    points_at_mutation: bool = False
    """For a refused mutation: a violation points at the mutated argument."""


@dataclass(kw_only=True, slots=True)
class ArgumentReport:
    """Counts over a dataset."""

    rows: Counter[str] = field(default_factory=Counter)
    """Rows per kind."""
    accepted: Counter[str] = field(default_factory=Counter)
    """Accepted rows per kind."""
    pointed: Counter[str] = field(default_factory=Counter)
    """Refused mutations whose violations point at the mutated argument, per kind."""
    coerced_rows: int = 0
    """Rows the coercion step changed."""
    rules: Counter[str] = field(default_factory=Counter)
    """Coercions per rule."""
    missing_tools: int = 0
    """Rows whose tool was not among the specs (skipped)."""
    failures: list[ArgumentCheck] = field(default_factory=list)
    """Gold rows refused and mutations accepted or refused without a pointer."""

    @property
    def gold_pass_rate(self) -> float:
        """Share of gold rows accepted."""
        return self.accepted["gold"] / self.rows["gold"] if self.rows["gold"] else 0.0

    @property
    def mutations(self) -> int:
        """Mutated rows checked."""
        return sum(n for kind, n in self.rows.items() if kind != "gold")

    @property
    def mutations_rejected(self) -> int:
        """Mutated rows refused."""
        return self.mutations - sum(n for k, n in self.accepted.items() if k != "gold")

    @property
    def mutations_pointed(self) -> int:
        """Mutated rows refused with a violation at the mutated argument."""
        return sum(self.pointed.values())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the CLI prints."""
        return {
            "rows": dict(self.rows),
            "accepted": dict(self.accepted),
            "gold_pass_rate": round(self.gold_pass_rate, 4),
            "mutations": self.mutations,
            "mutations_rejected": self.mutations_rejected,
            "mutations_pointed": self.mutations_pointed,
            "coerced_rows": self.coerced_rows,
            "coercion_rules": dict(self.rules),
            "missing_tools": self.missing_tools,
        }


def check_argument(spec: ToolSpec, row: Mapping[str, Any], *, coerce_first: bool) -> ArgumentCheck:
    """Validate one row's arguments against `spec` (after coercion when asked)."""
    arguments = row.get("arguments")
    coercions: tuple[Coercion, ...] = ()
    if coerce_first:
        coerced = coerce(spec.input_schema, arguments)
        arguments, coercions = coerced.value, coerced.coercions
    error = None
    if not isinstance(arguments, Mapping):
        error = ToolError.of(
            ErrorCode.INVALID_ARGUMENTS,
            "arguments must be a JSON object",
            details={
                "violations": [{"pointer": "", "keyword": "type", "message": "not an object"}]
            },
        )
    else:
        violations = compile_validator(spec.input_schema).violations(arguments)
        if violations:
            error = ToolError.of(
                ErrorCode.INVALID_ARGUMENTS,
                violations_text(violations),
                details={"violations": [v.to_dict() for v in violations]},
            )
    pointed = False
    param = row.get("mutated_param")
    if error is not None and isinstance(param, str):
        target = json_pointer([param])
        pointed = any(
            v["pointer"] == target or v["pointer"].startswith(target + "/")
            for v in error.details["violations"]
        )
    return ArgumentCheck(
        row_id=str(row.get("id", "")),
        kind=str(row.get("kind", "gold")),
        error=error,
        coercions=coercions,
        points_at_mutation=pointed,
    )


def check_arguments(
    specs: Mapping[str, ToolSpec], rows: Iterable[Mapping[str, Any]], *, coerce_first: bool = False
) -> ArgumentReport:
    """Check every row whose `tool_id` is in `specs` and tally the verdicts."""
    report = ArgumentReport()
    for row in rows:
        spec = specs.get(str(row.get("tool_id")))
        if spec is None:
            report.missing_tools += 1
            continue
        check = check_argument(spec, row, coerce_first=coerce_first)
        report.rows[check.kind] += 1
        if check.coercions:
            report.coerced_rows += 1
            report.rules.update(c.rule for c in check.coercions)
        if check.error is None:
            report.accepted[check.kind] += 1
        elif check.points_at_mutation:
            report.pointed[check.kind] += 1
        wrong = (check.kind == "gold") == (check.error is not None)
        if wrong or (check.kind != "gold" and not check.points_at_mutation):
            report.failures.append(check)
    return report
