from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper.core.errors import ConfigurationError
from toolkeeper.ledger import MemoryStore, PostgresStore, SQLiteStore, open_store


def test_memory_url_gives_a_memory_store() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///toolkeeper.db", "toolkeeper.db"),
        ("sqlite:///./data/ledger.db", "./data/ledger.db"),
        ("sqlite:////var/lib/tk/ledger.db", "/var/lib/tk/ledger.db"),
        ("sqlite:///:memory:", ":memory:"),
        ("ledger.db", "ledger.db"),
        ("/abs/ledger.db", "/abs/ledger.db"),
    ],
)
def test_sqlite_urls_and_plain_paths_give_a_sqlite_store(url: str, path: str) -> None:
    store = open_store(url)
    assert isinstance(store, SQLiteStore)
    assert store.path == path


def test_a_path_object_string_is_a_sqlite_file(tmp_path: Path) -> None:
    store = open_store(os.fspath(tmp_path / "x.db"))
    assert isinstance(store, SQLiteStore)


@pytest.mark.parametrize("url", ["postgresql://u@h:5432/db", "postgres://u@h/db"])
def test_postgres_urls_give_a_postgres_store(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    assert store.url == url


@pytest.mark.parametrize("url", ["mysql://u@h/db", "sqlite://", "sqlite://relative.db", "", "  "])
def test_anything_else_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError):
        open_store(url)


@pytest.mark.parametrize("url", ["memory", "memory:", "Memory:/", "in-memory"])
def test_a_bare_memory_word_is_refused_not_made_a_file(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="memory://"):
        open_store(url)
    assert isinstance(open_store("./memory"), SQLiteStore)  # a file is still one ./ away
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url", ["sqlite:/x.db", "sqlite:x.db", "SQLite:/abs/x.db", "postgresql:/db", "postgres:u@h/db"]
)
def test_a_url_missing_its_slashes_is_refused_not_made_a_strange_path(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="lacks the //"):
        open_store(url)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url", ["host=db dbname=prod password=hunter22", "dbname=test user=postgres", "PORT = 5432"]
)
def test_a_libpq_connection_string_is_refused_without_repeating_it(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was taken for a SQLite path: a file of that name was made, and errors quoted it,
    password and all."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="postgresql://") as refused:
        open_store(url)
    assert "hunter22" not in str(refused.value) and "prod" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []
