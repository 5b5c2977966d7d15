"""toolkeeper: the trusted runtime between a language model and the tools it may use.

A model only proposes tool calls. toolkeeper decides which tools it may see, checks every
proposed call (permissions, arguments, approvals, budgets), runs it, records it durably so that
no side effect is ever repeated by a retry or a restart, and hands the result back.
"""

import typing

if typing.TYPE_CHECKING:
    from .catalog.registry import Catalog, Tool
    from .connectors.base import Connector, ToolOutput, UpstreamUnavailable
    from .core.errors import ErrorCode, ToolError, ToolkeeperError
    from .core.retry import RetryPolicy
    from .core.signals import ApprovalRequired, OutcomeUnknown, RetryLater, ToolFailed
    from .core.states import CallStatus
    from .core.values import CallContext, Effect, Fence, Principal, ToolCall, ToolResult, ToolSpec
    from .keeper import Keeper
    from .policy.budgets import Budgets
    from .policy.rules import allow, at_most, deny, domain_in, path_inside, require_approval

__all__ = [
    "ApprovalRequired",
    "Budgets",
    "CallContext",
    "CallStatus",
    "Catalog",
    "Connector",
    "Effect",
    "ErrorCode",
    "Fence",
    "Keeper",
    "OutcomeUnknown",
    "Principal",
    "RetryLater",
    "RetryPolicy",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolFailed",
    "ToolOutput",
    "ToolResult",
    "ToolSpec",
    "ToolkeeperError",
    "UpstreamUnavailable",
    "allow",
    "at_most",
    "deny",
    "domain_in",
    "path_inside",
    "require_approval",
]

__version__ = "0.1.0"


if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Import the public API on first use: `import toolkeeper` (and so the `toolkeeper`
        command, whose `--help` needs none of it) stays light."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from . import _api

        globals().update({n: getattr(_api, n) for n in __all__})
        return globals()[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
