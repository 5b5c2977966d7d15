import shutil
from pathlib import Path

import pytest

from toolkeeper.cli import main
from toolkeeper.eval.bench_retrieval import build_catalog

FIXTURES = Path(__file__).parent / "fixtures"


def test_the_bench_catalog_is_the_pools_plus_namespaced_variants(tmp_path: Path) -> None:
    for pool, name in (("bfcl", "bfcl"), ("sealtools", "sealtools")):
        (tmp_path / pool).mkdir()
        shutil.copy(FIXTURES / f"{name}.tools.jsonl", tmp_path / pool / "tools.jsonl")
    pools = sum(
        len((tmp_path / p / "tools.jsonl").read_text().splitlines()) for p in ("bfcl", "sealtools")
    )
    specs = build_catalog(tmp_path, 300)
    assert len(specs) == 300
    assert len({s.name for s in specs}) == 300
    variants = specs[pools:]
    assert all("." in s.name and "served by the" in s.description for s in variants)


def test_a_bench_root_without_data_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "retrieval", "--bench-root", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"toolkeeper bench retrieval: no benchmark tools under {tmp_path}")
    assert "--bench-root" in err
