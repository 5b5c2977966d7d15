"""Console sessions: an operator signed in with its token, held by an opaque cookie.

The cookie (`tk_session`) is HttpOnly, SameSite=Strict, scoped to `/console`, Secure over
HTTPS, and names a random session id this process keeps in memory: signing out, or the
process ending, revokes it. Each session has its CSRF token, which every form posts back and
`check_csrf` compares in constant time. What it is not: shared between gateway processes (an
operator of several signs in to each, or a proxy keeps it on one).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from .operators import Operator

__all__ = ["COOKIE", "LOGIN_COOKIE", "Session", "Sessions", "new_token", "same_token"]

COOKIE = "tk_session"
"""The session cookie's name."""
LOGIN_COOKIE = "tk_login"
"""The cookie holding the sign-in form's CSRF token (before there is a session)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Session:
    """One signed-in operator."""

    operator: Operator
    """Who signed in."""
    csrf: str
    """The token every form of this session posts back."""
    expires_at: float
    """When it ends, whatever happens (epoch seconds)."""


class Sessions:
    """The sessions of this process.

    Args:
        lifetime: Seconds a session lasts from sign-in.
        limit: The most sessions kept; the oldest goes first beyond it.
        clock: Wall clock (epoch seconds).
    """

    def __init__(
        self,
        *,
        lifetime: float = 8 * 3600.0,
        limit: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sessions: dict[str, Session] = {}
        self._lifetime = lifetime
        self._limit = limit
        self._clock = clock

    def open(self, operator: Operator) -> tuple[str, Session]:
        """A new session for `operator`: its id (the cookie's value) and itself."""
        now = self._clock()
        for sid in [s for s, session in self._sessions.items() if session.expires_at <= now]:
            del self._sessions[sid]
        while len(self._sessions) >= self._limit:
            del self._sessions[next(iter(self._sessions))]
        sid = new_token()
        session = Session(operator=operator, csrf=new_token(), expires_at=now + self._lifetime)
        self._sessions[sid] = session
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session `sid` names, or None."""
        session = self._sessions.get(sid or "")
        if session is None:
            return None
        if session.expires_at <= self._clock():
            self._sessions.pop(sid or "", None)
            return None
        return session

    def close(self, sid: str | None) -> None:
        """Sign out: the session ends now."""
        self._sessions.pop(sid or "", None)


def same_token(expected: str, offered: object) -> bool:
    """Whether a posted CSRF token (any form value) is `expected` (constant time)."""
    return isinstance(offered, str) and hmac.compare_digest(
        expected.encode(), offered.encode("utf-8", "surrogatepass")
    )


def new_token() -> str:
    """A fresh random token (a session id, a CSRF token)."""
    return secrets.token_urlsafe(32)
