"""Pick a ledger store from a URL, as given on a command line or in `TOOLKEEPER_LEDGER`."""

from __future__ import annotations

import re

from ..core.errors import ConfigurationError
from .base import LedgerStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["DEFAULT_LEDGER_URL", "POSTGRES_SCHEMES", "in_process", "open_store"]

DEFAULT_LEDGER_URL = "sqlite:///./toolkeeper.db"
"""The embedded default: a SQLite file in the working directory."""

_SQLITE = "sqlite://"
_SCHEMES = frozenset({"sqlite", "postgres", "postgresql", "memory"})
_MEMORY_SLIPS = frozenset({"memory", "mem", "in-memory", "inmemory"})
"""Plain words that mean the in-memory ledger to whoever writes them, not a file path."""
_LIBPQ_KEYWORDS = re.compile(
    r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|sslmode|service)\s*=",
    re.IGNORECASE,
)
"""A libpq keyword/value connection string (`host=db dbname=prod password=...`)."""


def in_process(url: str) -> bool:
    """Whether `url` names a ledger that lives inside the process that opens it (`memory://`,
    or SQLite's `:memory:`): no other process, a command line's included, can look at it."""
    return url.startswith("memory:") or url in (":memory:", f"{_SQLITE}/:memory:")


POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""How a PostgreSQL ledger URL begins."""


def open_store(url: str, *, create: bool = True, pool_size: int | None = None) -> LedgerStore:
    """A store for `url`, not yet opened: `await store.open()` (or `async with`) next.

    With `create=False` a SQLite file that does not exist is refused when the store opens
    (`StoreError`) rather than created empty: what a command that only inspects a ledger wants.

    Accepted forms:

    - `memory://`: a `MemoryStore` (nothing survives the process);
    - `sqlite:///relative/path.db`, `sqlite:////absolute/path.db`, `sqlite:///:memory:`;
    - a plain file path (`toolkeeper.db`, `/var/lib/toolkeeper/ledger.db`): SQLite; but not
      a bare `memory` (or `memory:`), refused as the slip it is: `./memory` names that file;
    - `postgresql://...` or `postgres://...`: a `PostgresStore` (needs the `postgres` extra),
      with at most `pool_size` connections (its default when None).

    Raises:
        ConfigurationError: the URL names no supported store.
        ImportError: a PostgreSQL URL without psycopg installed.
    """
    if url == "memory://":
        return MemoryStore()
    if url.startswith(POSTGRES_SCHEMES):
        from .postgres import PostgresStore

        if pool_size is None:
            return PostgresStore(url, create=create)
        return PostgresStore(url, create=create, min_size=min(1, pool_size), max_size=pool_size)
    if url.startswith(_SQLITE):
        rest = url[len(_SQLITE) :]
        path = rest[1:] if rest.startswith("/") else ""
        if not path:
            raise ConfigurationError(
                f"a SQLite ledger URL needs a path: sqlite:///relative.db or "
                f"sqlite:////absolute.db, not {url!r}"
            )
        return SQLiteStore(path, create=create)
    if url.strip().lower().rstrip(":/") in _MEMORY_SLIPS:
        # A file named "memory" would keep every call across runs, and replay old results
        # to a program that believes it starts afresh.
        raise ConfigurationError(
            f"ledger {url!r} would be a SQLite file of that name: write memory:// for an "
            f"in-memory ledger, or ./{url.strip()} if a file is meant"
        )
    if "://" not in url and _LIBPQ_KEYWORDS.search(url):
        # It would name a SQLite file, made on the spot, and errors would repeat it, password
        # and all: the message does not quote it.
        raise ConfigurationError(
            "the ledger is given as a libpq keyword/value connection string (host=... "
            "dbname=...); write it as a URL: postgresql://user@host:port/dbname"
        )
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in _SCHEMES and "://" not in url:
        # `sqlite:/x.db` would be a folder named "sqlite:" holding x.db.
        raise ConfigurationError(
            f"ledger URL {url!r} lacks the // after {scheme}: write "
            + (
                "sqlite:///relative.db or sqlite:////absolute.db"
                if scheme == "sqlite"
                else f"{scheme}://..."
            )
        )
    if "://" in url or not url.strip():
        raise ConfigurationError(
            f"unsupported ledger URL {url!r}: use memory://, sqlite:///path.db, "
            "a file path, or postgresql://..."
        )
    return SQLiteStore(url, create=create)
