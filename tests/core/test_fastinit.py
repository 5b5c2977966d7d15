import dataclasses
import inspect

import pytest

from toolkeeper.core._fastinit import fast_init, fast_new, replace
from toolkeeper.core.states import CallStatus
from toolkeeper.core.values import ToolResult


def _plain_and_fast() -> tuple[type, type]:
    def make() -> type:
        @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
        class Point:
            x: int
            y: int = 0
            tags: list[str] = dataclasses.field(default_factory=list)

        return Point

    return make(), fast_init(make())


def test_fast_init_builds_the_same_values_as_the_generated_init() -> None:
    plain, fast = _plain_and_fast()
    for kwargs in ({"x": 1}, {"x": 1, "y": 2}, {"x": 1, "y": 2, "tags": ["a"]}):
        a, b = plain(**kwargs), fast(**kwargs)
        assert dataclasses.astuple(a) == dataclasses.astuple(b)
        assert type(b) is fast
    assert inspect.signature(plain) == inspect.signature(fast)


def test_instances_stay_frozen_and_default_factories_run_per_instance() -> None:
    _, fast = _plain_and_fast()
    first, second = fast(x=1), fast(x=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.x = 3
    assert first.tags is not second.tags
    assert dataclasses.replace(first, y=5) == fast(x=1, y=5)


def test_required_fields_are_still_required() -> None:
    _, fast = _plain_and_fast()
    with pytest.raises(TypeError):
        fast(y=1)
    with pytest.raises(TypeError):
        fast(1)


def test_a_class_whose_layout_cannot_be_shared_still_gets_a_working_init() -> None:
    class Base:
        __slots__ = ("extra",)

    @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
    class Derived(Base):
        x: int

    fast = fast_init(Derived)
    value = fast(x=4)
    assert value.x == 4 and type(value) is Derived
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.x = 5


def test_only_frozen_slotted_keyword_only_dataclasses_are_accepted() -> None:
    @dataclasses.dataclass(kw_only=True, slots=True)
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Positional:
        x: int

    with pytest.raises(TypeError):
        fast_init(Mutable)
    with pytest.raises(TypeError):
        fast_init(Positional)


def test_the_values_of_a_call_use_it() -> None:
    result = ToolResult(call_id="c", tool="t", status=CallStatus.SUCCEEDED, data=1)
    assert result.data == 1 and type(result) is ToolResult
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.data = 2  # type: ignore[misc]


def test_replace_copies_every_field_and_changes_only_the_named_ones() -> None:
    _, fast = _plain_and_fast()
    old = fast(x=1, y=2, tags=["a"])
    new = replace(old, {"y": 5})
    assert type(new) is fast and (new.x, new.y, new.tags) == (1, 5, ["a"])
    assert (old.x, old.y) == (1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.y = 6
    with pytest.raises(AttributeError):
        replace(old, {"nope": 1})


def test_replace_of_a_class_without_a_fast_init_is_dataclasses_replace() -> None:
    plain, _ = _plain_and_fast()
    assert replace(plain(x=1), {"y": 3}) == plain(x=1, y=3)


def test_fast_new_makes_what_the_keyword_form_makes_field_for_field() -> None:
    _, fast = _plain_and_fast()
    make = fast_new(fast)
    made = make(1, 2, ["a"])
    assert made == fast(x=1, y=2, tags=["a"])
    assert type(made) is fast
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.x = 3
    with pytest.raises(TypeError):
        make(1, 2)  # every field is given: none is left to a default by mistake


def test_fast_new_refuses_a_class_fast_init_did_not_prepare() -> None:
    plain, _ = _plain_and_fast()
    with pytest.raises(TypeError, match="fast_init"):
        fast_new(plain)
