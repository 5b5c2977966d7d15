"""Policy: grants, business rules, approvals, budgets, rate limits and pinned tool
definitions."""

from .grants import grant_matches, may_use, missing_permissions, required_permissions
from .pins import PinRefused, Pins

__all__ = [
    "PinRefused",
    "Pins",
    "grant_matches",
    "may_use",
    "missing_permissions",
    "required_permissions",
]
