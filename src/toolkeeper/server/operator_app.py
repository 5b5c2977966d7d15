"""The operators' face of a keeper: the HTTP API (`/api/v1`) and the web console (`/console`)
as one set of routes, served by the gateway's HTTP server or mounted beside a library
`Keeper` (`operator_app`).

What it is not: a second way to run a call. The API and console decide approvals and settle
calls in the ledger; a call runs only when its client proposes it again, through the executor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from ..config_operators import OperatorConfig
from ..core.values import Principal
from ..keeper import Keeper
from .api import api_routes
from .console import Console
from .desk import Desk
from .headers import SecurityHeaders
from .operators import Operators

__all__ = ["OperatorFace", "operator_app"]


class OperatorFace:
    """The API and console over one `Desk`, for the operators named.

    Args:
        desk: What operators may do.
        operators: Who they are.
        poll_interval: Seconds between the console's looks at the approvals queue (its live
            updates; every gateway process sharing a ledger sees the same queue).
    """

    def __init__(self, desk: Desk, operators: Operators, *, poll_interval: float = 1.0) -> None:
        self.desk = desk
        self.operators = operators
        self.console = Console(desk, operators, poll_interval=poll_interval)

    def routes(self) -> list[BaseRoute]:
        """The routes of `/api/v1` and `/console`."""
        return [*api_routes(self.desk, self.operators), *self.console.routes()]

    def end_streams(self) -> None:
        """End the console's live streams (the server is stopping)."""
        self.console.end_streams()

    def close(self) -> None:
        """End the streams and stop following the catalog; idempotent."""
        self.end_streams()
        self.desk.close()


def operator_app(
    keeper: Keeper,
    operators: Mapping[str, OperatorConfig] | Operators,
    *,
    principals: Mapping[str, Principal] | None = None,
    upstreams: Callable[[], Mapping[str, bool]] = dict,
) -> Starlette:
    """An ASGI app serving the API and console of a library `keeper` (mount it in your own
    app, or serve it with uvicorn). The keeper must be open while it serves.

    Args:
        keeper: The keeper operated.
        operators: `[operators]` tables (tokens resolved) or `Operators`.
        principals: Whose catalog and search views operators may look at, by id.
        upstreams: Whether each upstream is connected, for `/api/v1/health`.
    """
    if not isinstance(operators, Operators):
        operators = Operators.from_config(operators)
    desk = Desk(keeper=keeper, principals=dict(principals or {}), connected=upstreams)
    face = OperatorFace(desk, operators)
    return Starlette(routes=face.routes(), middleware=[Middleware(SecurityHeaders)])
