"""The digest key: what the ledger's argument digests and the gateway's derived call ids are
keyed with (HMAC-SHA256), so that one found in a ledger file, a backup or a client's log
cannot be checked against guesses of the arguments it covers (a PIN, a one-time code).

Every process on one ledger must use the same key: dedupe, approvals and derived call ids
compare digests across processes and restarts. A store's key comes from:

- a SQLite file: the file `<ledger>.key` beside it (`toolkeeper.db.key`), 32 random bytes as
  hex, made with mode 0600 when the ledger is first opened and read after that;
- `MemoryStore` and SQLite's `:memory:`: random, made with the store (nothing outlives it);
- `PostgresStore` and any other store: `TOOLKEEPER_DIGEST_KEY` (the key itself, 32 characters
  or more) or `TOOLKEEPER_DIGEST_KEY_FILE` (a file holding it), or `PostgresStore(digest_key=)`.
  Without one, a keeper on it refuses to open: processes on several hosts share no file.

A lost or changed key does not repeat any call: the digests recorded before no longer match,
so a call id proposed again is refused (CALL_ID_CONFLICT), a pending approval is asked again,
and a gateway client's proposal gets a new derived id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from ..core.errors import ConfigurationError

__all__ = ["DIGEST_KEY_ENV", "DIGEST_KEY_FILE_ENV", "digest_key", "key_file", "parse_key"]

DIGEST_KEY_ENV = "TOOLKEEPER_DIGEST_KEY"
DIGEST_KEY_FILE_ENV = "TOOLKEEPER_DIGEST_KEY_FILE"

_log = logging.getLogger("toolkeeper")

_MIN_LENGTH = 32
"""Characters a key given as text must have: a short one could itself be guessed."""


def digest_key(store: Any) -> bytes:
    """The digest key of `store`: its own (`store.digest_key()`, which the built-in stores
    have), else the environment's.

    Raises:
        ConfigurationError: none is to be had, or the one given is too short or unreadable.
    """
    own = getattr(store, "digest_key", None)
    if callable(own):
        key = own()
        if isinstance(key, bytes) and key:
            return key
    return from_environment(f"the ledger {store!r}")


def from_environment(what: str) -> bytes:
    """The key named by `TOOLKEEPER_DIGEST_KEY` or `TOOLKEEPER_DIGEST_KEY_FILE`.

    Raises:
        ConfigurationError: neither is set, or the key is too short or cannot be read.
    """
    text = os.environ.get(DIGEST_KEY_ENV)
    if text:
        return parse_key(text, DIGEST_KEY_ENV)
    path = os.environ.get(DIGEST_KEY_FILE_ENV)
    if path:
        return key_file(path, create=False)
    raise ConfigurationError(
        f"{what} needs a digest key shared by every process that uses it: set "
        f"{DIGEST_KEY_ENV} to {_MIN_LENGTH} or more random characters (`openssl rand -hex 32`), "
        f"or {DIGEST_KEY_FILE_ENV} to a file holding them"
    )


def parse_key(text: str | bytes, source: str) -> bytes:
    """A key given as text (surrounding whitespace dropped).

    Raises:
        ConfigurationError: it is shorter than 32 characters.
    """
    key = (text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text).strip()
    if len(key) < _MIN_LENGTH:
        raise ConfigurationError(
            f"the digest key from {source} has {len(key)} characters; it needs {_MIN_LENGTH} or "
            "more random ones (`openssl rand -hex 32`)"
        )
    return key


def key_file(path: str | os.PathLike[str], *, create: bool = True) -> bytes:
    """The key held in the file at `path`; when it is missing and `create`, a new random one,
    written with mode 0600 and put in place atomically (several processes opening one new
    ledger at once all read the same key: the first one's). An existing file that others
    than its owner and group may read, or others than its owner may write, is used with a
    warning logged.

    Raises:
        ConfigurationError: the file cannot be read or made, is missing (without `create`),
            or holds too short a key.
    """
    file = Path(path)
    try:
        key = parse_key(file.read_bytes(), str(file))
        _check_mode(file)
        return key
    except FileNotFoundError:
        if not create:
            raise ConfigurationError(f"the digest key file {file} does not exist") from None
    except OSError as exc:
        raise ConfigurationError(f"cannot read the digest key file {file}: {exc}") from exc
    try:
        _write_once(file, secrets.token_hex(32).encode() + b"\n")
        return parse_key(file.read_bytes(), str(file))
    except OSError as exc:
        raise ConfigurationError(f"cannot make the digest key file {file}: {exc}") from exc


_TOO_OPEN = stat.S_IWGRP | stat.S_IROTH | stat.S_IWOTH
"""Who should have no access to a key file: others than its owner and group, and any writer
but its owner (a group of processes sharing one ledger may need to read it, none to write)."""


def _check_mode(file: Path) -> None:
    """Warn when the key file is open to more users than need it (its mode is the operator's
    to set, as the ledger's is: it is not refused)."""
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(file.stat().st_mode)
        if mode & _TOO_OPEN:
            _log.warning(
                "the digest key file %s has mode %04o: whoever can read it can check guesses of "
                "sensitive arguments against the ledger's digests, and whoever can write it "
                "can change the key; make it 0600 (0640 for a group sharing the ledger)",
                file,
                mode,
            )


def _write_once(file: Path, data: bytes) -> None:
    """Write `data` to `file` unless it exists, never leaving it partly written: a temporary
    file (0600) is written, synced and hard-linked to its name, which fails if another process
    linked its own first (then that one stays)."""
    temporary = file.with_name(f".{file.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, file)
        except FileExistsError:
            return
        except OSError:
            # A file system without hard links: create the file exclusively instead.
            with contextlib.suppress(FileExistsError):
                fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
        with contextlib.suppress(OSError):  # (a folder that cannot be synced: the key is)
            folder = os.open(file.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
