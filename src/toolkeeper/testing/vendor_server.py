"""`VendorServer`: a local HTTP server that answers model API requests with payloads a test
gives, so the vendors' real SDK clients can be tested (and benchmarked) offline.

It listens on 127.0.0.1 on a port the system picks, answers each POST by calling `handler`
with the path and the JSON body, and records every request (`requests`). A `Reply` is a JSON
body, or server-sent events (a stream), with any status and headers: a test points an SDK
client's `base_url` at `server.url` and answers with the vendor's documented payloads.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["Recorded", "Reply", "VendorServer"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Reply:
    """One answer of the server."""

    body: Any = None
    """A JSON body (ignored when `events` are given)."""
    events: Sequence[tuple[str | None, Any]] | None = None
    """Server-sent events: (event name or None, data as JSON or text)."""
    status: int = 200
    """The HTTP status."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """More headers (`retry-after`, ...)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Recorded:
    """One request the server received."""

    method: str
    """The HTTP method."""
    path: str
    """The path with its query."""
    body: Any
    """The JSON body (None when there was none)."""
    headers: Mapping[str, str]
    """The request headers, names lowercased."""


Handler = Callable[[str, Any], Reply]


class VendorServer:
    """A local model API. Use it as a context manager (`with VendorServer(handler) as s:`).

    Args:
        handler: Answers a request: given its path and JSON body, the `Reply`.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Recorded] = []
        self.busy_seconds = 0.0
        """Time spent serving requests, from reading one to its last byte written: what a
        benchmark takes out of a client's own time."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._request_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`: the base URL (add the vendor's path prefix, `/v1`)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> VendorServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and release the port. Idempotent."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def _request_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Request(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # (else each answer waits for a delayed ACK)

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._answer(None)

            def do_POST(self) -> None:
                start = time.perf_counter()
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                self._answer(json.loads(raw) if raw else None)
                self.wfile.flush()
                with server._lock:
                    server.busy_seconds += time.perf_counter() - start

            def _answer(self, body: Any) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(
                        Recorded(method=self.command, path=self.path, body=body, headers=headers)
                    )
                reply = server.handler(self.path, body)
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.events is not None:
                    self._stream(reply.events)
                    return
                data = json.dumps(reply.body).encode()
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, events: Sequence[tuple[str | None, Any]]) -> None:
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events:
                    text = data if isinstance(data, str) else json.dumps(data)
                    head = f"event: {name}\n" if name else ""
                    self.wfile.write(f"{head}data: {text}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

        return Request
