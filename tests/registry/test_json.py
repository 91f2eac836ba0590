"""snapshot_json: lossless JSON in, an equal independent copy out; anything else, a path."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import inspect
import math
import sys
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry import (
    INVALID_ARGS,
    NotJsonError,
    ToolCall,
    ToolDefinition,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
    dumps_pretty,
    snapshot_json,
)
from registry._json import MAX_DEPTH, _write, clone_json

INT_MIN = -(2**63)
INT_MAX = 2**64 - 1

# --------------------------------------------------------------------------- helpers


def strict_equal(a: Any, b: Any) -> bool:
    """Equal values of identical types all the way down: True != 1 != 1.0, 0.0 != -0.0."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(strict_equal(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def containers(value: Any) -> list[Any]:
    found = []
    if type(value) in (dict, list):
        found.append(value)
        for item in value.values() if type(value) is dict else value:
            found.extend(containers(item))
    return found


def nest(levels: int) -> list[Any]:
    """``levels`` nested lists: ``nest(1) == []``, ``nest(2) == [[]]``."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def force_walker(value: Any) -> list[Any]:
    """Wrap ``value`` so that orjson refuses it (too deep) and only the exact walk remains."""
    return [value, nest(MAX_DEPTH - 1)]


def test_strict_equal_tells_apart_what_plain_equality_confuses() -> None:
    assert strict_equal({"a": [1, 2.5, None, "x", True]}, {"a": [1, 2.5, None, "x", True]})
    assert not strict_equal(True, 1)
    assert not strict_equal(1, 1.0)
    assert not strict_equal(0.0, -0.0)
    assert not strict_equal([1], [True])
    assert not strict_equal({"a": 1}, {"a": 1.0})
    assert not strict_equal({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not strict_equal([[0]], [[False]])
    assert not strict_equal([1], (1,))


def test_force_walker_really_bypasses_orjson() -> None:
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(force_walker(None))
    assert strict_equal(snapshot_json(force_walker(None)), force_walker(None))


# --------------------------------------------------------------------------- strategies

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=INT_MIN, max_value=INT_MAX),
    st.sampled_from([INT_MIN, INT_MAX, 2**63, 2**63 - 1, -1, 0, 1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 5e-324, 1.7976931348623157e308, 0.1]),
    st.text(),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=40,
)


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1


class Mode(enum.StrEnum):
    FAST = "fast"


class Ratio(float, enum.Enum):
    HALF = 0.5


class Perm(enum.IntFlag):
    R = 4


class MyDict(dict):  # type: ignore[type-arg]
    pass


class MyList(list):  # type: ignore[type-arg]
    pass


class MyStr(str):
    __slots__ = ()


class MyInt(int):
    pass


class MyFloat(float):
    pass


@dataclasses.dataclass
class Point:
    x: int


class Plain:
    pass


def _cyclic_list() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


# (label, factory, suffix of the error path below the insertion point)
LEAF_BAD: list[tuple[str, Callable[[], Any], str]] = [
    ("nan", lambda: math.nan, ""),
    ("inf", lambda: math.inf, ""),
    ("-inf", lambda: -math.inf, ""),
    ("bytes", lambda: b"x", ""),
    ("bytearray", lambda: bytearray(b"x"), ""),
    ("tuple", lambda: (1, 2), ""),
    ("empty tuple", lambda: (), ""),
    ("set", lambda: {1}, ""),
    ("frozenset", lambda: frozenset({"a"}), ""),
    ("int key", lambda: {1: "a"}, ""),
    ("None key", lambda: {None: "a"}, ""),
    ("tuple key", lambda: {(1, 2): "a"}, ""),
    ("bool key", lambda: {True: "a"}, ""),
    ("str subclass key", lambda: {MyStr("k"): 1}, ""),
    ("enum key", lambda: {Mode.FAST: 1}, ""),
    ("cyclic list", _cyclic_list, "[0]"),
    ("cyclic dict", _cyclic_dict, ".self"),
    ("int too big", lambda: INT_MAX + 1, ""),
    ("int too small", lambda: INT_MIN - 1, ""),
    ("huge int", lambda: 10**40, ""),
    ("enum", lambda: Color.RED, ""),
    ("int enum", lambda: Level.LOW, ""),
    ("str enum", lambda: Mode.FAST, ""),
    ("float enum", lambda: Ratio.HALF, ""),
    ("int flag", lambda: Perm.R, ""),
    ("dict subclass", lambda: MyDict(a=1), ""),
    ("OrderedDict", lambda: collections.OrderedDict(a=1), ""),
    ("defaultdict", lambda: collections.defaultdict(int, a=1), ""),
    ("list subclass", lambda: MyList([1]), ""),
    ("str subclass", lambda: MyStr("s"), ""),
    ("int subclass", lambda: MyInt(3), ""),
    ("float subclass", lambda: MyFloat(1.5), ""),
    ("datetime", lambda: datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), ""),
    ("date", lambda: datetime.date(2026, 1, 1), ""),
    ("uuid", lambda: uuid.UUID(int=7), ""),
    ("decimal", lambda: decimal.Decimal("1.5"), ""),
    ("fraction", lambda: fractions.Fraction(1, 3), ""),
    ("complex", lambda: 1j, ""),
    ("dataclass", lambda: Point(1), ""),
    ("object", Plain, ""),
    ("range", lambda: range(2), ""),
    ("type", lambda: int, ""),
]


@st.composite
def embedded(draw: st.DrawFn, bad: st.SearchStrategy[tuple[str, Any, str]]) -> tuple[Any, str, str]:
    """One bad value placed somewhere inside valid JSON, with the expected error path."""
    label, value, suffix = draw(bad)
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            siblings = draw(st.lists(json_values, max_size=3))
            index = draw(st.integers(0, len(siblings)))
            steps.append(("list", (siblings, index)))
        else:
            siblings_d = draw(st.dictionaries(st.text(max_size=5), json_values, max_size=3))
            steps.append(("dict", (siblings_d, draw(st.text(max_size=5)))))
    path = "$"
    for kind, (_, where) in reversed(steps):
        path += f"[{where}]" if kind == "list" else f".{where}"
    if label == "too deep":
        # the chain starts at depth len(steps); its container at MAX_DEPTH is refused
        suffix = "[0]" * (MAX_DEPTH - len(steps))
    for kind, (siblings, where) in steps:
        if kind == "list":
            siblings.insert(where, value)
        else:
            siblings[where] = value
        value = siblings
    return value, path + suffix, label


bad_leaves = st.sampled_from(LEAF_BAD).map(lambda entry: (entry[0], entry[1](), entry[2]))


@st.composite
def too_deep(draw: st.DrawFn) -> tuple[str, Any, str]:
    # long enough to pass MAX_DEPTH at any embedding depth; ``embedded`` sets the path
    return ("too deep", nest(MAX_DEPTH + draw(st.integers(1, 3))), "")


# --------------------------------------------------------------------------- round trip


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_every_json_value_round_trips_with_the_same_types(value: Any) -> None:
    copied = snapshot_json(value)
    assert strict_equal(copied, value)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_the_exact_walk_round_trips_with_the_same_types(value: Any) -> None:
    wrapped = force_walker(value)
    copied = snapshot_json(wrapped)
    assert strict_equal(copied, wrapped)


@settings(max_examples=200, deadline=None)
@given(json_values, st.booleans())
def test_the_copy_is_independent_of_the_original(value: Any, walker: bool) -> None:
    original = force_walker(value) if walker else value
    reference = snapshot_json(original)
    copied = snapshot_json(original)
    original_ids = {id(c) for c in containers(original)}
    assert not any(id(c) in original_ids for c in containers(copied))
    for container in containers(copied):
        if type(container) is dict:
            container["__added__"] = "mutated"
        else:
            container.append("mutated")
    assert strict_equal(original, reference)


def test_shared_references_are_not_cycles_on_either_path() -> None:
    shared = [1, {"k": "v"}]
    for value in ([shared, shared], force_walker([shared, {"a": shared}])):
        copied = snapshot_json(value)
        assert strict_equal(copied, value)
    copied = snapshot_json([shared, shared])
    assert copied[0] is not copied[1]


def test_boundary_values_are_accepted_exactly() -> None:
    for value in (
        INT_MIN,
        INT_MAX,
        -0.0,
        5e-324,
        1.7976931348623157e308,
        "",
        {},
        [],
        "\u2028\U0001f600",
    ):
        for wrapped in (value, [value], force_walker(value)):
            assert strict_equal(snapshot_json(wrapped), wrapped)


def test_nesting_is_limited_to_max_depth() -> None:
    assert MAX_DEPTH == 255
    assert strict_equal(snapshot_json(nest(MAX_DEPTH)), nest(MAX_DEPTH))
    with pytest.raises(NotJsonError) as info:
        snapshot_json(nest(MAX_DEPTH + 1))
    assert info.value.path == "$" + "[0]" * MAX_DEPTH
    assert "deeper than 255" in info.value.problem


# --------------------------------------------------------------------------- rejection


@settings(max_examples=200, deadline=None)
@given(embedded(bad_leaves))
def test_every_non_json_value_is_rejected_with_its_path(case: tuple[Any, str, str]) -> None:
    value, path, label = case
    with pytest.raises(NotJsonError) as info:
        snapshot_json(value)
    assert info.value.path == path, label
    assert str(info.value) == f"{info.value.problem} at {path}"


@settings(max_examples=40, deadline=None)
@given(embedded(too_deep()))
def test_too_deep_nesting_is_rejected_inside_valid_json(case: tuple[Any, str, str]) -> None:
    value, path, _ = case
    with pytest.raises(NotJsonError) as info:
        snapshot_json(value)
    assert info.value.path == path
    assert "deeper than 255" in info.value.problem


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([Level.LOW], "value of type"),
        ({"k": Mode.FAST}, "value of type"),
        ({"a": [{"b": Ratio.HALF}]}, "value of type"),
        ([math.nan], "non-finite number nan"),
        ({"x": math.inf}, "non-finite number inf"),
        ([(1,)], "tuple (use a list)"),
        ([{1}], "set (use a list)"),
        ([b"x"], "bytes (decode it to str)"),
        ([{1: 2}], "non-string key 1"),
        ([2**64], "integer outside the 64-bit range"),
        ([uuid.UUID(int=1)], "value of type uuid.UUID"),
        ([MyDict()], "value of type"),
    ],
    ids=repr,
)
def test_rejections_explain_the_problem(value: Any, problem: str) -> None:
    with pytest.raises(NotJsonError) as info:
        snapshot_json(value)
    assert problem in info.value.problem
    assert isinstance(info.value, ValueError)


def test_a_nested_enum_is_rejected_not_silently_converted() -> None:
    # orjson serialises enum members to their value; an IntEnum/StrEnum member
    # then compares equal to the copy. The snapshot must still refuse it.
    for value, path in (
        ([Level.LOW], "$[0]"),
        ({"k": Mode.FAST}, "$.k"),
        ({"a": [1, {"b": Ratio.HALF}]}, "$.a[1].b"),
        ([Perm.R], "$[0]"),
    ):
        with pytest.raises(NotJsonError) as info:
            snapshot_json(value)
        assert info.value.path == path


def test_a_member_with_a_raising_eq_still_gives_not_json_error() -> None:
    class Hostile(enum.Enum):
        A = 1

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("hostile __eq__")

        __hash__ = enum.Enum.__hash__

    with pytest.raises(NotJsonError) as info:
        snapshot_json({"x": [Hostile.A]})
    assert info.value.path == "$.x[0]"


# --------------------------------------------------------------------------- through execute


async def _echo(args: Any, ctx: ToolRunContext) -> Any:
    raise AssertionError("the body must not run with bad arguments")


def _registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        ToolDefinition(
            name="take",
            description="Takes anything.",
            parameters={"type": "object"},
            output=ToolOutput(schema={}),
            execute=_echo,
        )
    )
    return reg


@pytest.mark.anyio
@settings(max_examples=150, deadline=None)
@given(embedded(bad_leaves | too_deep()))
async def test_execute_with_non_json_arguments_is_invalid_args(case: tuple[Any, str, str]) -> None:
    value, _, label = case
    reg = _registry()
    result = await reg.execute(ToolCall(call_id="c", name="take", arguments={"payload": value}))
    assert isinstance(result, ToolFailure), label
    assert result.error.info is not None and result.error.info.code == INVALID_ARGS
    assert "not lossless JSON" in result.error.message
    assert "at $.payload" in result.error.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments", [(), ("a",), {1: 2}, MyDict(), math.nan, Level.LOW, _cyclic_dict()]
)
async def test_execute_with_non_json_root_arguments_is_invalid_args(arguments: Any) -> None:
    result = await _registry().execute(ToolCall(call_id="c", name="take", arguments=arguments))
    assert isinstance(result, ToolFailure)
    assert result.error.info is not None and result.error.info.code == INVALID_ARGS
    assert result.content == [{"type": "text", "text": f"Error: {result.error.message}"}]


@pytest.mark.parametrize("value", ["\ud800", {"k": "a\udfffb"}, ["ok", "\ud83d"]])
def test_lone_surrogates_are_not_json(value: object) -> None:
    with pytest.raises(NotJsonError, match="lone surrogate"):
        snapshot_json(value)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"k": Level.LOW}, "$.k"),
        ({"k": Mode.FAST}, "$.k"),
        ({"k": True, "n": math.nan}, "$.n"),
        ({"k": 2**64}, "$.k"),
        ({"k": -(2**63) - 1}, "$.k"),
        ({"k": "\ud800"}, "$.k"),
        ({"\ud800": 1}, "$"),
        ({1: "x"}, "$"),
        ({"k": b"x"}, "$.k"),
    ],
    ids=repr,
)
def test_flat_objects_of_scalars_are_checked_like_any_other_value(value: Any, path: str) -> None:
    # Small objects of plain scalars (the usual tool arguments) take a shortcut;
    # it must refuse exactly what the general path refuses, at the same place.
    with pytest.raises(NotJsonError) as info:
        snapshot_json(value)
    assert info.value.path == path


def test_a_flat_object_copy_is_independent_and_keeps_exact_types() -> None:
    original = {"q": "x", "é": "ü", "n": 2**64 - 1, "f": -0.0, "b": True, "z": None}
    copied = snapshot_json(original)
    assert strict_equal(copied, original) and copied is not original
    copied["q"] = "changed"
    assert original["q"] == "x"


# --------------------------------------------------------------------------- writing and copying


def with_little_stack(fn: Callable[[], Any], headroom: int = 40) -> Any:
    """Run ``fn`` with only ``headroom`` Python frames to spare: a recursive walk fails."""
    depth = len(inspect.stack(0))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + headroom)
    try:
        return fn()
    finally:
        sys.setrecursionlimit(limit)


def pretty_nest(levels: int) -> str:
    """What ``orjson`` (``OPT_INDENT_2``) would write for ``nest(levels)``, at any depth."""
    opening = [" " * (2 * i) + "[" for i in range(levels - 1)]
    closing = [" " * (2 * i) + "]" for i in reversed(range(levels - 1))]
    return "\n".join([*opening, " " * (2 * (levels - 1)) + "[]", *closing])


def capped_nest(levels: int) -> str:
    """``nest(levels)`` indented for five levels (ten characters), then compact."""
    opening = [" " * (2 * i) + "[" for i in range(5)]
    closing = [" " * (2 * i) + "]" for i in reversed(range(5))]
    inner = " " * 10 + "[" * (levels - 5) + "]" * (levels - 5)
    return "\n".join([*opening, inner, *closing])


@pytest.mark.parametrize("levels", [MAX_DEPTH, MAX_DEPTH + 1, 4 * MAX_DEPTH])
def test_json_text_is_written_at_the_deepest_admitted_nesting_and_beyond(levels: int) -> None:
    # orjson writes at most MAX_DEPTH - 1 levels; the writer never depends on it
    # (nor on the call stack), capped or not.
    value = nest(levels)
    if levels == MAX_DEPTH:
        assert strict_equal(snapshot_json(value), value)  # admitted
    assert with_little_stack(lambda: dumps_pretty(value)) == pretty_nest(levels)
    assert with_little_stack(lambda: dumps_pretty(value, max_indent=10)) == capped_nest(levels)
    assert with_little_stack(lambda: dumps_pretty(value, max_indent=0)) == (
        "[" * levels + "]" * levels
    )


def chain(value: list[Any]) -> list[list[Any]]:
    """The lists of a ``nest()``, outermost first (without recursion)."""
    lists = [value]
    while lists[-1]:
        lists.append(lists[-1][0])
    return lists


@pytest.mark.parametrize("levels", [MAX_DEPTH, 4 * MAX_DEPTH])
def test_a_value_is_copied_at_any_depth(levels: int) -> None:
    value: Any = {"k": nest(levels - 1), "shared": [1]}
    value["again"] = value["shared"]
    copied = with_little_stack(lambda: clone_json(value))
    assert copied.keys() == value.keys()
    originals = {id(item) for item in chain(value["k"])}
    copies = chain(copied["k"])
    assert len(copies) == levels - 1
    assert not any(id(item) in originals for item in copies)
    assert copied["again"] is copied["shared"] == [1]
    assert copied["shared"] is not value["shared"]


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_writer_writes_what_orjson_writes(value: Any) -> None:
    # The writer takes over where orjson refuses (too deep); its text is orjson's own.
    pretty = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    compact = orjson.dumps(value).decode()
    assert _write(value, None) == pretty
    deep = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert dumps_pretty(force_walker(value), max_indent=0) == f"[{compact},{deep}]"
    assert strict_equal(orjson.loads(dumps_pretty(value, max_indent=10)), value)


@settings(max_examples=200, deadline=None)
@given(json_values, st.booleans())
def test_a_copy_is_equal_and_independent(value: Any, walker: bool) -> None:
    original = force_walker(value) if walker else value
    copied = clone_json(original)
    assert strict_equal(copied, original)
    original_ids = {id(c) for c in containers(original)}
    assert not any(id(c) in original_ids for c in containers(copied))


@pytest.mark.anyio
async def test_a_tool_returning_the_deepest_admitted_value_is_rendered_and_delivered() -> None:
    # The default renderer, the post-execute and observer copies all cope with
    # the deepest value the snapshot admits (one level past orjson's limit).
    deep = nest(MAX_DEPTH)

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        return deep

    async def post(execution: Any, result: Any, call_next: Any) -> Any:
        return await call_next()

    observed: list[Any] = []
    reg = ToolRegistry()
    reg.register(
        ToolDefinition(
            name="deep",
            description="A deep value.",
            parameters={"type": "object"},
            output=ToolOutput(schema={"type": "array"}),
            execute=body,
        )
    )
    reg.on_post_execute(post)
    reg.on_result(lambda execution, result: observed.append(result))
    result = await reg.execute(ToolCall(call_id="c", name="deep", arguments={}))
    assert not result.is_error, result.error
    assert strict_equal(result.value, deep)
    assert result.content == [{"type": "text", "text": pretty_nest(MAX_DEPTH)}]
    assert observed == [result]
