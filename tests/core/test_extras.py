"""A missing optional extra is one line that names it, wherever it is imported.

Each case runs in a fresh interpreter in which the extra's module cannot be imported
(`sys.modules[name] = None`, as Python's import system reads it), as if `pip install
toolkeeper` had been run without that extra.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolkeeper.core.extras import MissingExtra, require

CASES = [
    ("opentelemetry", "import toolkeeper.observe.otel", "otel"),
    ("psycopg", "import toolkeeper.ledger.postgres", "postgres"),
    (
        "psycopg",
        "import toolkeeper.bench.scale as s, anyio\nanyio.run(s._schema('x').__aenter__)",
        "postgres",
    ),
    ("redis", "import toolkeeper.policy.redis_limiter", "redis"),
    ("httpx2", "import toolkeeper.connectors.http", "http"),
    ("httpx2", "import toolkeeper.connectors._http_guard", "http"),
    ("mcp", "import toolkeeper.connectors.mcp", "mcp"),
    ("starlette", "import toolkeeper.server", "server"),
    ("numpy", "from toolkeeper.retrieval._deps import require\nrequire('numpy')", "retrieval"),
    ("matplotlib", "from toolkeeper.retrieval._deps import require\nrequire('matplotlib')", "eval"),
    ("openai", "from toolkeeper.agent._sdk import require\nrequire('openai', 'openai')", "openai"),
    (
        "pydantic_ai",
        "from toolkeeper.integrations._bridge import require\n"
        "require('pydantic_ai', 'pydantic-ai')",
        "pydantic-ai",
    ),
]


@pytest.mark.parametrize(("blocked", "code", "extra"), CASES, ids=[c[1].split()[1] for c in CASES])
def test_a_missing_extra_raises_one_line_naming_it(blocked: str, code: str, extra: str) -> None:
    script = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from toolkeeper.core.extras import MissingExtra\n"
        "try:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "except MissingExtra as exc:\n"
        "    print(exc.extra); print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    said, message = out.stdout.splitlines()
    assert said == extra
    assert message.endswith(f'pip install "toolkeeper[{extra}]"')


def test_the_cli_says_a_missing_extra_in_one_line() -> None:
    script = (
        "import sys; sys.modules['httpx2'] = None\n"
        "from toolkeeper.cli import main; raise SystemExit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "list-tools", "--url", "http://127.0.0.1:9/mcp"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        'toolkeeper list-tools: the MCP client needs the mcp extra: pip install "toolkeeper[mcp]"'
    ]


def test_a_module_that_fails_to_import_something_of_its_own_is_not_called_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (an installed extra's own bug must show its own error, not a wrong install hint)
    (tmp_path / "broken_extra.py").write_text("import no_such_module_of_its_own\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as raised:
        require("broken_extra", "otel", "this test")
    assert not isinstance(raised.value, MissingExtra)
    with pytest.raises(MissingExtra, match=r'pip install "toolkeeper\[otel\]"'):
        require("no_such_extra_module", "otel", "this test")
