"""Console sessions: opened, found, ended, expired; CSRF tokens compared."""

from __future__ import annotations

from toolkeeper.server.operators import Operator
from toolkeeper.server.sessions import Sessions, same_token
from toolkeeper.testing import FakeClock

OLGA = Operator(name="olga", role="approver", token="olga-token-0000000")


def test_a_session_lasts_its_lifetime_and_no_longer() -> None:
    clock = FakeClock()
    sessions = Sessions(lifetime=60, clock=clock)
    sid, session = sessions.open(OLGA)
    assert sessions.get(sid) == session
    clock.advance(60)
    assert sessions.get(sid) is None


def test_signing_out_ends_only_that_session() -> None:
    sessions = Sessions()
    first, _ = sessions.open(OLGA)
    second, _ = sessions.open(OLGA)
    sessions.close(first)
    assert sessions.get(first) is None and sessions.get(second) is not None


def test_ids_and_csrf_tokens_are_fresh_and_unguessable() -> None:
    sessions = Sessions()
    opened = [sessions.open(OLGA) for _ in range(50)]
    ids = {sid for sid, _ in opened} | {s.csrf for _, s in opened}
    assert len(ids) == 100 and all(len(i) >= 40 for i in ids)


def test_the_oldest_session_goes_when_the_limit_is_reached() -> None:
    sessions = Sessions(limit=2)
    first, _ = sessions.open(OLGA)
    sessions.open(OLGA)
    sessions.open(OLGA)
    assert sessions.get(first) is None


def test_a_csrf_token_matches_only_itself() -> None:
    assert same_token("abc", "abc")
    assert not same_token("abc", "abd")
    assert not same_token("abc", None)
    assert not same_token("abc", "\udcff")
