"""Call and task ids: what every ledger store can key a call by."""

from __future__ import annotations

__all__ = ["MAX_ID_CHARS", "id_problem", "json_kind", "plain_id"]

MAX_ID_CHARS = 512
"""The longest call or task id taken (vendors' ids are a few dozen characters)."""


def json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words (a model knows no Python type names)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list | tuple) else "an object"


def plain_id(value: object) -> bool:
    """Whether `value` is short ASCII text without NUL: nearly every id, in a few comparisons."""
    return (
        type(value) is str and value.isascii() and 0 < len(value) <= MAX_ID_CHARS
    ) and "\x00" not in value


def id_problem(value: object) -> str | None:
    """What keeps `value` from keying the ledger as a call or task id ("is empty", ...), or
    None when every store can hold it."""
    if plain_id(value):
        return None
    if not isinstance(value, str):
        return f"is not text but {json_kind(value)}"
    if not value:
        return "is empty"
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    if "\x00" in value:
        return "holds a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone UTF-16 surrogate, which is not a character"
    return None
