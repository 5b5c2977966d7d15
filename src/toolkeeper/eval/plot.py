"""A PNG of recall@k curves, one line per retrieval method (needs `toolkeeper[eval]`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..retrieval._deps import require

__all__ = ["plot_recall"]


def plot_recall(report: dict[str, Any], path: str | Path, *, title: str = "") -> None:
    """Draw recall@k per method from an `evaluate_retrieval` report into a PNG file."""
    matplotlib: Any = require("matplotlib")
    matplotlib.use("Agg")
    pyplot: Any = require("matplotlib.pyplot")
    figure, axes = pyplot.subplots(figsize=(6, 4), dpi=120)
    for method, figures in report["methods"].items():
        curve = figures["curve"]
        ks = [int(k) for k in curve]
        axes.plot(ks, [curve[str(k)] for k in ks], marker="o", label=method)
    axes.set_xscale("log")
    axes.set_xticks([1, 2, 3, 5, 10, 20, 50], labels=["1", "2", "3", "5", "10", "20", "50"])
    axes.set_ylim(0.0, 1.0)
    axes.set_xlabel("k")
    axes.set_ylabel("recall@k")
    axes.set_title(f"{title} ({report['tools']} tools, {report['queries']} queries)".strip())
    axes.grid(True, alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(str(path))
    pyplot.close(figure)
