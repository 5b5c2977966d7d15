"""The web console at `/console`: server-rendered pages over the operator's desk.

Built with Jinja2 templates and one small script of the package's own (no build step, no
framework in the browser): every page works as plain HTML forms; the script only keeps the
approvals queue live from `/console/events` (server-sent events). Every value a page shows
goes through `visible` (control, bidi and other hiding characters escaped) and then HTML
escaping. An operator signs in with its token (`sessions`); every POST carries the session's
CSRF token; the headers forbid any script, style or frame but the package's own (`headers`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..core._visible import visible, visible_json
from ..core.errors import StoreError
from ..ledger.base import ApprovalStatus
from . import api_params as P
from .desk import Desk, DeskError, trail
from .operators import Operators
from .sessions import COOKIE, LOGIN_COOKIE, Session, Sessions, new_token, same_token

__all__ = ["Console"]

_log = logging.getLogger("toolkeeper")

FILES = Path(__file__).parent / "console_files"
"""The templates and static assets, inside the package."""

Page = Callable[[Request, Session], Awaitable[Response]]


class _Visible(str):
    """Text made visible already (`visible_json`): its line breaks are the layout's own."""

    __slots__ = ()


def _shown(value: Any) -> Any:
    """Every value a template prints, made visible (autoescaping follows)."""
    if isinstance(value, str) and not isinstance(value, _Visible):
        return visible(value)
    return value


def _json(value: Any) -> _Visible:
    return _Visible(visible_json(value, indent=2, sort_keys=True))


def _json_cut(value: Any, most: int = 0) -> _Visible:
    """At most `most` (default `CUT`) characters of `_json(value)`, for a row of a list or a
    large result (the API returns it whole)."""
    text, most = _json(value), most or CUT
    return text if len(text) <= most else _Visible(text[:most] + " … (cut)")


CUT = 300
"""Characters of a call's arguments a list shows."""
ROWS = 100
"""The most rows a console page lists (its HTML stays well under 100 KB)."""


