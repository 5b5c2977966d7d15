"""Policy: grants, business rules, approvals, budgets and rate limits."""

from .grants import grant_matches, may_use, missing_permissions, required_permissions

__all__ = ["grant_matches", "may_use", "missing_permissions", "required_permissions"]
