"""The executor benchmark on a tiny run: its report, not its speed (speed lives in the bench)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.bench.executor import run_executor_bench
from toolkeeper.bench.peers import PEERS, Case, Peer, PeerUnavailable
from toolkeeper.core.states import CallStatus
from toolkeeper.ledger import SQLiteStore

OWN = [
    "toolkeeper.memory",
    "toolkeeper.memory_otel",
    "toolkeeper.sqlite",
    "toolkeeper.sqlite_write",
]


@pytest.mark.anyio
async def test_a_tiny_run_measures_every_toolkeeper_call_and_every_installed_peer(
    tmp_path: Path,
) -> None:
    report = await run_executor_bench(calls=50, repeats=1, warmup=3, directory=tmp_path)
    data = json.loads(json.dumps(report.to_dict()))

    assert report.all_calls_succeeded
    assert list(data["cases"]) == OWN + [p.key for p in PEERS]
    for key in OWN:
        case = data["cases"][key]
        assert (case["status"], case["calls"], case["failures"]) == ("ok", 50, 0)
        assert 0 < case["min_us"] <= case["median_us"] <= case["p99_us"]
    for peer in PEERS:
        case = data["cases"][peer.key]
        assert case["status"] in {"ok", "not installed"}
        if case["status"] == "ok":
            assert case["failures"] == 0
            assert set(data["ratios"]) == set(OWN)
            assert all(peer.key in data["ratios"][key] for key in OWN)
    assert set(data["targets"]) == {
        f"{case}_{what}" for case in "abc" for what in ("median", "vs_openai_agents")
    } | {"a_otel_vs_a"}
    assert all(t["met"] in (True, False, None) for t in data["targets"].values())


@pytest.mark.anyio
async def test_the_write_case_records_every_call_of_every_run_in_its_ledger_and_audit_file(
    tmp_path: Path,
) -> None:
    for _ in range(2):  # a second run in the same place makes new calls, never replays
        await run_executor_bench(calls=20, repeats=2, warmup=4, directory=tmp_path, peers=())

    async with SQLiteStore(tmp_path / "bench-write.db") as store:
        records = await store.list_calls(statuses=[CallStatus.SUCCEEDED])
    assert len(records) == 2 * (4 + 2 * 20)
    assert {r.effect for r in records} == {"write"}
    events = [
        json.loads(line) for line in (tmp_path / "bench-write.audit.jsonl").read_text().splitlines()
    ]
    assert [e["status"] for e in events].count("RUNNING") == len(records)


def _peer(key: str, build: Any) -> Peer:
    return Peer(key=key, name=key, distribution=key, build=build)


@pytest.mark.anyio
async def test_a_missing_or_broken_peer_is_reported_and_the_rest_is_still_measured(
    tmp_path: Path,
) -> None:
    async def missing(func: Any) -> Case:
        raise PeerUnavailable('absent is not installed (pip install "toolkeeper[bench]")')

    async def wrong(func: Any) -> Case:
        async def invoke(call_id: str, arguments: str) -> int:
            return -1

        return Case(key="wrong", label="wrong", version=None, invoke=invoke, check=_equal)

    async def raising(func: Any) -> Case:
        async def invoke(call_id: str, arguments: str) -> int:
            raise RuntimeError("broken")

        return Case(key="raising", label="raising", version=None, invoke=invoke, check=_equal)

    peers = [_peer("absent", missing), _peer("wrong", wrong), _peer("raising", raising)]
    report = await run_executor_bench(calls=5, repeats=1, warmup=1, directory=tmp_path, peers=peers)

    statuses = {c.key: c.status for c in report.cases}
    assert statuses == dict.fromkeys(OWN, "ok") | {
        "absent": "not installed",
        "wrong": "error",
        "raising": "error",
    }
    assert report.to_dict()["ratios"] == {key: {} for key in OWN}
    assert report.to_dict()["targets"]["a_vs_openai_agents"]["met"] is None
    assert not report.targets_met


def _equal(result: Any, expected: int) -> bool:
    return bool(result == expected)


@pytest.mark.anyio
async def test_calls_and_repeats_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await run_executor_bench(calls=0, peers=())


def test_importing_the_bench_imports_no_peer_framework() -> None:
    code = (
        "import sys, toolkeeper.bench\n"
        "print(sorted({'agents', 'pydantic_ai', 'langchain_core'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_paired_ratios_compare_each_repeat_with_the_peer_measured_beside_it() -> None:
    from toolkeeper.bench.report import CaseReport, ExecutorBench
    from toolkeeper.bench.stats import Summary

    def case(key: str, medians: tuple[float, ...]) -> CaseReport:
        summary = Summary(
            calls=len(medians),
            median_us=sorted(medians)[len(medians) // 2],
            p99_us=max(medians),
            mean_us=sum(medians) / len(medians),
            min_us=min(medians),
            repeat_medians_us=medians,
        )
        return CaseReport(key=key, label=key, status="ok", summary=summary)

    # A host that runs at two speeds: the toolkeeper case is 10% quicker in every repeat,
    # but caught the slow speed in more of them than the peer did.
    own = case("toolkeeper.memory", (18.0, 18.0, 9.0, 18.0, 9.0))
    peer = case("openai_agents", (20.0, 10.0, 10.0, 20.0, 10.0))
    report = ExecutorBench(calls=5, repeats=5, warmup=1, cases=(own, peer), targets=())
    assert report.ratios["toolkeeper.memory"]["openai_agents"] == 1.8
    assert report.paired_ratios["toolkeeper.memory"]["openai_agents"] == 0.9
    assert report.to_dict()["paired_ratios"] == {"toolkeeper.memory": {"openai_agents": 0.9}}
