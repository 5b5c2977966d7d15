"""Third-party corpora: every BFCL doc converts to all five formats as SDK-valid objects, and
labelled arguments are judged right after import (issue 3, items 6 and 7)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.core.errors import ErrorCode
from toolkeeper.core.values import ToolSpec
from toolkeeper.dialects import DIALECTS, get_dialect, get_importer
from toolkeeper.dialects.argcheck import check_argument, check_arguments

from .sdk import DEFINITION

BENCH = Path(__file__).parents[2] / "../shared/bench"


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        pytest.skip(f"{path} is not here (the bench data lives beside the clone)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def bfcl_docs() -> list[dict[str, Any]]:
    return _rows(BENCH / "bfcl/tools.jsonl")


@pytest.fixture(scope="module")
def bfcl_specs(bfcl_docs: list[dict[str, Any]]) -> dict[str, ToolSpec]:
    importer = get_importer("bfcl")
    return {doc["id"]: importer.import_tool(doc).value for doc in bfcl_docs}


@pytest.fixture(scope="module")
def seal_specs() -> dict[str, ToolSpec]:
    importer = get_importer("sealtools")
    return {
        doc["id"]: importer.import_tool(doc).value for doc in _rows(BENCH / "sealtools/tools.jsonl")
    }


def test_every_bfcl_doc_imports(
    bfcl_docs: list[dict[str, Any]], bfcl_specs: dict[str, ToolSpec]
) -> None:
    assert len(bfcl_specs) == len(bfcl_docs) == 2886
    assert all(spec.input_schema["type"] == "object" for spec in bfcl_specs.values())


@pytest.mark.parametrize("name", list(DIALECTS))
def test_every_bfcl_doc_exports_as_an_sdk_valid_definition(
    name: str, bfcl_specs: dict[str, ToolSpec]
) -> None:
    dialect = get_dialect(name)
    check = DEFINITION[name]
    lossless = 0
    for spec in bfcl_specs.values():
        exported = dialect.export_tool(spec)
        check(exported.value)
        lossless += exported.lossless
    assert 0 < lossless <= len(bfcl_specs)


def test_bfcl_import_reports_what_it_widened(bfcl_docs: list[dict[str, Any]]) -> None:
    importer = get_importer("bfcl")
    kinds = Counter(
        (loss.keyword, loss.action.value)
        for doc in bfcl_docs
        for loss in importer.import_tool(doc).losses
    )
    assert kinds[("type", "rewritten")] >= 13  # every BFCL tuple read as an array


def test_every_bfcl_mutation_is_refused_with_a_pointer_to_the_argument(
    bfcl_specs: dict[str, ToolSpec],
) -> None:
    rows = _rows(BENCH / "bfcl/args.dev.jsonl")
    plain = check_arguments(bfcl_specs, rows)
    coerced = check_arguments(bfcl_specs, rows, coerce_first=True)
    for report in (plain, coerced):
        assert report.missing_tools == 0
        assert report.mutations > 4000
        assert report.mutations_rejected == report.mutations
        assert report.mutations_pointed == report.mutations
    print(
        f"\nbfcl gold pass rate: {plain.gold_pass_rate:.4f} plain, "
        f"{coerced.gold_pass_rate:.4f} with coercion"
    )
    assert 0.9 < plain.gold_pass_rate <= coerced.gold_pass_rate < 1.0


def test_every_sealtools_mutation_is_refused_with_a_pointer_to_the_argument(
    seal_specs: dict[str, ToolSpec],
) -> None:
    rows = _rows(BENCH / "sealtools/args.dev.jsonl")
    plain = check_arguments(seal_specs, rows)
    coerced = check_arguments(seal_specs, rows, coerce_first=True)
    for report in (plain, coerced):
        assert report.mutations_rejected == report.mutations > 5000
        assert report.mutations_pointed == report.mutations
    print(
        f"\nsealtools gold pass rate: {plain.gold_pass_rate:.4f} plain, "
        f"{coerced.gold_pass_rate:.4f} with coercion"
    )
    assert plain.gold_pass_rate < coerced.gold_pass_rate
    assert coerced.rules["numeric_string"] > 0


def test_a_refused_row_carries_invalid_arguments_and_its_violations() -> None:
    spec = (
        get_importer("sealtools")
        .import_tool(
            {
                "name": "calculateForce",
                "parameters": {
                    "properties": {"mass": {"type": "float"}, "acceleration": {"type": "float"}},
                    "required": ["mass", "acceleration"],
                },
            }
        )
        .value
    )
    row = {"id": "r", "kind": "gold", "arguments": {"mass": "37.5", "acceleration": 2}}
    refused = check_argument(spec, row, coerce_first=False)
    accepted = check_argument(spec, row, coerce_first=True)
    assert refused.error is not None
    assert refused.error.code is ErrorCode.INVALID_ARGUMENTS
    assert [v["pointer"] for v in refused.error.details["violations"]] == ["/mass"]
    assert accepted.error is None
    assert [(c.pointer, c.rule, c.after) for c in accepted.coercions] == [
        ("/mass", "numeric_string", 37.5)
    ]
