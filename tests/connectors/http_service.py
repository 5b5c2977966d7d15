"""A small HTTP service for the HTTP connector's tests: a real server on 127.0.0.1 (the
standard library's, one thread per connection) and its OpenAPI document.

It records every request it gets (method, path, headers) so that a test can tell what was
sent, and what never was.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PETS_OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "pets", "version": "1"},
    "paths": {
        "/pets/{petId}": {
            "parameters": [
                {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "get": {
                "operationId": "getPet",
                "summary": "Get one pet.",
                "parameters": [
                    {"name": "verbose", "in": "query", "schema": {"type": "boolean"}},
                    {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "the pet",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                        },
                    }
                },
            },
            "put": {
                "operationId": "replacePet",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                    },
                },
                "responses": {"200": {"description": "replaced"}},
            },
            "delete": {"operationId": "deletePet", "responses": {"204": {"description": "gone"}}},
        },
        "/pets": {
            "post": {
                "operationId": "addPet",
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                    }
                },
                "responses": {"201": {"description": "added"}},
            }
        },
        "/upload": {
            "post": {
                "operationId": "upload",
                "requestBody": {"content": {"multipart/form-data": {"schema": {}}}},
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
    "components": {
        "schemas": {
            "Pet": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "tag": {"type": "string", "nullable": True},
                    "age": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                    "friends": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}},
                },
                "required": ["name"],
            }
        }
    },
}


@dataclass
class Seen:
    """One request the service got."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class Service:
    """The running service: its URL and what it got."""

    url: str
    port: int
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    """Set to let `/slow` answer."""
    answers: dict[str, list[tuple[int, dict[str, str], bytes]]] = field(default_factory=dict)
    """Scripted answers by path, taken in order before the default one."""


def _handler(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(
            self, status: int, body: Any = None, headers: dict[str, str] | None = None
        ) -> None:
            raw = (
                body
                if isinstance(body, bytes)
                else b""
                if body is None
                else json.dumps(body).encode()
            )
            self.send_response(status)
            for k, v in (headers or {"content-type": "application/json"}).items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            service.seen.append(
                Seen(self.command, parts.path, parse_qs(parts.query), headers, body)
            )
            scripted = service.answers.get(parts.path)
            if scripted:
                status, extra, raw = scripted.pop(0)
                return self._answer(status, raw, extra)
            path = parts.path
            if path == "/echo-headers":
                return self._answer(200, headers)
            if path == "/big":
                return self._answer(200, b"x" * 5000, {"content-type": "text/plain"})
            if path == "/slow":
                service.release.wait(10)
                return self._answer(200, {"late": True})
            if path.startswith("/redirect"):
                target = parse_qs(parts.query)["to"][0]
                return self._answer(302, None, {"location": target})
            if path == "/pets" and self.command == "POST":
                return self._answer(
                    201,
                    json.loads(body),
                    {"content-type": "application/json", "location": "/pets/7"},
                )
            if path.startswith("/pets/"):
                pet = path.removeprefix("/pets/")
                if self.command == "DELETE":
                    return self._answer(204)
                if self.command == "PUT":
                    return self._answer(200, {"id": pet, **json.loads(body)})
                return self._answer(200, {"id": pet, "name": "Rex", "query": parse_qs(parts.query)})
            return self._answer(404, {"error": "no such path"})

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # (a client that gave up on a slow answer: nothing to report)


@contextmanager
def running_service() -> Iterator[Service]:
    """The service, listening on 127.0.0.1 (an ephemeral port) until the block ends."""
    service = Service(url="", port=0)
    server = _Server(("127.0.0.1", 0), _handler(service))
    service.port = server.server_address[1]
    service.url = f"http://127.0.0.1:{service.port}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()  # (the socket listens already: connections wait in its backlog)
    try:
        yield service
    finally:
        service.release.set()
        server.shutdown()
        server.server_close()
        thread.join()
