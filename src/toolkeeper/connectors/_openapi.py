"""HTTP operations as tools: from an OpenAPI 3.0 or 3.1 document, or from plain endpoints.

What it is: `Operation`, one HTTP operation with what a call fills in (path, query and header
parameters, a JSON body), and the two ways to get them: `openapi_operations(doc)` reads each
operation of a document (parameters and JSON body as the input schema, the success response's
JSON schema as the output schema; local `$ref`s inlined; 3.0's `nullable` and boolean
`exclusiveMinimum`/`exclusiveMaximum` rewritten as JSON Schema 2020-12 says them), and
`plain_operation(...)` builds one from a method, a path template and an input schema.
Pure functions: no I/O. What it is not: the connector that sends requests (`http.py`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from ..core.errors import ConfigurationError
from ..core.values import Effect

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "Operation",
    "Param",
    "default_effect",
    "openapi_operations",
    "plain_operation",
]

_log = logging.getLogger(__name__)

DEFAULT_MAX_RESPONSE_BYTES = 4 * 2**20
"""The longest response body an HTTP tool reads (4 MiB, decoded) unless configured otherwise."""

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_IGNORED_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "authorization",
        "idempotency-key",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "proxy-authorization",
    }
)
"""Header parameters a call may not set: OpenAPI ignores the first three (the request says
them), the idempotency key is the runtime's, and the others are the connection's (a `Host`
of the model's choosing would send the request to another site on the same server)."""
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_DEPTH = 64


Location = Literal["path", "query", "header"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Param:
    """One argument that goes into the request outside the body."""

    arg: str
    """The argument's name in the tool's input schema."""
    location: Location
    """Where it goes."""
    name: str
    """Its name on the wire."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Operation:
    """One HTTP operation a tool runs."""

    name: str
    """The tool's name within its source (the operationId, or method and path)."""
    method: str
    """The HTTP method, upper case."""
    path: str
    """The path template below the source's base URL (`/pets/{petId}`)."""
    description: str = ""
    """What the model reads."""
    input_schema: Mapping[str, Any]
    """The arguments object's JSON Schema (2020-12)."""
    output_schema: Mapping[str, Any] | None = None
    """The success response's JSON Schema, when the document gives one."""
    params: tuple[Param, ...] = ()
    """Arguments that go into the path, the query and headers."""
    body: str | None = None
    """The argument that is the JSON body, if the operation takes one."""
    rest: Literal["query", "body"] | None = None
    """Where the arguments not in `params` go (plain endpoints): the query string, or a JSON
    body object of their own."""


def default_effect(method: str) -> tuple[Effect, bool]:
    """What an HTTP method does by its definition (RFC 9110): GET, HEAD and OPTIONS read;
    PUT and DELETE are idempotent writes; POST and PATCH are writes."""
    method = method.upper()
    if method in _SAFE:
        return Effect.READ_ONLY, True
    return Effect.WRITE, method in ("PUT", "DELETE")


def _tool_name(text: str) -> str:
    return re.sub("_+", "_", _NAME.sub("_", text)).strip("_") or "operation"


class _Refs:
    """Inlines a document's local `$ref`s (`#/components/schemas/Pet`); a reference that
    loops back on itself becomes `{}` (any value) at the point it loops."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self._doc = doc

    def target(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ConfigurationError(f"only local $refs are supported, not {ref!r}")
        node: Any = self._doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise ConfigurationError(f"$ref {ref!r} points at nothing")
            node = node[part]
        return node

    def inline(self, node: Any, seen: tuple[str, ...] = ()) -> Any:
        if len(seen) > _MAX_DEPTH:
            return {}
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref in seen:
                    return {}
                return self.inline(self.target(ref), (*seen, ref))
            return {k: self.inline(v, seen) for k, v in node.items()}
        if isinstance(node, list):
            return [self.inline(v, seen) for v in node]
        return node


def _from_30(schema: Any) -> Any:
    """A 3.0 schema object said in JSON Schema 2020-12 (3.1's are that already)."""
    if isinstance(schema, list):
        return [_from_30(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _from_30(v) for k, v in schema.items() if k != "nullable"}
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = out.get(bound)
        if isinstance(flag, bool):
            del out[bound]
            if flag and limit in out:
                out[bound] = out.pop(limit)
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        elif kind is None:
            out = {"anyOf": [out, {"type": "null"}]}
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def _json_schema(content: Any) -> Mapping[str, Any] | None:
    """The schema of the JSON media type of a `content` map, if it has one."""
    if not isinstance(content, Mapping):
        return None
    for media, body in content.items():
        kind = str(media).split(";")[0].strip().lower()
        if kind == "application/json" or kind.endswith("+json"):
            schema = body.get("schema") if isinstance(body, Mapping) else None
            return schema if isinstance(schema, Mapping) else {}
    return None


def _success_schema(responses: Any) -> Mapping[str, Any] | None:
    if not isinstance(responses, Mapping):
        return None
    for status in ("200", "201", "202", "203", "206", "2XX", "default"):
        response = responses.get(status) or responses.get(int(status) if status.isdigit() else "")
        if isinstance(response, Mapping):
            schema = _json_schema(response.get("content"))
            if schema is not None:
                return schema or None
    return None


def openapi_operations(doc: Mapping[str, Any]) -> list[Operation]:
    """Every operation of an OpenAPI 3.0 or 3.1 document, in the document's order.

    An operation whose request body is not JSON (a form, a file upload) is left out, with a
    warning; so is a cookie parameter's operation's cookie (not sent).

    Raises:
        ConfigurationError: not an OpenAPI 3.x document, or a `$ref` that is not local or
            points at nothing.
    """
    version = str(doc.get("openapi", ""))
    if not version.startswith("3."):
        raise ConfigurationError("not an OpenAPI 3.0 or 3.1 document (no 'openapi: 3.x')")
    legacy = version.startswith("3.0")
    refs = _Refs(doc)
    paths = doc.get("paths") or {}
    if not isinstance(paths, Mapping):
        raise ConfigurationError("an OpenAPI document's paths must be an object")
    out: list[Operation] = []
    taken: set[str] = set()
    for path, item in paths.items():
        item = refs.inline(item)
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, Mapping):
                continue
            built = _operation(str(path), method, op, shared, legacy)
            if built is None:
                continue
            name = built.name
            for n in range(2, 1000):
                if name not in taken:
                    break
                name = f"{built.name}_{n}"
            taken.add(name)
            out.append(_renamed(built, name))
    return out


def _renamed(op: Operation, name: str) -> Operation:
    if op.name == name:
        return op
    return Operation(
        name=name,
        method=op.method,
        path=op.path,
        description=op.description,
        input_schema=op.input_schema,
        output_schema=op.output_schema,
        params=op.params,
        body=op.body,
        rest=op.rest,
    )


def _operation(
    path: str, method: str, op: Mapping[str, Any], shared: Sequence[Any], legacy: bool
) -> Operation | None:
    convert = _from_30 if legacy else (lambda s: s)
    name = _tool_name(str(op.get("operationId") or f"{method}_{path}"))
    by_key: dict[tuple[str, str], Mapping[str, Any]] = {}
    for p in [*shared, *(op.get("parameters") or [])]:  # the operation's win
        if isinstance(p, Mapping) and "name" in p and "in" in p:
            by_key[(str(p["in"]), str(p["name"]))] = p
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[Param] = []
    for (where, wire), p in by_key.items():
        if where == "cookie" or (where == "header" and wire.lower() in _IGNORED_HEADERS):
            continue
        if where not in ("path", "query", "header"):
            continue
        arg = wire if wire not in properties else f"{where}_{wire}"
        schema = dict(convert(p.get("schema") or {}))
        if p.get("description") and "description" not in schema:
            schema["description"] = str(p["description"])
        properties[arg] = schema
        if p.get("required") or where == "path":
            required.append(arg)
        params.append(Param(arg=arg, location=cast(Location, where), name=wire))
    body: str | None = None
    request = op.get("requestBody")
    if isinstance(request, Mapping):
        content = _json_schema(request.get("content"))
        if content is None:
            _log.warning(
                "%s %s: its request body is not JSON; the operation is left out",
                method.upper(),
                path,
            )
            return None
        body = "body" if "body" not in properties else "request_body"
        properties[body] = dict(convert(content))
        if request.get("required"):
            required.append(body)
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        input_schema["required"] = required
    output = _success_schema(op.get("responses"))
    text = "\n\n".join(str(t) for t in (op.get("summary"), op.get("description")) if t)
    return Operation(
        name=name,
        method=method.upper(),
        path=path,
        description=text,
        input_schema=input_schema,
        output_schema=convert(output) if output is not None else None,
        params=tuple(params),
        body=body,
    )


def plain_operation(
    name: str,
    *,
    method: str,
    path: str,
    description: str = "",
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
) -> Operation:
    """An endpoint written out in the configuration: `{name}` placeholders in `path` are
    filled from the arguments of that name; the other arguments go into the query string
    (GET, HEAD, DELETE, OPTIONS) or make up the JSON body (POST, PUT, PATCH).

    Raises:
        ConfigurationError: a path placeholder is not a property of `input_schema`.
    """
    method = method.upper()
    schema: dict[str, Any] = dict(input_schema or {"type": "object", "properties": {}})
    schema.setdefault("type", "object")
    properties = dict(schema.get("properties") or {})
    in_path = _PLACEHOLDER.findall(path)
    for arg in in_path:
        if arg not in properties:
            raise ConfigurationError(f"{name}: path placeholder {{{arg}}} is not an argument")
    required = list(dict.fromkeys([*schema.get("required", []), *in_path]))
    if required:
        schema["required"] = required
    params = [Param(arg=a, location="path", name=a) for a in in_path]
    body_method = method in ("POST", "PUT", "PATCH")
    if not body_method:
        params += [Param(arg=a, location="query", name=a) for a in properties if a not in in_path]
    return Operation(
        name=name,
        method=method,
        path=path,
        description=description,
        input_schema=schema,
        output_schema=output_schema,
        params=tuple(params),
        rest="body" if method in ("POST", "PUT", "PATCH") else "query",
    )
