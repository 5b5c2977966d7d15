"""The OpenAPI document, fuzzed against a real gateway (schemathesis): whatever a request the
document allows, the API never answers 5xx, and every answer matches the document."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import requests
import schemathesis
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from toolkeeper.config import parse_config
from toolkeeper.core.values import ToolCall
from toolkeeper.server import build, serve_http
from toolkeeper.server.openapi import document

from .conftest import OPERATORS, config_text

schema = schemathesis.openapi.from_dict(document())


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway served from its own event loop, with a pending approval and a call in its
    ledger, for the whole module."""
    tmp: Path = tmp_path_factory.mktemp("openapi")
    config = parse_config(config_text(tmp, upstream=False), file="t.toml", base_dir=str(tmp))
    deployment = build(config)
    listening = threading.Event()
    ports: list[int] = []

    def started(port: int) -> None:
        ports.append(port)
        listening.set()

    with start_blocking_portal() as portal:
        portal.call(deployment.__aenter__)
        dave = deployment.gateway.principals["dave"].principal
        for n, name in enumerate(["demo.add_note", "demo.clear_notes"]):
            args = {"text": "x"} if name == "demo.add_note" else {}
            call = ToolCall(call_id=f"c{n}", name=name, arguments=args, principal=dave)
            portal.call(deployment.keeper.execute, call)
        serving = portal.start_task_soon(
            partial(
                serve_http,
                deployment.gateway,
                port=0,
                started=started,
                operators=deployment.operators,
            )
        )
        assert listening.wait(10)
        try:
            yield f"http://127.0.0.1:{ports[0]}"
        finally:
            serving.cancel()
            portal.call(deployment.__aexit__, None, None, None)


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as kept_alive:
        kept_alive.headers["Authorization"] = f"Bearer {OPERATORS['ada']}"
        yield kept_alive


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_the_document_allows_gets_a_5xx(
    case: schemathesis.Case, base_url: str, session: requests.Session
) -> None:
    case.call_and_validate(
        base_url=base_url,
        session=session,
        checks=[not_a_server_error, content_type_conformance, response_schema_conformance],
    )
