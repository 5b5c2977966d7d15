"""HTTP APIs as tool sources: an `HttpSource` runs the operations of one service on httpx2.

What it is: one HTTP client per source (a base URL, its secret headers, its address policy,
host list, timeouts and response cap) and one `Tool` per `Operation` (from an OpenAPI document
or a plain endpoint, `_openapi.py`), named `SOURCE.operation`. A call fills the operation's
path, query, headers and JSON body from its validated arguments; a write (any effect but
read-only) carries the call's idempotency key as the `Idempotency-Key` header, so the service
can tell a retry from a new request. Secret headers (`Authorization = "Bearer ${TOKEN}"`) are
added by the transport, to requests for the base URL's own origin only (a redirect elsewhere
goes without them), and their values are cut out of every result and error text.

Safe by default: every connection is checked on the address the name resolves to, redirects
included (`_http_guard.py`); a response longer than the cap is not read. httpx2's errors are
mapped at this edge (`_http_errors.py`); a status answer is mapped here: 2xx is the result,
408, 429 and 503 ask for a retry later (`Retry-After`), other 4xx fail (400 and 422 as
INVALID_ARGUMENTS), 5xx fail retryably.

What it is not: a retry policy or timeout owner (the executor's), nor a generic HTTP client
for the model: the model fills arguments, the operator fixes the service.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ..core.extras import MissingExtra

try:
    import httpx2
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtra("http", "an HTTP tool") from exc

from ..catalog.registry import Tool
from ..core.connector import ToolOutput, UnrecordableResult
from ..core.errors import ErrorCode
from ..core.signals import RetryLater, ToolFailed
from ..core.tracing import RequestTrace
from ..core.values import CallContext, Effect, ToolSpec
from ..schema.validate import Violation
from ._http_errors import map_http_errors
from ._http_guard import AddressPolicy, HostList, guarded_transport
from ._mcp_params import ToolOverride
from ._openapi import DEFAULT_MAX_RESPONSE_BYTES, Operation, default_effect

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "HttpOperation", "HttpParams", "HttpSource"]

_EXCERPT = 1000
"""Characters of an error response's body shown to the model."""
_REDACTED = "[redacted]"


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpParams:
    """How to reach one HTTP service and how to present its operations."""

    name: str
    """The namespace of its tools (`pets` → `pets.getPet`) and their `source`."""
    base_url: str
    """The URL operations' paths are below (`https://api.example.com/v1`)."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Headers sent with each request to the base URL's origin (credentials); left out of
    the repr, and their values cut out of results."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Further values never shown in a result (what `${NAME}` expanded to)."""
    allow_hosts: tuple[str, ...] | None = None
    """Host names requests may go to (`*.example.com` for names below it); None: the base
    URL's host only."""
    addresses: AddressPolicy = field(default_factory=AddressPolicy)
    """Which addresses those hosts may resolve to (default: global ones only)."""
    timeout: float = 30.0
    """Default seconds one call may run."""
    connect_timeout: float = 10.0
    """Seconds to resolve and connect."""
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    """The longest (decoded) response body read; a longer one is not recorded."""
    max_redirects: int = 5
    """Redirects followed (each checked as a request of its own); 0 follows none."""
    tools: Mapping[str, ToolOverride] = field(default_factory=dict)
    """Trusted facts by operation name, over what the method says."""
    include: tuple[str, ...] | None = None
    """Operation names to expose; None exposes every one."""
    default_permissions: tuple[str, ...] | None = None
    """Permissions each tool needs unless overridden; None means `<source>:<operation>`."""


