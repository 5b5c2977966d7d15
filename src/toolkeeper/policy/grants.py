"""Who may call what: permission patterns, tenants and environments.

One function decides whether a principal may use a tool at all, and every path uses it: the
executor's authorize gate, tool listing, and retrieval's hard filter before ranking.
"""

from __future__ import annotations

from functools import lru_cache

from ..core.values import Principal, ToolSpec

__all__ = ["grant_matches", "may_use", "missing_permissions", "required_permissions"]


@lru_cache(maxsize=4096)
def grant_matches(grant: str, permission: str) -> bool:
    """Whether one grant pattern covers one permission.

    `*` covers everything; `orders:*` covers `orders:read` and `orders:items:write`; any other
    grant covers exactly the permission it names. Matching is case-sensitive.
    """
    if grant == "*" or grant == permission:
        return True
    if grant.endswith(":*"):
        return permission.startswith(grant[:-1])
    return False


def required_permissions(spec: ToolSpec) -> tuple[str, ...]:
    """The permissions a call of `spec` needs.

    A tool's declared permissions; a tool with side effects that declares none needs
    `tool:<name>`, so that no write is allowed merely because nobody thought about it. A
    read-only tool that declares none is open to every principal of its tenant and environment.
    """
    if spec.permissions or not spec.has_side_effects:
        return spec.permissions
    return (f"tool:{spec.name}",)


def missing_permissions(principal: Principal, spec: ToolSpec) -> list[str]:
    """The permissions `spec` requires that `principal` holds no grant for."""
    return [
        perm
        for perm in required_permissions(spec)
        if not any(grant_matches(grant, perm) for grant in principal.grants)
    ]


def exists_for(principal: Principal, spec: ToolSpec) -> bool:
    """Whether the tool exists in the principal's tenant and environment."""
    return (spec.tenants is None or principal.tenant in spec.tenants) and (
        spec.environments is None or principal.environment in spec.environments
    )


def may_use(principal: Principal, spec: ToolSpec) -> bool:
    """Whether the tool exists for the principal's tenant and environment, and every
    permission it requires is granted."""
    if not exists_for(principal, spec):
        return False
    if "*" in principal.grants:
        return True
    return not missing_permissions(principal, spec)
