"""`toolkeeper dialects convert` and `check-args` on small files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkeeper.cli import main

BFCL_LINES = [
    {
        "id": "b:1",
        "name": "math.factorial",
        "description": "n!",
        "parameters": {
            "type": "dict",
            "properties": {"number": {"type": "integer"}},
            "required": ["number"],
        },
    },
    {
        "id": "b:2",
        "name": "area",
        "description": "Area.",
        "parameters": {
            "type": "dict",
            "properties": {"unit": {"type": "string", "default": "m"}},
            "required": [],
        },
    },
]


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in BFCL_LINES), encoding="utf-8")
    return path


def test_convert_writes_definitions_to_stdout_and_losses_to_stderr(
    tools_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["dialects", "convert", "--from", "bfcl", "--to", "anthropic", str(tools_file)]) == 0
    )
    out, err = capsys.readouterr()
    definitions = [json.loads(line) for line in out.splitlines()]
    assert [d["name"] for d in definitions] == ["math_factorial", "area"]
    assert "#0 math.factorial: /name name rewritten" in err
    assert "anthropic: 2 converted, 1 without loss" in err


def test_convert_json_counts_lossless_definitions_per_format(
    tools_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["dialects", "convert", "--from", "bfcl", "--to", "all", str(tools_file), "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["count"] == 2
    counts = {name: fmt["lossless"] for name, fmt in report["formats"].items()}
    assert counts == {
        "openai_chat": 0,
        "openai_responses": 0,
        "anthropic": 1,
        "gemini": 1,
        "mcp": 2,
    }
    assert report["formats"]["gemini"]["losses_by_keyword"] == {"default:moved_to_description": 1}


def test_convert_strict_fails_on_the_first_loss(
    tools_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            ["dialects", "convert", "--from", "bfcl", "--to", "gemini", str(tools_file), "--strict"]
        )
        == 1
    )
    assert "lossy conversion: default" in capsys.readouterr().err


def test_check_args_reports_gold_and_mutations(
    tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = tmp_path / "args.jsonl"
    rows = [
        {"id": "1", "tool_id": "b:1", "kind": "gold", "arguments": {"number": 5}},
        {"id": "2", "tool_id": "b:1", "kind": "gold", "arguments": {"number": "5"}},
        {
            "id": "3",
            "tool_id": "b:1",
            "kind": "wrong_type",
            "mutated_param": "number",
            "arguments": {"number": "five"},
        },
    ]
    args.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["dialects", "check-args", "--from", "bfcl", str(tools_file), str(args)]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert (
        main(["dialects", "check-args", "--from", "bfcl", str(tools_file), str(args), "--coerce"])
        == 0
    )
    coerced = json.loads(capsys.readouterr().out)
    assert (plain["gold_pass_rate"], coerced["gold_pass_rate"]) == (0.5, 1.0)
    assert plain["mutations_pointed"] == coerced["mutations_pointed"] == 1


@pytest.mark.parametrize(
    ("source", "items", "message"),
    [
        ("openai_chat", ["a", 1], "item 0 is a str, not a tool definition"),
        ("openai_chat", [{"type": "function", "function": "x"}], "item 0: a function definit"),
        ("anthropic", [{"description": "no name"}], "item 0: a function definition for Anthr"),
        ("anthropic", [{"type": "web_search_20250305", "name": "web_search"}], "Anthropic's own"),
    ],
)
def test_convert_says_which_item_is_not_a_definition(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str,
    items: list[object],
    message: str,
) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    assert main(["dialects", "convert", "--from", source, "--to", "anthropic", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_convert_gives_tools_whose_names_meet_after_rewriting_distinct_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tools.json"
    tools = [
        {"name": name, "description": "d", "input_schema": {"type": "object"}}
        for name in ("a b", "a_b")
    ]
    path.write_text(json.dumps(tools), encoding="utf-8")
    argv = ["dialects", "convert", "--from", "anthropic", "--to", "openai_chat", str(path)]
    assert main([*argv, "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["formats"]["openai_chat"]["items"]
    names = [item["definition"]["function"]["name"] for item in items]
    assert names[1] == "a_b" and names[0].startswith("a_b_")


def test_a_schema_that_is_not_json_schema_is_refused_naming_item_and_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # BFCL's "float" read as OpenAI's format, where it is no JSON Schema type
    tools = tmp_path / "tools.jsonl"
    floats = {"type": "array", "items": {"type": "float"}}
    parameters = {"type": "object", "properties": {"x": floats}}
    tools.write_text(
        json.dumps({"id": "t:1", "name": "area", "description": "d", "parameters": parameters}),
        encoding="utf-8",
    )
    args = tmp_path / "args.jsonl"
    args.write_text(json.dumps({"id": "1", "tool_id": "t:1", "arguments": {"x": [1.5]}}))
    where = f"{tools} (area): invalid JSON Schema at /properties/x/items/type"

    assert main(["dialects", "check-args", "--from", "openai_chat", str(tools), str(args)]) == 2
    captured = capsys.readouterr()
    assert where in captured.err and "Traceback" not in captured.err and captured.out == ""
    argv = ["dialects", "convert", "--from", "openai_chat", "--to", "anthropic", str(tools)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert where in captured.err and captured.out == ""


def _dialects(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["dialects", *argv])
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return code, captured.err


def test_unusable_files_are_one_line_that_names_file_and_line(
    tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(BFCL_LINES[0]) + "\n{bad json\n", encoding="utf-8")
    nameless = tmp_path / "noid.jsonl"
    no_id = {k: v for k, v in BFCL_LINES[0].items() if k != "id"}
    nameless.write_text("".join(json.dumps(d) + "\n" for d in [*BFCL_LINES, no_id]))
    missing = tmp_path / "nope.jsonl"
    convert = ["convert", "--from", "bfcl", "--to", "mcp"]

    code, err = _dialects(capsys, *convert, str(bad))
    assert code == 2 and err.startswith(f"toolkeeper dialects: {bad}:2: not a JSON line (")
    code, err = _dialects(capsys, *convert, str(missing))
    assert code == 2 and err.startswith(f"toolkeeper dialects: {missing}: cannot read: ")
    code, err = _dialects(capsys, "check-args", "--from", "bfcl", str(nameless), str(tools_file))
    assert code == 2 and f"{nameless}:3: no 'id' field" in err


def test_check_args_with_no_row_for_the_tools_checks_nothing_and_says_so(
    tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "1", "tool_id": "x:9", "arguments": {}}) + "\n")
    check = ["check-args", "--from", "bfcl", str(tools_file)]

    assert _dialects(capsys, *check, str(empty)) == (2, f"toolkeeper dialects: {empty}: no rows\n")
    code, err = _dialects(capsys, *check, str(other))
    assert code == 2 and f"no row of {other} names a tool of {tools_file}" in err


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_an_empty_tools_file_is_an_error_not_nothing_converted(
    tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """`convert` printed "0 converted" and exited 0, as though an empty (or truncated) file
    held the answer; `check-args` blamed the rows for naming none of its tools."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text(text)
    said = f"toolkeeper dialects: {empty}: empty: no tool definitions"

    code, err = _dialects(capsys, "convert", "--from", "bfcl", "--to", "mcp", str(empty))
    assert code == 2 and err.startswith(said) and len(err.splitlines()) == 1
    code, err = _dialects(capsys, "check-args", "--from", "bfcl", str(empty), str(tools_file))
    assert code == 2 and err.startswith(said) and len(err.splitlines()) == 1


