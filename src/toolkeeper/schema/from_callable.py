"""JSON Schema (2020-12) from Python signatures, via pydantic.

The input schema of a tool comes from its parameters' type hints (Annotated / `Field`
descriptions, defaults, Literal and Enum, nested models, Optional), parameter descriptions
from a Google-style docstring, and the output schema from the return annotation. Objects are
closed (`additionalProperties: false`) unless asked otherwise. A parameter annotated with
`CallContext` is injected by the runtime and never appears in the schema.
"""

from __future__ import annotations

import collections.abc
import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo

from ..core.errors import ConfigurationError
from ..core.values import CallContext
from .canonical import canonical_json, json_safe
from .docstrings import parse_docstring
from .validate import Violation, json_pointer

__all__ = ["FunctionSchema", "function_schema", "to_jsonable"]

_PRIMITIVES: frozenset[Any] = frozenset({str, int, float, bool, type(None), Any})


@dataclass(frozen=True, kw_only=True, slots=True)
class FunctionSchema:
    """How to call a Python function as a tool."""

    description: str
    """The docstring without its argument section."""
    input_schema: dict[str, Any]
    """JSON Schema of the arguments object."""
    output_schema: dict[str, Any] | None
    """JSON Schema of the return value, when annotated."""
    context_param: str | None
    """The parameter that receives the `CallContext`, if any."""
    model: type[BaseModel] | None
    """Converts validated JSON arguments into Python values; None when they are plain JSON."""
    is_async: bool
    """Whether calling the function returns an awaitable."""
    positional: tuple[str, ...] = ()
    """Positional-only parameters, in order: passed by position, not by name."""
    positional_defaults: Mapping[str, Any] = field(default_factory=dict)
    """The defaults of positional-only parameters that have one (JSON may hold none of
    them: `math.inf`), by name."""
    integers: tuple[str, ...] = ()
    """Parameters annotated `int` (or `int | None`, or a `Literal` of ints) when there is no
    model: JSON Schema's "integer" (and `enum`) takes `2.0`, which they receive as `2`."""

    def python_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated JSON arguments → the keyword arguments the function takes."""
        if self.model is None:
            out = dict(arguments)
            for name in self.integers:
                value = out.get(name)
                if type(value) is float and value.is_integer():  # (`Literal[1, 2.5]`: 2.5)
                    out[name] = int(value)
            return out
        parsed = self.model.model_validate(arguments)
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    def violations(self, arguments: Mapping[str, Any]) -> list[Violation]:
        """What keeps schema-valid `arguments` from becoming the function's Python values (a
        model's own validators, a leap second for a `datetime`): checked before the call runs."""
        if self.model is None:
            return []
        try:
            self.model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            return [
                Violation(pointer=_pointer(error["loc"]), keyword="python", message=error["msg"])
                for error in exc.errors(include_url=False, include_input=False)
            ]
        return []


def _pointer(loc: tuple[int | str, ...]) -> str:
    """The JSON Pointer to where pydantic's error is: a key a dict refuses (`dict[int, str]`
    given `"x"`) is located as `(..., "x", "[key]")`, and the pointer names the key."""
    path = list(loc)
    if len(path) > 1 and path[-1] == "[key]":
        path.pop()
    return json_pointer(path)


def _schema_dict(annotation: Any) -> bool:
    """Whether `annotation` is `Annotated[T, {...}]`: JSON Schema given as a bare dict."""
    return get_origin(annotation) is typing.Annotated and any(
        isinstance(meta, dict) for meta in getattr(annotation, "__metadata__", ())
    )


def _is_plain(annotation: Any, *, inside: bool = False) -> bool:
    """Whether JSON valid against `annotation`'s schema is the Python value it names. An int
    `inside` a list or dict is not: JSON Schema's "integer" takes `2.0` there too, and only a
    parameter's own int is converted without a model (`FunctionSchema.integers`)."""
    if annotation in _PRIMITIVES:
        return not (inside and annotation is int)
    origin = get_origin(annotation)
    if origin is Literal:
        return not (inside and any(type(value) is int for value in get_args(annotation)))
    if origin is typing.Annotated:
        return _is_plain(get_args(annotation)[0], inside=inside)
    if origin in (typing.Union, types.UnionType):
        return all(_is_plain(a, inside=inside) for a in get_args(annotation))
    if origin is dict and get_args(annotation)[0] not in (str, Any):
        return False  # JSON's keys are text: the model makes `"1"` the int key 1
    if origin in (list, dict) or annotation in (list, dict):
        return all(_is_plain(a, inside=True) for a in get_args(annotation))
    return False


def _members(annotation: Any) -> tuple[Any, ...]:
    """The types `annotation` may be: the members of a union, else itself (`Annotated`
    unwrapped first)."""
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _names(annotation: Any, kind: type) -> bool:
    """Whether `annotation` is `kind`, optionally in a union or `Annotated`."""
    return kind in _members(annotation)


