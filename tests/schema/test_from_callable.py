from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from toolkeeper import CallContext
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