def test_formats_may_be_listed_with_spaces_and_an_unknown_one_is_a_usage_error(
    tools_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["dialects", "convert", "--from", "bfcl", "--to", "openai_chat, mcp", str(tools_file)]
    assert main([*argv, "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["formats"]) == ["openai_chat", "mcp"]
    with pytest.raises(SystemExit) as exit_info:
        main(["dialects", "convert", "--from", "bfcl", "--to", "mcp,claude", str(tools_file)])
    assert exit_info.value.code == 2
    assert "argument --to: expected one or more of" in capsys.readouterr().err


def test_json_nested_deeper_than_python_reads_is_one_line_naming_file_and_line(
    tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """json.loads raises RecursionError, not JSONDecodeError, past about 1,000 levels: such
    a file (a document, or one line of JSON lines) ended the command with a traceback."""
    deep = "[" * 5000 + "]" * 5000
    document = tmp_path / "deep.json"
    document.write_text(f'{{"name": "f",\n"inputSchema": {deep}}}\n', encoding="utf-8")
    lines = tmp_path / "deep.jsonl"
    lines.write_text(json.dumps(BFCL_LINES[0]) + "\n" + deep + "\n", encoding="utf-8")
    convert = ["convert", "--from", "mcp", "--to", "all"]

    code, err = _dialects(capsys, *convert, str(document))
    assert code == 2 and err.startswith(f"toolkeeper dialects: {document}: JSON nested more")
    code, err = _dialects(capsys, *convert, str(lines))
    assert code == 2 and err.startswith(f"toolkeeper dialects: {lines}:2: JSON nested more")
    code, err = _dialects(capsys, "check-args", "--from", "bfcl", str(tools_file), str(lines))
    assert code == 2 and err.startswith(f"toolkeeper dialects: {lines}:2: JSON nested more")
