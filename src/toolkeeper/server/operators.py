"""Operators of the HTTP API and web console: who a token is, and what that one may do.

What it is: the operators a configuration names (`[operators.NAME]`), found by token in
constant time, each with a role (viewer < approver < admin) and the principals it is (four
eyes). What it is not: the principals' MCP tokens, which never open the API.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..config_operators import OperatorConfig, Role

__all__ = ["ROLES", "Operator", "Operators"]

ROLES: tuple[Role, ...] = ("viewer", "approver", "admin")
"""The roles, each allowed what the ones before it are."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Operator:
    """One person (or program) operating the gateway."""

    name: str
    """Its name in the configuration; decisions are recorded as `operator:NAME`."""
    role: Role
    """What it may do."""
    token: str = field(repr=False)
    """The token it signs in with (left out of its repr)."""
    principals: frozenset[str] = frozenset()
    """The principals it is: their calls are its own proposals."""
    approve_own: bool = False
    """Whether it may approve its own principals' calls."""

    @property
    def decider(self) -> str:
        """How its decisions are recorded (`decided_by`, a settled call's owner)."""
        return f"operator:{self.name}"

    def may(self, role: Role) -> bool:
        """Whether its role allows what `role` may do."""
        return ROLES.index(self.role) >= ROLES.index(role)

    def may_approve_for(self, principal_id: str) -> bool:
        """Four eyes: whether it may approve a call made for `principal_id`."""
        return self.approve_own or principal_id not in self.principals


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class Operators:
    """The operators, by token."""

    def __init__(self, operators: Iterable[Operator]) -> None:
        self.by_name = {op.name: op for op in operators}
        self._tokens = [(_digest(op.token), op) for op in self.by_name.values()]

    @classmethod
    def from_config(cls, config: Mapping[str, OperatorConfig]) -> Operators:
        """The operators of a validated configuration (tokens resolved)."""
        return cls(
            Operator(
                name=name,
                role=op.role,
                token=op.token or "",
                principals=frozenset(op.principals),
                approve_own=op.approve_own,
            )
            for name, op in config.items()
            if op.token
        )

    def __len__(self) -> int:
        return len(self.by_name)

    def authenticate(self, token: str) -> Operator | None:
        """The operator `token` belongs to, or None; every token is compared, as a digest in
        constant time (as `Gateway.authenticate` does)."""
        offered = _digest(token)
        found = None
        for digest, op in self._tokens:
            if hmac.compare_digest(digest, offered):
                found = op
        return found