class _Secrets(httpx2.AsyncBaseTransport):
    """Adds the secret headers to requests for `origin` only (each hop of a redirect is
    checked: httpx2 copies the previous hop's headers onto the next)."""

    def __init__(
        self, inner: httpx2.AsyncBaseTransport, origin: httpx2.URL, headers: Mapping[str, str]
    ) -> None:
        self._inner = inner
        self._origin = (origin.scheme, origin.host, origin.port)
        self._headers = dict(headers)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        for name in self._headers:
            request.headers.pop(name, None)
        url = request.url
        if (url.scheme, url.host, url.port) == self._origin:
            request.headers.update(self._headers)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class HttpSource:
    """One HTTP service: its client and its tools. Use as an async context manager (or
    call `aclose()`, idempotent) to close its connections.

    Args:
        params: The service.
        operations: What it offers (`openapi_operations`, `plain_operation`).
    """

    def __init__(self, params: HttpParams, operations: Sequence[Operation]) -> None:
        self.params = params
        base = httpx2.URL(params.base_url)
        origin = base.copy_with(path="/", query=None, fragment=None, username=None, password=None)
        self._origin = str(origin).rstrip("/")
        self._base_path = base.path if base.path.endswith("/") else base.path + "/"
        hosts = params.allow_hosts if params.allow_hosts is not None else (base.host,)
        transport = guarded_transport(
            params.addresses, HostList(patterns=tuple(h.lower() for h in hosts))
        )
        self._client = httpx2.AsyncClient(
            base_url=base,
            transport=_Secrets(transport, base, params.headers),
            follow_redirects=params.max_redirects > 0,
            max_redirects=max(params.max_redirects, 0),
            timeout=httpx2.Timeout(params.timeout, connect=params.connect_timeout),
            trust_env=False,
        )
        values = [*params.headers.values(), *params.secrets]
        words = [w for v in params.headers.values() for w in v.split() if len(w) >= 8]
        self._secrets = sorted({v for v in [*values, *words] if len(v) >= 4}, key=len, reverse=True)
        include = params.include
        self.tools: tuple[Tool, ...] = tuple(
            Tool(spec=self._spec(op), connector=HttpOperation(self, op))
            for op in operations
            if include is None or op.name in include
        )

    def _spec(self, op: Operation) -> ToolSpec:
        p = self.params
        o = p.tools.get(op.name, ToolOverride())
        effect, idempotent = default_effect(op.method)
        default_permissions = p.default_permissions or (f"{p.name}:{op.name}",)
        return ToolSpec(
            name=f"{p.name}.{op.name}",
            description=op.description or f"{op.method} {op.path}",
            input_schema=op.input_schema,
            output_schema=op.output_schema,
            effect=o.effect or effect,
            idempotent=o.idempotent if o.idempotent is not None else idempotent,
            permissions=o.permissions if o.permissions is not None else default_permissions,
            tags=o.tags,
            timeout=o.timeout or p.timeout,
            source=p.name,
            metadata={"http": {"method": op.method, "path": op.path}},
        )

    async def __aenter__(self) -> HttpSource:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections. Idempotent."""
        await self._client.aclose()

    def scrub(self, text: str) -> str:
        """`text` with every secret value cut out."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, _REDACTED)
        return text

    async def send(
        self, op: Operation, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext
    ) -> Any:
        """Run `op` once (see `HttpOperation.invoke`)."""
        request = self._request(op, spec, arguments, ctx)
        cap = self.params.max_response_bytes
        observed = self._observe(op, request, ctx)
        with map_http_errors(self.params.name):
            try:
                response = await self._client.send(request, stream=True)
                try:
                    body = await _read(response, cap)
                finally:
                    await response.aclose()
            except BaseException as exc:
                if observed is not None:
                    observed.ended(None, type(exc).__name__)
                raise
        if observed is not None:
            observed.ended(response.status_code, None if body is not None else "too_large")
        if body is None:
            raise UnrecordableResult(
                f"{spec.name}: the response is longer than {cap} bytes",
                what=f"is longer than the {cap} bytes this source reads",
            )
        return self._result(spec, response, body)

    def _observe(
        self, op: Operation, request: httpx2.Request, ctx: CallContext
    ) -> RequestTrace | None:
        """The request's span, when telemetry is on; its trace context goes on the request.
        Its URL is the route's (`/pets/{petId}`), not the filled one: no argument values."""
        tracer = ctx.requests
        if tracer is None:
            return None
        url = request.url
        route = self._base_path + op.path.lstrip("/")
        observed = tracer.request(
            op.method,
            self._origin + route,
            server=url.host,
            port=url.port or (443 if url.scheme == "https" else 80),
            template=route,
        )
        request.headers.update(observed.headers)
        return observed

    def _request(
        self, op: Operation, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext
    ) -> httpx2.Request:
        path = op.path
        query: list[tuple[str, str | int | float | bool | None]] = []
        headers: dict[str, str] = {"accept": "application/json, */*;q=0.5"}
        used: set[str] = set()
        for param in op.params:
            if param.arg not in arguments:
                continue
            used.add(param.arg)
            value = arguments[param.arg]
            if param.location == "path":
                path = path.replace("{" + param.name + "}", quote(_text(value), safe=""))
            elif param.location == "query":
                items = value if isinstance(value, list) else [value]
                query += [(param.name, _text(v)) for v in items]
            else:
                headers[param.name] = _text(value)
        body: Any = None
        has_body = False
        if op.body is not None and op.body in arguments:
            body, has_body = arguments[op.body], True
        elif op.rest == "body":
            body, has_body = {k: v for k, v in arguments.items() if k not in used}, True
        elif op.rest == "query":
            for k, v in arguments.items():
                if k not in used:
                    query += [(k, _text(x)) for x in (v if isinstance(v, list) else [v])]
        if spec.effect is not Effect.READ_ONLY:
            headers["idempotency-key"] = ctx.idempotency_key
        if ctx.requests is None and ctx.trace:  # (else the request's own span's context)
            headers.update(ctx.trace)
        remaining = ctx.remaining()
        # The call's deadline (its tool's timeout) bounds the whole request.
        timeout = httpx2.Timeout(remaining, connect=min(self.params.connect_timeout, remaining))
        if has_body:
            headers["content-type"] = "application/json"
        return self._client.build_request(
            op.method,
            path.lstrip("/"),
            params=query or None,
            headers=headers,
            content=json.dumps(body, separators=(",", ":")).encode() if has_body else None,
            timeout=timeout,
        )

    def _result(self, spec: ToolSpec, response: httpx2.Response, body: bytes) -> Any:
        status = response.status_code
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if 200 <= status < 300:
            data = self._data(spec, kind, body)
            location = response.headers.get("location")
            if spec.effect is not Effect.READ_ONLY and location:
                return ToolOutput(data=data, effect_ref=self.scrub(location))
            return data
        excerpt = self.scrub(body[: _EXCERPT * 4].decode("utf-8", "replace"))[:_EXCERPT]
        details = {"status": status, "body": excerpt}
        message = self.scrub(f"{spec.name}: HTTP {status} {response.reason_phrase}".rstrip())
        if status in (408, 429, 503):
            raise RetryLater(message, after=response.headers.get("retry-after"))
        if status in (400, 422):
            raise ToolFailed(message, code=ErrorCode.INVALID_ARGUMENTS, details=details)
        raise ToolFailed(message, retryable=status >= 500, details=details)

    def _data(self, spec: ToolSpec, kind: str, body: bytes) -> Any:
        if not body:
            return None
        if kind == "application/json" or kind.endswith("+json"):
            try:
                return json.loads(self.scrub(body.decode("utf-8")))
            except (UnicodeDecodeError, ValueError) as exc:
                raise UnrecordableResult(
                    f"{spec.name}: the response is not valid JSON: {type(exc).__name__}",
                    what="is not valid JSON",
                ) from exc
        if kind.startswith("text/") or kind in ("application/xml", ""):
            return self.scrub(body.decode("utf-8", "replace"))
        return {"content_type": kind, "base64": base64.b64encode(body).decode()}


