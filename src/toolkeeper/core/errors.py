"""The one error tree of toolkeeper, and the table of stable error codes.

```
ToolkeeperError                 base of everything toolkeeper raises
├── ConfigurationError          a tool, policy or store was set up wrongly (a programming error)
├── IllegalTransition           a state change the call state machine does not allow
├── StoreError                  the ledger backend failed (I/O, connection)
│   └── NotJSON                 a value given to the ledger is not JSON data
├── ModelError                  a model's API failed (rate limit, overload, a refused request)
└── CallRefused                 carries a ToolError; raised in the pipeline, returned as a result
```

A `ToolError` is not an exception: it is the value a refused or failed call carries back to the
model. Every `ErrorCode` has one row in `ERROR_TABLE`: whether it is retryable by default, its
HTTP status and its JSON-RPC error code. Messages shown to a model never contain secrets, stack
traces or other tenants' data.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ERROR_TABLE",
    "CallRefused",
    "ConfigurationError",
    "ErrorCode",
    "ErrorInfo",
    "IllegalTransition",
    "ModelError",
    "NotJSON",
    "StoreError",
    "ToolError",
    "ToolkeeperError",
    "sole_cause",
    "suggested",
]


class ErrorCode(StrEnum):
    """Stable codes a model, a client or a person can act on."""

    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    APPROVAL_DENIED = "APPROVAL_DENIED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    RATE_LIMITED = "RATE_LIMITED"
    CALL_ID_CONFLICT = "CALL_ID_CONFLICT"
    INVALID_CALL_ID = "INVALID_CALL_ID"
    CALL_IN_PROGRESS = "CALL_IN_PROGRESS"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    TIMEOUT = "TIMEOUT"
    UNKNOWN_OUTCOME = "UNKNOWN_OUTCOME"
    TOOL_ERROR = "TOOL_ERROR"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    CANCELLED = "CANCELLED"
    INTERNAL_ERROR = "INTERNAL_ERROR"


@dataclass(frozen=True, kw_only=True, slots=True)
class ErrorInfo:
    """One row of the error table."""

    retryable: bool
    """Whether trying the same call again later can succeed."""
    http_status: int
    """The HTTP status the server answers with."""
    jsonrpc_code: int
    """The JSON-RPC error code the MCP gateway answers with when a protocol error is needed."""


ERROR_TABLE: Mapping[ErrorCode, ErrorInfo] = {
    ErrorCode.UNKNOWN_TOOL: ErrorInfo(retryable=False, http_status=404, jsonrpc_code=-32601),
    ErrorCode.INVALID_ARGUMENTS: ErrorInfo(retryable=False, http_status=422, jsonrpc_code=-32602),
    ErrorCode.PERMISSION_DENIED: ErrorInfo(retryable=False, http_status=403, jsonrpc_code=-32001),
    ErrorCode.APPROVAL_REQUIRED: ErrorInfo(retryable=True, http_status=202, jsonrpc_code=-32002),
    ErrorCode.APPROVAL_DENIED: ErrorInfo(retryable=False, http_status=403, jsonrpc_code=-32003),
    ErrorCode.APPROVAL_EXPIRED: ErrorInfo(retryable=True, http_status=410, jsonrpc_code=-32004),
    ErrorCode.BUDGET_EXCEEDED: ErrorInfo(retryable=False, http_status=429, jsonrpc_code=-32005),
    ErrorCode.RATE_LIMITED: ErrorInfo(retryable=True, http_status=429, jsonrpc_code=-32006),
    ErrorCode.CALL_ID_CONFLICT: ErrorInfo(retryable=False, http_status=409, jsonrpc_code=-32007),
    ErrorCode.INVALID_CALL_ID: ErrorInfo(retryable=False, http_status=400, jsonrpc_code=-32602),
    ErrorCode.CALL_IN_PROGRESS: ErrorInfo(retryable=True, http_status=409, jsonrpc_code=-32008),
    ErrorCode.PAYLOAD_TOO_LARGE: ErrorInfo(retryable=False, http_status=413, jsonrpc_code=-32602),
    ErrorCode.TIMEOUT: ErrorInfo(retryable=True, http_status=504, jsonrpc_code=-32009),
    ErrorCode.UNKNOWN_OUTCOME: ErrorInfo(retryable=False, http_status=500, jsonrpc_code=-32010),
    ErrorCode.TOOL_ERROR: ErrorInfo(retryable=False, http_status=502, jsonrpc_code=-32011),
    ErrorCode.UPSTREAM_UNAVAILABLE: ErrorInfo(retryable=True, http_status=503, jsonrpc_code=-32012),
    ErrorCode.CANCELLED: ErrorInfo(retryable=False, http_status=499, jsonrpc_code=-32013),
    ErrorCode.INTERNAL_ERROR: ErrorInfo(retryable=False, http_status=500, jsonrpc_code=-32603),
}
"""Each error code's retryability, HTTP status and JSON-RPC error code."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolError:
    """Why a call did not produce data: safe to show to the model that proposed it."""

    code: ErrorCode
    """The stable code; see `ERROR_TABLE`."""
    message: str
    """A message for the model: what went wrong and what to do. Never secrets or tracebacks."""
    retryable: bool
    """Whether the same call can succeed if tried again (later, or once approved)."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Structured details: violations with JSON pointers, an approval id, a budget name, ..."""
    retry_after: float | None = None
    """Seconds after which a retry makes sense, when known."""

    @classmethod
    def of(
        cls,
        code: ErrorCode,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
    ) -> ToolError:
        """Build an error whose `retryable` defaults to the code's row in `ERROR_TABLE`."""
        return cls(
            code=code,
            message=message,
            retryable=ERROR_TABLE[code].retryable if retryable is None else retryable,
            details=dict(details or {}),
            retry_after=retry_after,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form sent to models and clients."""
        out: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.details:
            out["details"] = dict(self.details)
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolError:
        """Rebuild an error from `to_dict` output (as stored in a ledger)."""
        return cls(
            code=ErrorCode(data["code"]),
            message=str(data["message"]),
            retryable=bool(data["retryable"]),
            details=dict(data.get("details") or {}),
            retry_after=data.get("retry_after"),
        )


class ToolkeeperError(Exception):
    """Base class of every exception toolkeeper raises."""


class ConfigurationError(ToolkeeperError):
    """A tool, rule, policy or store was configured wrongly; a programming error, not a refusal."""


class StoreError(ToolkeeperError):
    """The ledger backend failed to read or write."""


class NotJSON(StoreError):
    """A value given to the ledger is not JSON data (NaN, an unknown type, nested too deeply):
    nothing was written."""


class ModelError(ToolkeeperError):
    """A model's API failed: raised by the agent's model adapters, translated from the SDK's
    exception. `error.retryable` says whether the agent's retry policy tries the request again
    (rate limits, overload, timeouts, lost connections)."""

    def __init__(self, error: ToolError, *, status: int | None = None) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error
        self.status = status
        """The HTTP status the API answered with, when it answered."""

    @classmethod
    def of_status(
        cls, status: int | None, message: str, *, retry_after: float | None = None
    ) -> ModelError:
        """The error of an API's HTTP status (None: no answer came, the connection failed)."""
        if status is None or status >= 500 or status == 529:
            code = ErrorCode.UPSTREAM_UNAVAILABLE
        elif status == 429:
            code = ErrorCode.RATE_LIMITED
        elif status == 408:
            code = ErrorCode.TIMEOUT
        elif status in (401, 403):
            code = ErrorCode.PERMISSION_DENIED
        else:
            code = ErrorCode.INVALID_ARGUMENTS
        error = ToolError.of(code, message, retry_after=retry_after)
        return cls(error, status=status)


class IllegalTransition(ToolkeeperError):
    """The ledger refused a state change that the call state machine does not allow."""

    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"illegal call state transition {current} -> {target}")
        self.current = current
        self.target = target


class CallRefused(ToolkeeperError):
    """Raised inside the pipeline to stop a call; the executor turns it into a result."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


def sole_cause(exc: BaseException) -> BaseException:
    """The one exception inside task-group wrappers (`ExceptionGroup`s of a single member), for
    messages that name what went wrong rather than "unhandled errors in a TaskGroup"."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def suggested(name: object, visible: Iterable[str]) -> dict[str, list[str]]:
    """The `did_you_mean` details of an UNKNOWN_TOOL refusal of `name`: up to three names
    close to it among `visible`, the names the caller may see (so that a hidden tool is never
    named); empty when none is close, or `name` is not text."""
    if not isinstance(name, str):
        return {}
    close = difflib.get_close_matches(name, list(visible), n=3, cutoff=0.6)
    return {"did_you_mean": close} if close else {}
