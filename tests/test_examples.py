"""Every file of examples/ runs as a user would run it (`python examples/NAME.py`, in a new
process, from a folder of its own) and prints what its docs say it shows."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(name: str, cwd: Path, timeout: float = 120) -> list[str]:
    """The lines `examples/<name>.py` prints, run in `cwd` (it must exit 0)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKEEPER_LEDGER")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_every_example_is_run_by_a_test_here() -> None:
    source = Path(__file__).read_text()
    tested_elsewhere = {"research_agent", "demo_tools"}
    for path in EXAMPLES.glob("*.py"):
        assert path.stem in tested_elsewhere or f'run("{path.stem}"' in source, path.name


def test_quickstart_holds_the_refund_for_approval_then_replays_it_on_a_rerun(
    tmp_path: Path,
) -> None:
    first = run("quickstart", tmp_path)
    assert first[1:4] == [
        "held: AWAITING_APPROVAL APPROVAL_REQUIRED",
        "approved by alice",
        "refunding 20 on A-1001 (this line prints once, ever)",
    ]
    assert first[4].startswith("refund: SUCCEEDED {'refund': 'rf-A-1001'")
    assert first[4].endswith("replayed: False")
    assert first[5] == "again: SUCCEEDED replayed: True"
    second = run("quickstart", tmp_path)  # the same ledger: nothing asked, nothing run again
    assert not any("held" in line or "refunding" in line for line in second)
    assert second[1].endswith("replayed: True")
    assert (tmp_path / "toolkeeper.db").exists()


def test_approvals_are_bound_to_arguments_and_budgets_refuse_with_their_codes(
    tmp_path: Path,
) -> None:
    lines = run("approvals_budgets", tmp_path)
    assert lines[:6] == [
        "pay 40: SUCCEEDED",
        "pay 500: AWAITING_APPROVAL APPROVAL_REQUIRED",
        "pending: pay {'to': 'bob', 'amount': 500}",
        "pay 500 after approval: SUCCEEDED",
        "pay 900 under p2's id: REJECTED CALL_ID_CONFLICT",
        "pay 900 to eve after denial: REJECTED APPROVAL_DENIED",
    ]
    assert lines[6:13] == [
        "task t1 call 1: SUCCEEDED",
        "task t1 call 2: SUCCEEDED",
        "task t1 call 3: SUCCEEDED",
        "task t1 call 4: REJECTED BUDGET_EXCEEDED",
        "task t2 call 1: SUCCEEDED",
        "task t2 call 2: SUCCEEDED",
        "task t2 call 3: REJECTED RATE_LIMITED",
    ]
    assert lines[13].startswith("  retry after ")
    assert list(tmp_path.iterdir()) == []  # a memory ledger


def test_one_call_goes_through_each_vendor_format_and_back(tmp_path: Path) -> None:
    lines = run("dialects", tmp_path)
    formats = [line.removeprefix("== ") for line in lines if line.startswith("== ")]
    assert formats == ["openai_chat", "openai_responses", "anthropic", "gemini", "mcp"]
    parsed = [line for line in lines if line.startswith("  parsed:")]
    assert len(parsed) == 5
    assert all(line.endswith("weather.forecast {'city': 'Paris', 'days': 2}") for line in parsed)
    results = [line for line in lines if line.startswith("  result:")]
    assert len(results) == 5
    assert all('\\"sky\\": \\"clear\\"' in r or '"sky": "clear"' in r for r in results)
    exported = [line.split()[2] for line in lines if line.startswith("  exported as:")]
    assert exported == [
        "weather_forecast",
        "weather_forecast",
        "weather_forecast",
        "weather.forecast",
        "weather.forecast",
    ]


@pytest.mark.slow  # (the first search embeds the tools with the bundled model)
def test_retrieval_selects_what_fits_among_permitted_tools_and_abstains(tmp_path: Path) -> None:
    pytest.importorskip("tantivy")
    lines = run("retrieval", tmp_path, timeout=240)
    said = {line.partition(" -> ")[0]: line.partition(" -> ")[2] for line in lines}
    assert said["refund request"].startswith("['refund_order'")
    assert said["parcel request"] == "['track_package']"
    assert said["delete request"] == "False"  # never scored: the principal may not use it
    assert said["sonnet request"] == "[] (no tool fits)"
    assert said["aselect"] == "['track_package']"


def test_the_agent_pauses_for_approval_and_resumes_to_its_answer(tmp_path: Path) -> None:
    lines = run("agent_offline", tmp_path)
    assert lines[:3] == [
        "first run: awaiting_approval",
        "  get_order -> SUCCEEDED",
        "  refund -> AWAITING_APPROVAL",
    ]
    assert lines[4:8] == [
        "resumed: completed",
        "  get_order -> SUCCEEDED",
        "  refund -> SUCCEEDED",
        "  answer: Refunded 20.00 on order A-1001.",
    ]
    assert lines[8] == "resumed again (nothing runs twice): completed"


@pytest.mark.slow  # (a gateway process and its mcp-server-time upstream start)
def test_the_gateway_over_stdio_lists_holds_and_after_approval_runs_the_call(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp_server_time")
    lines = run("gateway_client", tmp_path, timeout=240)
    assert lines == [
        "tools: demo.add_note, demo.clear_notes, demo.list_notes, time.convert_time,"
        " time.get_current_time",
        "time.get_current_time: ok",
        "demo.add_note: APPROVAL_REQUIRED",
        "approved by alice",
        "demo.add_note again: note 1 kept",
        'demo.list_notes: ["buy milk"]',
    ]


def test_an_http_service_is_called_through_the_pipeline_and_a_retry_replays(
    tmp_path: Path,
) -> None:
    lines = run("http_connector", tmp_path)
    assert lines == [
        "tool shop.getProduct: read_only, idempotent=True",
        "tool shop.placeOrder: write, idempotent=False",
        "getProduct: {'sku': 'L-7', 'name': 'Desk lamp', 'price': 24.5, 'stock': 12}",
        "placeOrder: SUCCEEDED effect_ref: /orders/o-1",
        "placeOrder again: SUCCEEDED replayed: True",
        "orders the shop received: 1",
        "Idempotency-Key sent: True",
    ]


def test_programs_run_as_tools_with_each_argument_one_argv_entry(tmp_path: Path) -> None:
    lines = run("cli_connector", tmp_path)
    assert lines == [
        "text.count_lines: exit 0, stdout '3 DIR/notes.txt\\n'",
        "text.find: exit 0, stdout '1:buy milk\\n3:buy stamps\\n'",
        "text.find: exit 1, stdout ''",
        "text.count_lines: FAILED TOOL_ERROR",
    ]


def test_opentelemetry_traces_each_call_or_the_example_says_it_needs_the_extra(
    tmp_path: Path,
) -> None:
    lines = run("otel", tmp_path)
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        assert lines == [
            'skipped: this example needs the otel extra: pip install "toolkeeper[otel]"'
        ]
        return
    assert (
        "span 'execute_tool delete_doc': status=AWAITING_APPROVAL events=['toolkeeper.gate.held']"
        in lines
    )
    assert "toolkeeper.calls{read_doc, SUCCEEDED} = 2" in lines