def _literal_int(annotation: Any) -> bool:
    """Whether `annotation` is a `Literal` with an int among its values, optionally in a union
    or `Annotated`: its JSON Schema `enum` takes `1.0` for `1`."""
    return any(
        get_origin(member) is Literal and any(type(value) is int for value in get_args(member))
        for member in _members(annotation)
    )


def _has_description(annotation: Any) -> bool:
    if get_origin(annotation) is not typing.Annotated:
        return False
    return any(isinstance(meta, FieldInfo) and meta.description for meta in annotation.__metadata__)


_DATA_KEYWORDS = frozenset({"default", "examples", "example", "const", "enum"})
"""Keywords whose values are data, not schemas: never rewritten."""


def _close_objects(node: Any) -> None:
    """Give every object schema with properties `additionalProperties: false` unless set."""
    if isinstance(node, dict):
        if "properties" in node and node.get("type") == "object":
            node.setdefault("additionalProperties", False)
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)


def _strip_titles(node: Any) -> Any:
    """pydantic adds a `title` to every schema; a model gains nothing from them."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {k: _strip_titles(v) for k, v in value.items()}
            elif key == "title" and isinstance(value, str):
                continue
            elif key in _DATA_KEYWORDS:
                out[key] = value
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _drop_unwritable_defaults(node: Any) -> None:
    """Remove defaults JSON cannot hold (`math.inf`, NaN): the function still applies them, a
    model is just not shown them."""
    if isinstance(node, dict):
        if "default" in node:
            try:
                canonical_json(node["default"])
            except (TypeError, ValueError):
                del node["default"]
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                _drop_unwritable_defaults(value)
    elif isinstance(node, list):
        for value in node:
            _drop_unwritable_defaults(value)


_YIELDS = frozenset(
    {
        collections.abc.Iterator,
        collections.abc.Iterable,
        collections.abc.Generator,
        collections.abc.AsyncIterator,
        collections.abc.AsyncIterable,
        collections.abc.AsyncGenerator,
    }
)
"""What a generator function's return annotation names: the call returns a list of its items."""


def _returned(func: Callable[..., Any], annotation: Any) -> Any:
    """The type of what a call of `func` returns: a generator function's items, as a list
    (also behind a decorator's wrapper, which returns the generator it makes)."""
    func = inspect.unwrap(func)
    if (inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func)) and get_origin(
        annotation
    ) in _YIELDS:
        return types.GenericAlias(list, get_args(annotation)[:1] or (Any,))
    return annotation


def _register_instead(func: Callable[..., Any]) -> str:
    """What to register in place of a callable whose hints cannot be read, if it is one of
    the two kinds that hide their signature."""
    if isinstance(func, functools.partial):
        # (Read as parameters with defaults, the bound values would be the model's to change.)
        return (
            "; register a function (def or async def) that takes the parameters the model may "
            "set and calls the partial's function with the values bound here"
        )
    if not inspect.isroutine(func) and not inspect.isclass(func) and callable(func):
        return "; register its bound __call__ method instead (obj.__call__)"
    return ""


def _unbound(func: Callable[..., Any]) -> str | None:
    """Why `func` is a method taken from its class body (`@keeper.tool` over a `def` there,
    or over `@classmethod`), which no call could bind: its instance or class is no argument a
    model can send."""
    if isinstance(func, classmethod):
        name = func.__func__.__qualname__
        return (
            f"{name}: a classmethod object is not callable; register {name} once its class "
            f"exists (keeper.add_function({name}))"
        )
    if not inspect.isfunction(func):
        return None
    owner, _, method = func.__qualname__.rpartition("<locals>.")[2].rpartition(".")
    first = next(iter(inspect.signature(func).parameters.values()), None)
    if not owner or first is None or first.name not in ("self", "cls"):
        return None
    if first.kind not in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD):
        return None
    bound = f"{owner}().{method}" if first.name == "self" else f"{owner}.{method}"
    return (
        f"{func.__qualname__}: its first parameter {first.name!r} would be the model's to "
        f"send; register the method bound to its {'instance' if first.name == 'self' else 'class'}"
        f" once the class exists (keeper.add_function({bound}))"
    )


