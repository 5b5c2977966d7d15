"""Promise 2: an approval (and a recorded result) for one call never runs (or answers) another.

The binding is the digest of the canonical JSON of the arguments. An attacker who got `A`
approved proposes `B` under the same call id (or, through the gateway, under the id the
gateway derives from the arguments): `B` must never run, and never be answered with `A`'s
result. The attacks aim at what JSON numbers allow: an int and a float that differ but print
alike between 2**53 and 1e21, the same value spelled many ways, nested anywhere.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from toolkeeper import CallStatus, ErrorCode, Keeper, ToolCall
from toolkeeper.schema.canonical import canonical_json
from toolkeeper.server import Deployment

from .conftest import TOKENS, ClientFactory, code_of
from .tools import MALLORY, effects, register

pytestmark = pytest.mark.anyio

EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples on every run: a failure is not left to chance
    database=None,
    phases=(Phase.explicit, Phase.generate),  # a failure is shown as found, unshrunk
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ISSUE_PAIR = (41778229342798590, 4.177822934279859e16)
"""The pair of the issue: an approval for the int ran the float."""

# -- what counts as the same value --------------------------------------------------------------


def same_value(a: Any, b: Any) -> bool:
    """Whether a tool receives the same JSON value: numbers equal exactly (1 and 1.0 alike),
    booleans apart from numbers, objects and arrays equal item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return Fraction(a) == Fraction(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# -- values a tool can receive, and their near twins ---------------------------------------------

BIG = st.integers(min_value=2**53 - 4, max_value=10**21 + 4)
BIG_FLOATS = st.floats(min_value=2.0**53, max_value=1e21)


def _twins() -> st.SearchStrategy[tuple[Any, Any]]:
    """Pairs of numbers that are close: an int and the double nearest it, neighbouring ints,
    a double and the ints beside its value, negatives of each."""
    pairs = st.one_of(
        BIG.map(lambda n: (n, float(n))),
        BIG.map(lambda n: (n, n + 1)),
        BIG_FLOATS.map(lambda f: (f, int(Decimal(repr(f))))),  # the int its shortest digits say
        BIG_FLOATS.map(lambda f: (f, int(f) + 1)),
        BIG_FLOATS.map(lambda f: (f, int(f) - 1)),
        BIG_FLOATS.map(lambda f: (f, int(f))),
        st.floats(allow_nan=False, allow_infinity=False).map(lambda f: (f, -f)),
        st.integers().map(lambda n: (n, str(n))),
        st.integers(0, 1).map(lambda n: (n, bool(n))),
    )
    return pairs.map(lambda p: (-p[0], -p[1]) if _negatable(p) and p[0] % 2 else p)


def _negatable(pair: tuple[Any, Any]) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in pair)


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), BIG, BIG_FLOATS, st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False),
)  # fmt: skip
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),  # noqa: E501
    max_leaves=8,
)  # fmt: skip


@st.composite
def near_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    """Two JSON values that differ in one leaf, that leaf nested anywhere among others."""
    a, b = draw(_twins())
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["list", "dict", "sibling"]))
        other = draw(JSON)
        if kind == "list":
            a, b = [other, a], [other, b]
        elif kind == "dict":
            key = draw(st.text(max_size=4))
            a, b = {key: a}, {key: b}
        else:
            a, b = {"k": a, "j": other}, {"k": b, "j": other}
    return a, b


# -- the canonical form itself ------------------------------------------------------------------


@EXAMPLES
@given(pair=near_pairs())
@example(pair=ISSUE_PAIR)
@example(pair=({"n": [ISSUE_PAIR[1]]}, {"n": [ISSUE_PAIR[0]]}))
def test_distinct_values_never_share_a_canonical_form(pair: tuple[Any, Any]) -> None:
    a, b = pair
    if not same_value(a, b):
        assert canonical_json(a) != canonical_json(b)