def _when(at: float | None) -> str:
    if at is None:
        return "—"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Console:
    """The console's routes and sessions.

    Args:
        desk: What operators may do.
        operators: Who may sign in.
        poll_interval: Seconds between looks at the approvals queue for live updates.
    """

    def __init__(self, desk: Desk, operators: Operators, *, poll_interval: float = 1.0) -> None:
        self.desk = desk
        self.operators = operators
        self.sessions = Sessions()
        self.poll_interval = poll_interval
        self._ended = False
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(FILES / "templates"),
            autoescape=True,
            finalize=_shown,
            undefined=jinja2.StrictUndefined,
        )
        self._env.filters["when"] = _when
        self._env.filters["args"] = _json
        self._env.filters["args_cut"] = _json_cut

    def end_streams(self) -> None:
        """End every live stream within one poll (the server is stopping)."""
        self._ended = True

    # plumbing ----------------------------------------------------------------------------

    def render(
        self, name: str, session: Session | None, status: int = 200, **context: Any
    ) -> HTMLResponse:
        """A page, with the session's operator and CSRF token at hand."""
        html = self._env.get_template(name).render(
            operator=None if session is None else session.operator,
            csrf="" if session is None else session.csrf,
            **context,
        )
        return HTMLResponse(html, status)

    def _page(self, page: Page) -> Callable[[Request], Awaitable[Response]]:
        """A page for signed-in operators; a POST must carry the session's CSRF token."""

        async def endpoint(request: Request) -> Response:
            session = self.sessions.get(request.cookies.get(COOKIE))
            if session is None:
                if request.method == "GET":
                    return RedirectResponse("/console/login", 303)
                return self.render("error.html", None, 401, code="UNAUTHENTICATED", message="")
            if request.method == "POST":
                form = await request.form()
                offered = form.get("csrf")
                if not same_token(session.csrf, offered):
                    return self.render(
                        "error.html", session, 403, code="CSRF", message="reload and try again"
                    )
            try:
                return await page(request, session)
            except DeskError as exc:
                return self.render(
                    "error.html", session, exc.status, code=exc.code, message=exc.message
                )
            except StoreError:
                _log.exception("the ledger failed answering %s", request.url.path)
                return self.render(
                    "error.html", session, 503, code="LEDGER_UNAVAILABLE", message="try again"
                )

        return endpoint

    # sign-in -----------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        """The sign-in form, and signing in with an operator token."""
        if request.method == "GET":
            fresh = new_token()
            page = self.render("login.html", None, csrf_login=fresh, failed=False)
            _cookie(page, request, LOGIN_COOKIE, fresh, max_age=3600)
            return page
        form = await request.form()
        offered = form.get("csrf")
        expected = request.cookies.get(LOGIN_COOKIE)
        if expected is None or not same_token(
            expected, offered if isinstance(offered, str) else None
        ):
            return self.render("error.html", None, 403, code="CSRF", message="reload and try again")
        token = form.get("token")
        op = self.operators.authenticate(token) if isinstance(token, str) and token else None
        if op is None:
            again = new_token()
            page = self.render("login.html", None, 401, csrf_login=again, failed=True)
            _cookie(page, request, LOGIN_COOKIE, again, max_age=3600)
            return page
        sid, _ = self.sessions.open(op)
        done = RedirectResponse("/console/approvals", 303)
        _cookie(done, request, COOKIE, sid)
        done.delete_cookie(LOGIN_COOKIE, path="/console")
        return done

    async def logout(self, request: Request, session: Session) -> Response:
        self.sessions.close(request.cookies.get(COOKIE))
        done = RedirectResponse("/console/login", 303)
        done.delete_cookie(COOKIE, path="/console")
        return done

    # approvals ---------------------------------------------------------------------------

    async def approvals(self, request: Request, session: Session) -> Response:
        status = P.approval_status(request.query_params)
        found = await self.desk.approvals(status, ROWS)
        return self.render(
            "approvals.html", session, approvals=found, shown=status.value if status else "all"
        )

    async def approval(self, request: Request, session: Session) -> Response:
        found = await self.desk.approval(request.path_params["id"])
        return self.render("approval.html", session, approval=found)

    async def decide(self, request: Request, session: Session) -> Response:
        form = await request.form()
        approval_id = request.path_params["id"]
        if request.path_params["decision"] not in ("approve", "deny"):
            raise DeskError("NOT_FOUND", 404, "approve or deny")
        text = str(form.get("note") or "")[:4000]
        if request.path_params["decision"] == "approve":
            await self.desk.approve(session.operator, approval_id, text or None)
        else:
            await self.desk.deny(session.operator, approval_id, text)
        return RedirectResponse(f"/console/approvals/{approval_id}", 303)

    async def events(self, request: Request, session: Session) -> Response:
        return StreamingResponse(
            self._queue_updates(request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _queue_updates(self, request: Request) -> AsyncIterator[str]:
        """An `approvals` event whenever the pending queue changes (and at once), until
        the session ends, the client goes or the server stops."""
        last: list[str] | None = None
        quiet = 0.0
        while not self._ended and self.sessions.get(request.cookies.get(COOKIE)) is not None:
            pending = await self.desk.approvals(ApprovalStatus.PENDING, ROWS)
            ids = [r.id for r in pending]
            if ids != last:
                rows = [
                    {
                        "id": visible(r.id),
                        "tool": visible(r.tool),
                        "principal": visible(r.principal_id),
                        "reason": visible(r.reason),
                        "created": _when(r.created_at),
                    }
                    for r in pending
                ]
                yield f"event: approvals\ndata: {json.dumps(rows)}\n\n"
                last, quiet = ids, 0.0
            elif quiet >= 15:
                yield ": still here\n\n"
                quiet = 0.0
            await anyio.sleep(self.poll_interval)
            quiet += self.poll_interval

    # the ledger --------------------------------------------------------------------------

    async def calls(self, request: Request, session: Session) -> Response:
        params = request.query_params
        query = P.call_query(params, limit=min(P.limit(params), ROWS))
        found = await self.desk.calls(query)
        more = P.next_cursor(found, query)
        return self.render("calls.html", session, calls=found, params=params, more=more)

    async def call(self, request: Request, session: Session) -> Response:
        record, asked = await self.desk.call(
            request.path_params["task"], request.path_params["call"]
        )
        events = trail(record, asked)
        return self.render("call.html", session, call=record, approval=asked, events=events)

    async def unknown(self, request: Request, session: Session) -> Response:
        params = request.query_params
        query = P.call_query(params, status=P.UNKNOWN, limit=min(P.limit(params), ROWS))
        found = await self.desk.calls(query)
        return self.render("unknown.html", session, calls=found)

    async def settle(self, request: Request, session: Session) -> Response:
        form = await request.form()
        task, call_id = request.path_params["task"], request.path_params["call"]
        await self.desk.settle(
            session.operator,
            task,
            call_id,
            succeeded=form.get("outcome") == "succeeded",
            note=str(form.get("note") or "")[:4000],
        )
        return RedirectResponse("/console/unknown", 303)

    async def audit(self, request: Request, session: Session) -> Response:
        params = request.query_params
        query = P.call_query(params, limit=min(P.limit(params), ROWS))
        found = await self.desk.audit(query)
        more = P.next_cursor([r for r, _ in found], query)
        events = [e for _, events in found for e in events]
        return self.render("audit.html", session, events=events, params=params, more=more)

    # catalog and retrieval ---------------------------------------------------------------

    async def tools(self, request: Request, session: Session) -> Response:
        principal = request.query_params.get("principal") or None
        specs = self.desk.tools(principal)
        return self.render(
            "tools.html",
            session,
            tools=specs,
            versions=self.desk.versions,
            principal=principal or "",
            principals=sorted(self.desk.principals),
        )

    async def search(self, request: Request, session: Session) -> Response:
        found = None
        query, principal = "", ""
        if request.method == "POST":
            form = await request.form()
            query = str(form.get("query") or "")[:4000]
            principal = str(form.get("principal") or "")
            if query.strip():
                found = await self.desk.search(query, principal, 8)
        return self.render(
            "search.html",
            session,
            selection=found,
            query=query,
            principal=principal,
            principals=sorted(self.desk.principals),
        )

    def routes(self) -> list[BaseRoute]:
        """The console's routes, under `/console`."""
        page = self._page

        async def home(request: Request) -> Response:
            return RedirectResponse("/console/approvals", 303)

        return [
            Route("/console", home, methods=["GET"]),
            Route("/console/login", self.login, methods=["GET", "POST"]),
            Route("/console/logout", page(self.logout), methods=["POST"]),
            Route("/console/approvals", page(self.approvals), methods=["GET"]),
            Route("/console/approvals/{id}", page(self.approval), methods=["GET"]),
            Route("/console/approvals/{id}/{decision:str}", page(self.decide), methods=["POST"]),
            Route("/console/events", page(self.events), methods=["GET"]),
            Route("/console/calls", page(self.calls), methods=["GET"]),
            Route("/console/calls/{task}/{call}", page(self.call), methods=["GET"]),
            Route("/console/calls/{task}/{call}/settle", page(self.settle), methods=["POST"]),
            Route("/console/unknown", page(self.unknown), methods=["GET"]),
            Route("/console/audit", page(self.audit), methods=["GET"]),
            Route("/console/tools", page(self.tools), methods=["GET"]),
            Route("/console/search", page(self.search), methods=["GET", "POST"]),
            Mount("/console/static", StaticFiles(directory=FILES / "static"), name="static"),
        ]


def _cookie(
    response: Response, request: Request, name: str, value: str, max_age: int | None = None
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
