import functools
import math
import sys
import typing
from enum import Enum
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, SecretStr

from toolkeeper import CallContext
from toolkeeper.core.errors import ConfigurationError
from toolkeeper.schema.from_callable import function_schema


class Priority(Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str
    zip: str | None = None


async def create_ticket(
    title: Annotated[str, Field(description="One line summary.", max_length=80)],
    priority: Priority = Priority.LOW,
    kind: Literal["bug", "task"] = "task",
    ship_to: Address | None = None,
    labels: list[str] | None = None,
    ctx: CallContext | None = None,
) -> list[Address]:
    """Open a ticket in the tracker.

    Use it for new work only; it notifies the team.

    Args:
        title: Overridden by the Field description.
        priority: How urgent.
        kind: Bug or task.
        ship_to: Where to send the swag.
        labels: Free labels.
    """
    return []


def test_the_schema_comes_from_hints_and_docstring() -> None:
    fs = function_schema(create_ticket)
    schema = fs.input_schema
    props = schema["properties"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["title"]
    assert props["title"] == {"description": "One line summary.", "maxLength": 80, "type": "string"}
    assert props["priority"]["default"] == "low"
    assert props["priority"]["description"] == "How urgent."
    assert schema["$defs"]["Priority"]["enum"] == ["low", "high"]
    assert props["kind"]["enum"] == ["bug", "task"]
    assert schema["$defs"]["Address"]["additionalProperties"] is False
    assert "ctx" not in props
    assert fs.context_param == "ctx"
    assert (
        fs.description
        == "Open a ticket in the tracker.\n\nUse it for new work only; it notifies the team."
    )
    assert fs.output_schema is not None and fs.output_schema["type"] == "array"
    assert fs.is_async


def test_rich_arguments_become_python_values() -> None:
    fs = function_schema(create_ticket)
    kwargs = fs.python_arguments({"title": "x", "priority": "high", "ship_to": {"street": "Main"}})
    assert kwargs["priority"] is Priority.HIGH
    assert kwargs["ship_to"] == Address(street="Main")


def test_plain_arguments_skip_conversion() -> None:
    def add(a: int, b: float = 1.5) -> float:
        return a + b

    fs = function_schema(add)
    assert fs.model is None
    assert fs.python_arguments({"a": 1}) == {"a": 1}
    assert not fs.is_async


def test_defaults_keep_their_data_and_reach_the_function_as_written() -> None:
    """A `title` key inside a default is data, not pydantic's schema title; a `default_factory`
    is run; a default JSON cannot hold (math.inf) is applied but not shown."""

    def configure(
        meta: dict[str, str] = {"title": "Untitled", "lang": "en"},  # noqa: B006
        tags: list[str] = Field(default_factory=list),  # noqa: B008
        limit: float = math.inf,
    ) -> str:
        return ""

    fs = function_schema(configure)
    props = fs.input_schema["properties"]
    assert props["meta"]["default"] == {"title": "Untitled", "lang": "en"}
    assert "default" not in props["limit"]
    assert fs.python_arguments({"meta": {"title": "x"}})["tags"] == []


def test_python_types_arrive_as_annotated() -> None:
    """JSON Schema's "integer" takes 2.0 and arrays stand for tuples: the function gets an int
    and a tuple."""

    def move(to: tuple[int, int], steps: int, speed: float | None = None) -> str:
        return ""

    fs = function_schema(move)
    arguments = fs.python_arguments({"to": [1, 2], "steps": 2.0})
    assert arguments["to"] == (1, 2) and type(arguments["steps"]) is int

    def count(n: int, label: str = "") -> str:
        return ""

    plain = function_schema(count)
    assert plain.model is None  # plain JSON: no pydantic on the hot path
    assert type(plain.python_arguments({"n": 3.0})["n"]) is int


def test_docstring_types_with_parentheses_and_paragraphs_keep_each_description() -> None:
    def tally(a: int, b: dict[str, int], c: str = "") -> int:
        """Count things.

        Args:
            a (int): The first number.
            b (dict(str, int)): Counts by name.

                Names are case-sensitive.
            c: A label.

        Raises:
            ValueError: never shown to a model.

        Returns:
            The total.
        """
        return a

    fs = function_schema(tally)
    props = fs.input_schema["properties"]
    assert props["a"]["description"] == "The first number."
    assert props["b"]["description"] == "Counts by name. Names are case-sensitive."
    assert props["c"]["description"] == "A label."
    assert "ValueError" not in fs.description and "The total." in fs.description


def test_parameters_pydantic_cannot_take_are_one_line_configuration_errors() -> None:
    """They escaped as pydantic's own exceptions, or (`model_config`) vanished from the schema
    so that every call failed."""

    class Point(typing.TypedDict):
        x: int

    def typed(p: Point) -> None: ...

    def private(_x: int) -> None: ...

    def reserved(model_config: int) -> None: ...

    expected = (
        (typed, "typing_extensions.TypedDict") if sys.version_info < (3, 12) else None,
        (private, "leading underscores"),
        (reserved, "cannot be named 'model_config'"),
    )
    for case in expected:
        if case is None:
            continue
        func, message = case
        with pytest.raises(ConfigurationError, match=message):
            function_schema(func)


def test_two_parameters_taking_the_call_context_are_refused_at_registration() -> None:
    """Only one received it: the other was missing from the call, which failed every time."""

    def twice(a: int, first: CallContext, second: CallContext) -> None: ...

    with pytest.raises(ConfigurationError):
        function_schema(twice)


def test_a_parameter_that_takes_ints_or_floats_keeps_a_fraction() -> None:
    """`int | float` given 2.5 received 2."""

    def scale(x: int | float, n: int | None = None) -> str:
        return ""

    fs = function_schema(scale)
    assert fs.python_arguments({"x": 2.5, "n": 3.0}) == {"x": 2.5, "n": 3}


def test_a_partial_or_a_callable_object_is_refused_with_what_to_register_instead() -> None:
    """Both hide their signature from type hints: registration failed with Python's own
    "is not a module, class, method, or function", which said nothing of what would work."""

    async def charge(amount: int, account: str) -> str:
        return f"{account}: {amount}"

    class Charger:
        async def __call__(self, amount: int) -> str:
            return str(amount)

    with pytest.raises(ConfigurationError, match="register a function"):
        function_schema(functools.partial(charge, account="acme"))
    with pytest.raises(ConfigurationError, match="__call__"):
        function_schema(Charger())
    assert function_schema(Charger().__call__).is_async  # what the message says works


def test_a_method_taken_from_its_class_body_is_refused_with_what_to_register_instead() -> None:
    """`@keeper.tool` over a method in its class body showed `self` to the model as a required
    argument, and every call failed; over `@classmethod` it raised TypeError."""

    class Orders:
        rate = 2

        def total(self, qty: int) -> int:
            return qty * self.rate

        @classmethod
        def quote(cls, qty: int) -> int:
            return qty

        @staticmethod
        def tax(qty: int) -> int:
            return qty

    as_written = vars(Orders)  # what a decorator in the class body is given
    with pytest.raises(ConfigurationError, match=r"Orders\(\)\.total"):
        function_schema(as_written["total"])
    with pytest.raises(ConfigurationError, match=r"Orders\.quote"):
        function_schema(as_written["quote"])
    with pytest.raises(ConfigurationError, match=r"Orders\.quote"):
        function_schema(as_written["quote"].__func__)  # `@classmethod` over `@keeper.tool`
    for bound in (Orders().total, Orders.quote, as_written["tax"], Orders.tax):
        assert list(function_schema(bound).input_schema["properties"]) == ["qty"]


def test_a_literal_of_ints_given_an_integral_float_receives_the_int() -> None:
    """Its schema's `enum` takes 1.0 for 1 (JSON Schema compares numbers by value), and the
    function received the float 1.0, which is none of its Literal's values."""

    def page(size: Literal[10, 50], mode: Literal[0, "auto"] | None = None) -> str:
        return ""

    arguments = function_schema(page).python_arguments({"size": 10.0, "mode": 0.0})
    assert arguments == {"size": 10, "mode": 0}
    assert type(arguments["size"]) is int and type(arguments["mode"]) is int


def test_a_literal_of_ints_and_floats_given_one_of_its_floats_receives_it() -> None:
    """`Literal[1, 2.5]` given 2.5 received 2, which is none of its values."""

    def zoom(factor: Literal[1, 2.5]) -> str:
        return ""

    assert function_schema(zoom).python_arguments({"factor": 2.5}) == {"factor": 2.5}


def test_a_schema_dict_in_annotated_is_refused_and_secretstr_is_write_only() -> None:
    """`Annotated[str, {"writeOnly": True}]` failed with "unhashable type: 'dict'", and
    pydantic ignores such metadata anyway: the argument would not have been redacted."""

    def login(user: str, password: Annotated[str, {"writeOnly": True}]) -> str:
        return user

    with pytest.raises(ConfigurationError, match=r"'password'.*SecretStr"):
        function_schema(login)

    def secret(user: str, password: SecretStr) -> str:
        return user

    schema = function_schema(secret).input_schema
    assert schema["properties"]["password"]["writeOnly"] is True


def test_ints_in_lists_and_dicts_given_integral_floats_receive_ints() -> None:
    """JSON Schema's "integer" takes 2.0 for each item too, and plain JSON went to the function
    as it was: `list[int]` received `[1.0, 2]`, so `range(xs[0])` raised TypeError in the tool."""

    def spread(
        xs: list[int], by_name: dict[str, int], sizes: list[Literal[10, 50]], label: str = ""
    ) -> str:
        return ""

    arguments = function_schema(spread).python_arguments(
        {"xs": [1.0, 2], "by_name": {"a": 3.0}, "sizes": [10.0]}
    )
    assert arguments["xs"] == [1, 2] and type(arguments["xs"][0]) is int
    assert type(arguments["by_name"]["a"]) is int
    assert type(arguments["sizes"][0]) is int


def test_a_dict_keyed_by_ints_receives_int_keys_and_refuses_keys_that_are_not() -> None:
    """Its schema cannot constrain JSON's text keys, and the plain-JSON path handed
    `dict[int, str]` the keys as sent: `"1"` for 1, and `"x"` too."""

    def rename(names: dict[int, str]) -> str:
        return ""

    fs = function_schema(rename)
    assert fs.python_arguments({"names": {"1": "a"}}) == {"names": {1: "a"}}
    (violation,) = fs.violations({"names": {"x": "a"}})
    assert violation.pointer == "/names/x"


def test_a_generator_function_behind_a_decorator_shows_the_list_it_returns() -> None:
    """The wrapper is no generator function: its output schema was that of `Iterator[int]`
    (none: pydantic has none), though its call returns the list of what it yields."""

    def logged(func: typing.Callable[..., typing.Any]) -> typing.Callable[..., typing.Any]:
        @functools.wraps(func)
        def wrapper(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
            return func(*args, **kwargs)

        return wrapper

    @logged
    def rows(n: int) -> typing.Iterator[int]:
        yield from range(n)

    @logged
    async def pages(n: int) -> typing.AsyncIterator[str]:
        yield str(n)

    assert function_schema(rows).output_schema == {"items": {"type": "integer"}, "type": "array"}
    assert function_schema(pages).output_schema == {"items": {"type": "string"}, "type": "array"}