@EXAMPLES
@given(value=JSON, indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_one_value_spelled_many_ways_has_one_canonical_form(
    value: Any, indent: int | None, ascii_only: bool
) -> None:
    """Whitespace, key order and escapes do not make another value (nor another call)."""
    spelled = json.dumps(value, indent=indent, ensure_ascii=ascii_only, sort_keys=not ascii_only)
    assert canonical_json(json.loads(spelled)) == canonical_json(value)


# -- through the executor: a recorded call answers only its own arguments -----------------------


def _texts(a: Any, b: Any) -> tuple[str, str]:
    return (
        json.dumps({"value": a}, ensure_ascii=False),
        json.dumps({"value": b}, ensure_ascii=True, indent=1),
    )


@EXAMPLES
@given(pair=near_pairs(), as_text=st.booleans(), batch=st.booleans())
@example(pair=ISSUE_PAIR, as_text=True, batch=False)
@example(pair=ISSUE_PAIR, as_text=False, batch=True)
async def test_a_recorded_call_never_answers_other_arguments(
    pair: tuple[Any, Any], as_text: bool, batch: bool
) -> None:
    """Proposed again under its call id with other arguments (as text or parsed, alone or in
    a batch), a call is a CALL_ID_CONFLICT: never the first call's result for the second."""
    a, b = pair
    if same_value(a, b):
        return
    first_args, second_args = _texts(a, b) if as_text else ({"value": a}, {"value": b})
    keeper = Keeper(ledger="memory://")
    register(keeper)
    async with keeper:
        first = ToolCall(call_id="c", name="adv.inspect", arguments=first_args, principal=MALLORY)
        second = ToolCall(call_id="c", name="adv.inspect", arguments=second_args, principal=MALLORY)
        assert (await keeper.execute(first)).status is CallStatus.SUCCEEDED
        if batch:
            [answer] = await keeper.execute_many([second])
        else:
            answer = await keeper.execute(second)
    assert answer.error is not None and answer.error.code is ErrorCode.CALL_ID_CONFLICT


# -- an approval, on every path ----------------------------------------------------------------

APPROVED = 41778229342798590
OTHERS = [
    pytest.param(41778229342798592, id="int"),
    pytest.param(4.177822934279859e16, id="float"),
]


def _take(call_id: str, path: Path, value: Any, *, via_call_tool: bool = False) -> ToolCall:
    arguments = {"path": str(path), "value": value}
    if via_call_tool:
        return ToolCall(
            call_id=call_id,
            name="call_tool",
            arguments={"name": "adv.take", "arguments": arguments},
            principal=MALLORY,
        )
    return ToolCall(call_id=call_id, name="adv.take", arguments=arguments, principal=MALLORY)


@pytest.mark.parametrize("other", OTHERS)
@pytest.mark.parametrize("path", ["execute", "execute_many", "call_tool"])
async def test_an_approval_for_one_number_never_runs_another(
    keeper: Keeper, effect_file: Path, path: str, other: Any
) -> None:
    via = path == "call_tool"
    if via:
        keeper.enable_discovery()
    async with keeper:
        asked = await keeper.execute(_take("c1", effect_file, APPROVED, via_call_tool=via))
        assert asked.error is not None and asked.error.code is ErrorCode.APPROVAL_REQUIRED
        assert asked.approval_id is not None
        await keeper.approvals.approve(asked.approval_id, by="ops")
        tampered = _take("c1", effect_file, other, via_call_tool=via)
        if path == "execute_many":
            [ran] = await keeper.execute_many([tampered])
        else:
            ran = await keeper.execute(tampered)
    assert ran.status is not CallStatus.SUCCEEDED
    assert effects(effect_file) == []


async def test_an_approval_for_one_string_never_runs_another(
    keeper: Keeper, effect_file: Path
) -> None:
    """The control: arguments an attacker cannot make print alike."""
    async with keeper:
        asked = await keeper.execute(_take("c1", effect_file, "pay bob 10"))
        assert asked.approval_id is not None
        await keeper.approvals.approve(asked.approval_id, by="ops")
        ran = await keeper.execute(_take("c1", effect_file, "pay bob 10000"))
        proper = await keeper.execute(_take("c1", effect_file, "pay bob 10"))
    assert ran.error is not None and ran.error.code is ErrorCode.CALL_ID_CONFLICT
    assert proper.status is CallStatus.SUCCEEDED
    assert effects(effect_file) == ["'pay bob 10'"]


@pytest.mark.parametrize("other", OTHERS)
async def test_an_approval_through_the_gateway_never_runs_another_number(
    http_client: ClientFactory, deployment: Deployment, effect_file: Path, other: Any
) -> None:
    """A plain client has no call ids: the gateway derives them from the arguments, so two
    arguments that print alike were one call, approved once."""
    async with http_client(TOKENS["mallory"]) as mallory:
        asked = await mallory.call_tool("adv.take", {"path": str(effect_file), "value": APPROVED})
        assert code_of(asked) == "APPROVAL_REQUIRED"
        approval_id = (asked.meta or {})["dev.toolkeeper/approval-id"]
        await deployment.keeper.approvals.approve(approval_id, by="ops")
        with anyio.fail_after(30):
            ran = await mallory.call_tool("adv.take", {"path": str(effect_file), "value": other})
    assert ran.is_error
    assert effects(effect_file) == []


# -- what the person approving reads --------------------------------------------------------------

UNSEEN = (
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # embeddings, overrides, isolates
    "\u200b\u200c\u200d\u200e\u200f\ufeff\u061c"  # zero-width characters and marks
)
"""Characters that reorder or hide text: a question holding them raw can show one call and
approve another."""
SPOOFED = "pay bob 10\u202e0000001\u200b"


def _raw_unseen(text: str) -> list[str]:
    return [f"U+{ord(c):04X}" for c in text if c in UNSEEN]


async def test_the_approval_question_shows_no_raw_reordering_or_invisible_characters(
    http_client: ClientFactory, effect_file: Path
) -> None:
    asked: list[str] = []

    async def decline(context: Any, params: Any) -> Any:
        import mcp_types

        asked.append(params.message)
        return mcp_types.ElicitResult(action="decline")

    async with http_client(TOKENS["person"], elicitation_callback=decline) as person:
        result = await person.call_tool("adv.take", {"path": str(effect_file), "value": SPOOFED})
    assert code_of(result) == "APPROVAL_DENIED"
    [question] = asked
    assert _raw_unseen(question) == []


def test_approvals_list_shows_no_raw_reordering_or_invisible_characters(
    keeper: Keeper, effect_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolkeeper.cli import main

    try:
        asked = keeper.execute_sync(_take("c1", effect_file, SPOOFED))
    finally:
        keeper.close_sync()
    assert asked.approval_id is not None
    capsys.readouterr()
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert main(["approvals", "list", "--ledger", ledger, "--json"]) == 0
    listed = capsys.readouterr().out
    assert asked.approval_id in listed
    assert _raw_unseen(listed) == []
    assert main(["approvals", "show", asked.approval_id, "--ledger", ledger]) == 0
    assert _raw_unseen(capsys.readouterr().out) == []
