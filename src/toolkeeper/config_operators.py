"""`[operators.NAME]`: the people who run the gateway through its HTTP API and web console.

An operator signs in with a token of its own, never a principal's, and has one role: a
`viewer` reads, an `approver` also decides approvals and settles unknown outcomes, an `admin`
also reconciles. `principals` names the principals an operator is (its own MCP client): by
default it may not approve their calls (four eyes) unless `approve_own = true`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["OperatorConfig", "Role", "resolve_operator_tokens"]

Role = Literal["viewer", "approver", "admin"]

_TOKEN = re.compile(r"[\x21-\x7e]{16,}")
"""An operator token: visible ASCII without spaces (a header carries it), 16 or more."""

RaiseAt = Callable[[Sequence[str | int], str], NoReturn]


class OperatorConfig(BaseModel):
    """`[operators.NAME]`: one operator of the API and console."""

    # A value refused here may be a token: errors never quote one.
    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, strict=True, allow_inf_nan=False
    )

    token: str | None = Field(default=None, repr=False)
    """Its token (16 or more visible ASCII characters), or use `token_env`."""
    token_env: str | None = None
    """The environment variable holding its token, instead of `token` (not both)."""
    role: Role = "viewer"
    """What it may do: read (`viewer`), also decide (`approver`), also reconcile (`admin`)."""
    principals: list[str] = []
    """The principals this operator is: their calls are its own proposals."""
    approve_own: bool = False
    """Whether it may approve calls of its own `principals` (four eyes when false)."""


def resolve_operator_tokens(
    operators: Mapping[str, OperatorConfig],
    principal_tokens: Mapping[str, str | None],
    environ: Callable[[str, Sequence[str | int]], str],
    raise_at: RaiseAt,
) -> dict[str, OperatorConfig]:
    """Each operator with its token read (from `token_env` when set), checked to be well
    formed, its own, and no principal's; its `principals` checked to exist.

    Args:
        operators: The `[operators]` tables, by name.
        principal_tokens: The principals' resolved tokens, by principal id.
        environ: Reads an environment variable that must be set (or raises at `where`).
        raise_at: Raises the configuration error at a key.
    """
    principals = {token: pid for pid, token in principal_tokens.items() if token}
    owners: dict[str, str] = {}
    out = {}
    for name, op in operators.items():
        where = ("operators", name)
        if op.token is not None and op.token_env is not None:
            raise_at((*where, "token_env"), "set one of token and token_env, not both")
        key = "token_env" if op.token_env is not None else "token"
        token = environ(op.token_env, (*where, key)) if op.token_env is not None else op.token
        if not token:
            raise_at(where, "an operator needs token or token_env")
        if not _TOKEN.fullmatch(token):
            raise_at((*where, key), "an operator token is 16 or more visible ASCII characters")
        if token in principals:
            raise_at((*where, key), f"is the token of principals.{principals[token]}")
        if token in owners:
            raise_at((*where, key), f"is the token of operators.{owners[token]} too")
        owners[token] = name
        for index, pid in enumerate(op.principals):
            if pid not in principal_tokens:
                raise_at((*where, "principals", index), "names no principal")
        out[name] = op.model_copy(update={"token": token})
    return out