class HttpOperation:
    """The connector of one operation of an `HttpSource`."""

    def __init__(self, source: HttpSource, op: Operation) -> None:
        self.source = source
        self.operation = op
        self._path_args = tuple(p.arg for p in op.params if p.location == "path")

    @property
    def argument_check(self) -> Callable[[Mapping[str, Any]], list[Violation]] | None:
        """What the executor checks before anything is recorded: a path argument may not be
        empty, `.` or `..` (they would move the request to another path)."""
        return self._violations if self._path_args else None

    def _violations(self, arguments: Mapping[str, Any]) -> list[Violation]:
        out = []
        for arg in self._path_args:
            if arg in arguments and _text(arguments[arg]) in ("", ".", ".."):
                out.append(
                    Violation(
                        pointer=f"/{arg}",
                        keyword="x-path-segment",
                        message="a path argument may not be empty, '.' or '..'",
                    )
                )
        return out

    async def invoke(self, spec: ToolSpec, arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        """Send the operation's request once; return the response's data.

        Raises:
            ToolFailed: refused address (PERMISSION_DENIED), an error status, an argument the
                request cannot carry (INVALID_ARGUMENTS).
            RetryLater: 408, 429 or 503.
            UpstreamUnavailable: no connection (nothing sent).
            TimeoutError: no answer in time.
            OutcomeUnknown: the connection failed once the request may have been sent.
            UnrecordableResult: the response is longer than the cap, or not the JSON it says.
        """
        return await self.source.send(self.operation, spec, arguments, ctx)


def _text(value: Any) -> str:
    """A parameter's value as it goes on the wire."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


async def _read(response: httpx2.Response, cap: int) -> bytes | None:
    """The response's (decoded) body, or None when it is longer than `cap` bytes: the rest is
    not read."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap and "content-encoding" not in response.headers:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
