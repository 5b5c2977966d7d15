"""What `toolkeeper` exports, imported on the first use of any of it.

The same imports as the `TYPE_CHECKING` block of `toolkeeper/__init__.py`, which the type
checker reads; a test checks that every name of `toolkeeper.__all__` resolves.
"""

# ruff: noqa: F401  (each name is imported for `toolkeeper.__getattr__` to hand out)

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
