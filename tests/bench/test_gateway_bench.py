"""The gateway benchmark on a tiny run: its report, not its speed (speed lives in the bench)."""

from __future__ import annotations

import json
from pathlib import Path

from toolkeeper.server.bench import bench_gateway


def test_a_tiny_run_reports_every_case_and_the_ratios_of_issue_5(tmp_path: Path) -> None:
    report = bench_gateway(calls=10, repeats=1, warmup=2, directory=str(tmp_path))
    data = json.loads(json.dumps(report.to_dict()))

    for name in ("direct", "gateway"):
        case = data["cases"][name]
        assert (case["calls"], case["failures"]) == (10, 0)
        assert 0 < case["median_us"] <= case["p99_us"]
    ratios, targets = data["ratios"], data["targets"]
    assert ratios["gateway_p50_vs_direct"] == round(
        data["cases"]["gateway"]["median_us"] / data["cases"]["direct"]["median_us"], 3
    )
    assert targets["gateway_p50_at_most_2x_direct"] == (ratios["gateway_p50_vs_direct"] <= 2.0)
    if data["cases"]["fastmcp_proxy"] is None:  # the bench extra is not installed
        assert "toolkeeper[bench]" in data["skipped"]["fastmcp_proxy"]
        assert ratios["fastmcp_proxy_p50_vs_direct"] is None
    else:
        assert data["cases"]["fastmcp_proxy"]["failures"] == 0
        assert ratios["fastmcp_proxy_p50_vs_direct"] > 0