def function_schema(
    func: Callable[..., Any], *, additional_properties: bool = False
) -> FunctionSchema:
    """Derive the tool contract of a Python function.

    Raises:
        ConfigurationError: a parameter has no usable type, or is `*args` / `**kwargs`; two
            parameters take the `CallContext`; `func` is a method taken from its class, not
            bound to an instance (or to the class, for a classmethod).
    """
    unbound = _unbound(func)
    if unbound is not None:
        raise ConfigurationError(unbound)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(
            f"cannot resolve type hints of {func!r}: {exc}{_register_instead(func)}"
        ) from exc
    doc = parse_docstring(func.__doc__)
    signature = inspect.signature(func)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    plain = True
    positional: list[str] = []
    positional_defaults: dict[str, Any] = {}
    integers: list[str] = []
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(f"{func.__qualname__}: *args/**kwargs cannot be tool inputs")
        annotation = hints.get(name, Any)
        if _schema_dict(annotation):
            # pydantic ignores such metadata: a parameter meant to be redacted would not be.
            raise ConfigurationError(
                f"{func.__qualname__}: parameter {name!r} is annotated with a dict, which "
                "pydantic ignores; give schema keywords as Field(json_schema_extra={...}), and "
                "mark a secret SecretStr or Field(json_schema_extra={'x-sensitive': True})"
            )
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(name)
            if param.default is not param.empty:
                positional_defaults[name] = param.default
        if _names(annotation, CallContext):
            if context_param is not None:
                raise ConfigurationError(
                    f"{func.__qualname__}: {context_param!r} and {name!r} both take the "
                    "CallContext; one parameter receives it"
                )
            context_param = name
            continue
        plain = plain and _is_plain(annotation)
        if (_names(annotation, int) or _literal_int(annotation)) and not _names(
            annotation, float
        ):  # `int | float`: as given
            integers.append(name)
        default = ... if param.default is param.empty else param.default
        described = doc.params.get(name) if not _has_description(annotation) else None
        if isinstance(default, FieldInfo):
            plain = False  # its default (or default_factory) is the model's to apply
            info = default
            if info.description is None and described:
                info = FieldInfo.merge_field_infos(info, description=described)
        else:
            info = (
                pydantic.Field(default=default, description=described)
                if described
                else pydantic.Field(default=default)
            )
        fields[name] = (annotation, info)
    extra: Literal["allow", "forbid"] = "allow" if additional_properties else "forbid"
    if "model_config" in fields:  # pydantic reads it as the model's settings: it would vanish
        raise ConfigurationError(
            f"{func.__qualname__}: a parameter cannot be named 'model_config'; rename it"
        )
    try:
        model = pydantic.create_model(
            f"{func.__name__}_arguments",
            __config__=ConfigDict(extra=extra, arbitrary_types_allowed=False),
            **fields,
        )
        schema = model.model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, NameError) as exc:
        # A type pydantic cannot describe (typing.TypedDict before 3.12, an arbitrary class)
        # or a name it refuses (`_x`): a programming error, said in one line.
        reason = str(exc).splitlines()[0]
        raise ConfigurationError(f"{func.__qualname__}: {reason}") from exc
    if any(f.alias or f.validation_alias for f in model.model_fields.values()):
        plain = False  # the model maps the names the schema shows back to the parameters
    try:
        input_schema = _strip_titles(schema)
        _drop_unwritable_defaults(input_schema)
        canonical_json(input_schema)
    except (TypeError, ValueError) as exc:  # a default JSON cannot hold: math.inf, a set...
        raise ConfigurationError(
            f"{func.__qualname__}: its parameters have no JSON Schema a model could read "
            f"({exc}); give defaults JSON can hold"
        ) from exc
    input_schema.pop("title", None)
    input_schema.setdefault("properties", {})
    input_schema["additionalProperties"] = additional_properties
    if not additional_properties:
        _close_objects(input_schema)
    output_schema: dict[str, Any] | None = None
    ret = _returned(func, hints.get("return", inspect.Signature.empty))
    if ret not in (inspect.Signature.empty, None, type(None), Any):
        try:
            output_schema = _strip_titles(
                pydantic.TypeAdapter(ret).json_schema(mode="serialization")
            )
        except pydantic.PydanticUserError:
            output_schema = None
    is_async = inspect.iscoroutinefunction(func)
    return FunctionSchema(
        description=doc.description,
        input_schema=input_schema,
        output_schema=output_schema,
        context_param=context_param,
        model=None if plain else model,
        is_async=is_async,
        positional=tuple(positional),
        positional_defaults=positional_defaults,
        integers=tuple(integers),
    )


_JSON_SCALARS = (str, int, float, bool, type(None))


NOT_JSON = (TypeError, ValueError, RecursionError)
"""What `json_data` raises for a value no JSON can hold (an object of no known kind, data
nested too deeply)."""


def json_data(value: Any) -> Any:
    """`value` as the JSON data the ledger records and a model is shown: `to_jsonable`, then
    `json_safe`, as every tool's result is made.

    Raises:
        TypeError, ValueError, RecursionError (`NOT_JSON`): no JSON holds it.
    """
    kind = type(value)
    if kind is int or kind is bool or value is None or (kind is str and value.isascii()):
        return value  # (what both would give back as it is, known at a glance)
    return json_safe(to_jsonable(value))


def to_jsonable(value: Any) -> Any:
    """A tool's return value as JSON-compatible data (models, dataclasses, enums, dates...).
    Bytes become text when they are UTF-8; in a value holding any that are not, all are
    base64url (RFC 4648 section 5: `-` and `_` for `+` and `/`; decode with
    `base64.urlsafe_b64decode`)."""
    if isinstance(value, _JSON_SCALARS) and not isinstance(value, enum.Enum):
        return value
    try:
        return pydantic_core.to_jsonable_python(value)
    except UnicodeEncodeError:  # a lone surrogate in a key: see `json_safe`
        return pydantic_core.to_jsonable_python(json_safe(value))
    except UnicodeDecodeError:  # bytes that are not UTF-8 text (an image, say): base64
        return pydantic_core.to_jsonable_python(value, bytes_mode="base64")
