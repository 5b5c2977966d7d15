"""What the model adapters share: the friendly guard of an optional SDK, and HTTP failures as
`ModelError`s."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ..core import extras
from ..core.errors import ModelError

__all__ = ["as_json", "require", "status_error"]


def require(module: str, extra: str) -> ModuleType:
    """Import a vendor SDK, or say which extra brings it.

    Raises:
        ImportError: it is not installed; the message names `pip install "toolkeeper[EXTRA]"`.
    """
    return extras.require(module, extra, f"this model adapter ({module})")


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= 600 else None


def status_error(vendor: str, status: int | None, response: Any = None) -> ModelError:
    """The `ModelError` of a vendor API's answer (None: no answer, the connection failed)."""
    headers = getattr(response, "headers", None)
    said = f"answered HTTP {status}" if status is not None else "could not be reached"
    return ModelError.of_status(
        status, f"the {vendor} API {said}", retry_after=_retry_after(headers)
    )


def as_json(value: Any) -> Any:
    """An SDK object as plain JSON (its fields as the API named them, absent ones left out)."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict(mode="json")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True, by_alias=True)
    return value
