"""`toolkeeper eval safety`: the report of `eval.safety` as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys

from .._console import render_table

__all__ = ["safety"]


def safety(args: argparse.Namespace) -> int:
    """`toolkeeper eval safety`: the design notes' safety metrics over scripted scenarios."""
    from ..eval.safety import METRICS, evaluate_safety

    report = evaluate_safety(
        trials=args.trials,
        seed=args.seed,
        kills=args.kills,
        gateway=not args.no_gateway,
        controls=args.controls,
        only=args.scenarios,
    )
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(
        f"{report['trials']} trials (seed {report['seed']}), {report['kills']} processes "
        f"killed; routes: {', '.join(report['routes'])}; {report['seconds']:.1f} s"
    )
    sections = [
        ("", report),
        *([("controls: ", report["controls"])] if "controls" in report else []),
    ]
    for title, section in sections:
        if title:
            print(f"\n{title}{section['configuration']}")
        counts = ", ".join(f"{name} {n}" for name, n in section["scenarios"].items())
        print(f"scenarios: {counts}")
        rows = []
        for name, figures in section["metrics"].items():
            rate = figures["rate"]
            shown = "-" if rate is None else f"{rate:.3f}"
            of = f"{figures['numerator']}/{figures['denominator']}"
            rows.append([name.replace("_", " "), shown, of, METRICS[name][0]])
        print(render_table(["metric", "rate", "of", "design notes"], rows))
    return 0
