"""Core values and errors of toolkeeper: no I/O, standard library only."""

from .errors import (
    ERROR_TABLE,
    CallRefused,
    ConfigurationError,
    ErrorCode,
    ErrorInfo,
    IllegalTransition,
    ModelError,
    StoreError,
    ToolError,
    ToolkeeperError,
)
from .retry import NO_RETRY, RetryPolicy
from .signals import ApprovalRequired, OutcomeUnknown, RetryLater, ToolFailed, ToolSignal
from .states import TERMINAL, TRANSITIONS, CallStatus, can_transition
from .values import (
    ANONYMOUS,
    DEFAULT_INPUT_SCHEMA,
    CallContext,
    Effect,
    Fence,
    Principal,
    ToolCall,
    ToolResult,
    ToolSpec,
)

__all__ = [
    "ANONYMOUS",
    "DEFAULT_INPUT_SCHEMA",
    "ERROR_TABLE",
    "NO_RETRY",
    "TERMINAL",
    "TRANSITIONS",
    "ApprovalRequired",
    "CallContext",
    "CallRefused",
    "CallStatus",
    "ConfigurationError",
    "Effect",
    "ErrorCode",
    "ErrorInfo",
    "Fence",
    "IllegalTransition",
    "ModelError",
    "OutcomeUnknown",
    "Principal",
    "RetryLater",
    "RetryPolicy",
    "StoreError",
    "ToolCall",
    "ToolError",
    "ToolFailed",
    "ToolResult",
    "ToolSignal",
    "ToolSpec",
    "ToolkeeperError",
    "can_transition",
]
