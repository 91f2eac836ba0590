"""Typed tools: pydantic models, dataclasses and typed values at the boundary of ``define_tool``.

The body gets the typed value (a ``datetime``, a model instance…); the canonical
output is its JSON form, matching the declared output schema; an argument that
cannot become the typed value is an ``INVALID_ARGS`` failure naming where.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from ptc import CodeExecutor
from registry import (
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    RegistrationError,
    ToolCall,
    ToolFailure,
    ToolRegistry,
    ToolReturn,
    ToolSuccess,
    define_tool,
)
from runtime.testing import InProcessRuntime
from sdkgen import render_sdk

UTC = dt.UTC
DECIMAL_PATTERN = r"^-?\d+(\.\d+)?$"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Item(BaseModel):
    """One line of an order."""

    sku: str
    qty: int = Field(gt=0, description="how many")
    ship_on: dt.date | None = None


class Order(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: uuid.UUID
    items: list[Item]
    total: Decimal
    color: Color = Color.RED
    placed_at: dt.datetime = Field(alias="placedAt")

    @field_validator("items")
    @classmethod
    def _some_items(cls, items: list[Item]) -> list[Item]:
        if not items:
            raise ValueError("an order needs at least one item")
        return items


class Span(BaseModel):
    start: dt.datetime
    end: dt.datetime

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        if self.end < self.start:
            raise ValueError("end is before start")
        return self


class Node(BaseModel):
    name: str
    children: list[Node] = []


@dataclasses.dataclass
class Window:
    """A delivery window.

    Attributes:
        start: when it opens.
        end: when it closes; open-ended when missing.
    """

    start: dt.datetime
    end: dt.datetime | None = None
    tags: list[str] = dataclasses.field(default_factory=list)
    slot: int = 1

    def __post_init__(self) -> None:
        if self.end is not None and self.end < self.start:
            raise ValueError("end is before start")


@dataclasses.dataclass(frozen=True)
class Tree:
    label: str
    kids: list[Tree] = dataclasses.field(default_factory=list)


class WithCallback(BaseModel):
    fn: Callable[[], None]


def _box(value_type: type) -> Any:
    class Item(BaseModel):  # the same name as the module's Item, another shape
        value: value_type  # type: ignore[valid-type]

    class Box(BaseModel):
        item: Item

    return Box


IntBox = _box(int)
StrBox = _box(str)


@dataclasses.dataclass
class WithInitVar:
    x: int
    secret: dataclasses.InitVar[str]


@dataclasses.dataclass
class WithBytes:
    blob: bytes


@dataclasses.dataclass
class Stamped:
    at: dt.datetime
    count: int = dataclasses.field(init=False, default=0)


def _echo(annotation: Any, seen: list[Any], **options: Any) -> Any:
    """``async def echo(x: annotation) -> annotation`` that records what its body got."""

    async def echo(x: Any) -> Any:
        seen.append(x)
        return x

    echo.__annotations__ = {"x": annotation, "return": annotation}
    return define_tool(echo, **options)


async def _call(definition: Any, arguments: Any) -> ToolSuccess | ToolFailure:
    registry = ToolRegistry()
    registry.register(definition)
    return await registry.execute(ToolCall(call_id="c1", name=definition.name, arguments=arguments))


def _value(result: ToolSuccess | ToolFailure) -> Any:
    assert isinstance(result, ToolSuccess), result
    return result.value


def _error(result: ToolSuccess | ToolFailure, code: str) -> str:
    assert isinstance(result, ToolFailure), result
    assert result.error.info is not None
    assert result.error.info.code == code
    return result.error.message


# --------------------------------------------------------------------------- typed values

UID = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")

CONVERSIONS = [
    # (annotation, JSON in, what the body gets, JSON out, parameter schema, output schema)
    pytest.param(
        dt.datetime,
        "2024-05-01T09:30:00+02:00",
        dt.datetime(2024, 5, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        "2024-05-01T09:30:00+02:00",
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "date-time"},
        id="datetime",
    ),
    pytest.param(
        dt.datetime,
        "2024-05-01T09:30:00Z",
        dt.datetime(2024, 5, 1, 9, 30, tzinfo=UTC),
        "2024-05-01T09:30:00+00:00",
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "date-time"},
        id="datetime-z",
    ),
    pytest.param(
        dt.date,
        "2024-05-01",
        dt.date(2024, 5, 1),
        "2024-05-01",
        {"type": "string", "format": "date"},
        {"type": "string", "format": "date"},
        id="date",
    ),
    pytest.param(
        dt.time,
        "09:30:15",
        dt.time(9, 30, 15),
        "09:30:15",
        {"type": "string", "format": "time"},
        {"type": "string", "format": "time"},
        id="time",
    ),
    pytest.param(
        uuid.UUID,
        str(UID).upper(),
        UID,
        str(UID),
        {"type": "string", "format": "uuid"},
        {"type": "string", "format": "uuid"},
        id="uuid",
    ),
    pytest.param(
        Decimal,
        "12.50",
        Decimal("12.50"),
        "12.50",
        {"type": ["number", "string"], "pattern": DECIMAL_PATTERN},
        {"type": "string", "pattern": DECIMAL_PATTERN},
        id="decimal-string",
    ),
    pytest.param(
        Decimal,
        0.1,
        Decimal("0.1"),
        "0.1",
        {"type": ["number", "string"], "pattern": DECIMAL_PATTERN},
        {"type": "string", "pattern": DECIMAL_PATTERN},
        id="decimal-number",
    ),
    pytest.param(
        Path,
        "/srv/data/a b.txt",
        Path("/srv/data/a b.txt"),
        "/srv/data/a b.txt",
        {"type": "string", "format": "path"},
        {"type": "string", "format": "path"},
        id="path",
    ),
    pytest.param(
        PurePosixPath,
        "docs/index.md",
        PurePosixPath("docs/index.md"),
        "docs/index.md",
        {"type": "string", "format": "path"},
        {"type": "string", "format": "path"},
        id="pure-path",
    ),
    pytest.param(
        Color,
        "blue",
        Color.BLUE,
        "blue",
        {"title": "Color", "type": "string", "enum": ["red", "blue"]},
        {"title": "Color", "type": "string", "enum": ["red", "blue"]},
        id="enum",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("annotation", "given", "body_gets", "returned", "parameter", "output"), CONVERSIONS
)
async def test_typed_value_as_parameter_and_return(
    annotation: Any,
    given: Any,
    body_gets: Any,
    returned: Any,
    parameter: dict[str, Any],
    output: dict[str, Any],
) -> None:
    seen: list[Any] = []
    definition = _echo(annotation, seen)
    assert definition.parameters["properties"]["x"] == parameter
    assert definition.output.schema == output

    value = _value(await _call(definition, {"x": given}))

    assert seen == [body_gets]
    assert type(seen[0]) is type(body_gets)
    assert value == returned
    jsonschema.validate(value, output)


@pytest.mark.anyio
async def test_decimal_result_is_plain_notation_and_not_finite_fails() -> None:
    async def price(text: str) -> Decimal:
        return Decimal(text)

    definition = define_tool(price)
    assert _value(await _call(definition, {"text": "1E+3"})) == "1000"
    assert _value(await _call(definition, {"text": "-1.5E-3"})) == "-0.0015"
    message = _error(await _call(definition, {"text": "NaN"}), INVALID_TOOL_OUTPUT)
    assert (
        message
        == "price returned a value with no JSON form: Decimal('NaN') has no JSON form (at $)"
    )


@pytest.mark.anyio
async def test_a_datetime_returned_for_a_date_is_an_output_error() -> None:
    async def today() -> dt.date:
        return dt.datetime(2024, 5, 1, 9, 30)

    message = _error(await _call(define_tool(today), {}), INVALID_TOOL_OUTPUT)
    assert "a datetime (2024-05-01T09:30:00) where a date is declared" in message
    assert message.endswith("(at $)")


@pytest.mark.anyio
async def test_typed_defaults_appear_in_json_form() -> None:
    seen: list[Any] = []

    async def book(
        at: dt.datetime = dt.datetime(2024, 1, 1, tzinfo=UTC),
        fee: Decimal = Decimal("1.50"),
        where: Path = Path("/tmp"),
    ) -> None:
        seen.append((at, fee, where))

    definition = define_tool(book)
    properties = definition.parameters["properties"]
    assert properties["at"]["default"] == "2024-01-01T00:00:00+00:00"
    assert properties["fee"]["default"] == "1.50"
    assert properties["where"]["default"] == "/tmp"
    assert "required" not in definition.parameters
    await _call(definition, {})
    assert seen == [(dt.datetime(2024, 1, 1, tzinfo=UTC), Decimal("1.50"), Path("/tmp"))]


@pytest.mark.anyio
async def test_optional_datetime() -> None:
    seen: list[Any] = []

    async def remind(text: str, at: dt.datetime | None = None) -> dt.datetime | None:
        seen.append(at)
        return at

    definition = define_tool(remind)
    assert definition.parameters["properties"]["at"] == {
        "anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}],
        "default": None,
    }
    assert definition.parameters["required"] == ["text"]
    assert _value(await _call(definition, {"text": "a"})) is None
    assert _value(await _call(definition, {"text": "a", "at": None})) is None
    value = _value(await _call(definition, {"text": "a", "at": "2024-05-01T09:30:00"}))
    assert value == "2024-05-01T09:30:00"
    assert seen == [None, None, dt.datetime(2024, 5, 1, 9, 30)]


@pytest.mark.anyio
async def test_union_members_are_tried_in_order_and_a_plain_member_takes_the_rest() -> None:
    seen: list[Any] = []

    async def find(key: uuid.UUID | str, day: dt.date | dt.datetime) -> None:
        seen.append((key, day))

    definition = define_tool(find)
    await _call(definition, {"key": str(UID), "day": "2024-05-01"})
    await _call(definition, {"key": "by-name", "day": "2024-05-01T10:00:00"})
    assert seen == [
        (UID, dt.date(2024, 5, 1)),
        ("by-name", dt.datetime(2024, 5, 1, 10, 0)),
    ]
    message = _error(await _call(definition, {"key": "k", "day": "soon"}), INVALID_ARGS)
    assert message == (
        "invalid arguments for find: 'soon' is not a date (ISO 8601, e.g. '2024-05-01') (at $.day)"
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("annotation", "given", "message"),
    [
        pytest.param(
            dt.datetime,
            "yesterday",
            "'yesterday' is not a date-time (ISO 8601, e.g. '2024-05-01T09:30:00+00:00') (at $.x)",
            id="datetime-malformed",
        ),
        pytest.param(
            dt.datetime,
            "2024-05-01",
            "'2024-05-01' is a date without a time; a date-time needs one "
            "(e.g. '2024-05-01T09:30:00+00:00') (at $.x)",
            id="datetime-without-time",
        ),
        pytest.param(
            dt.date,
            "2024-13-01",
            "'2024-13-01' is not a date: month must be in 1..12 (ISO 8601, e.g. '2024-05-01') "
            "(at $.x)",
            id="date-bad-month",
        ),
        pytest.param(
            dt.time,
            "25:00",
            "'25:00' is not a time: hour must be in 0..23 (ISO 8601, e.g. '09:30:00') (at $.x)",
            id="time-bad-hour",
        ),
        pytest.param(
            uuid.UUID,
            "not-a-uuid",
            "'not-a-uuid' is not a UUID (e.g. '123e4567-e89b-12d3-a456-426614174000') (at $.x)",
            id="uuid",
        ),
        pytest.param(Path, "", "'' is not a path (at $.x)", id="path-empty"),
        pytest.param(
            list[dt.date],
            ["2024-05-01", "2024-02-30"],
            "'2024-02-30' is not a date: day is out of range for month (ISO 8601, e.g. "
            "'2024-05-01') (at $.x[1])",
            id="list-item",
        ),
        pytest.param(
            dict[str, uuid.UUID],
            {"a": str(UID), "b": "nope"},
            "'nope' is not a UUID (e.g. '123e4567-e89b-12d3-a456-426614174000') (at $.x.b)",
            id="dict-value",
        ),
    ],
)
async def test_malformed_typed_values_are_invalid_args(
    annotation: Any, given: Any, message: str
) -> None:
    seen: list[Any] = []
    result = await _call(_echo(annotation, seen), {"x": given})
    assert _error(result, INVALID_ARGS) == f"invalid arguments for echo: {message}"
    assert isinstance(result, ToolFailure) and result.error.info is not None
    assert result.error.info.name == "ToolArgsError"
    assert seen == []  # the body never ran


@pytest.mark.anyio
async def test_a_decimal_string_must_be_plain_notation() -> None:
    result = await _call(_echo(Decimal, []), {"x": "1e3"})
    message = _error(result, INVALID_ARGS)
    # The schema's pattern already says no; the message says where and why.
    assert message.startswith("invalid arguments for echo: '1e3' does not match")
    assert message.endswith("(at $.x)")


# --------------------------------------------------------------------------- pydantic models


ORDER_ARGS = {
    "id": str(UID),
    "items": [{"sku": "a-1", "qty": 2, "ship_on": "2024-05-03"}, {"sku": "b-2", "qty": 1}],
    "total": "12.50",
    "placedAt": "2024-05-01T09:30:00Z",
}


def _place(seen: list[Any]) -> Any:
    async def place(order: Order) -> Order:
        """Place an order.

        Args:
            order: what to place.
        """
        seen.append(order)
        return order

    return define_tool(place)


@pytest.mark.anyio
async def test_model_parameter_gets_an_instance_and_returns_its_json() -> None:
    seen: list[Any] = []
    definition = _place(seen)

    value = _value(await _call(definition, {"order": ORDER_ARGS}))

    (order,) = seen
    assert isinstance(order, Order)
    assert order.placed_at == dt.datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    assert order.items[0] == Item(sku="a-1", qty=2, ship_on=dt.date(2024, 5, 3))
    assert order.total == Decimal("12.50")
    assert value == {
        "id": str(UID),
        "items": [
            {"sku": "a-1", "qty": 2, "ship_on": "2024-05-03"},
            {"sku": "b-2", "qty": 1, "ship_on": None},
        ],
        "total": "12.50",
        "color": "red",
        "placedAt": "2024-05-01T09:30:00Z",  # pydantic's own JSON form
    }
    jsonschema.validate(value, definition.output.schema)


def test_model_schemas_are_the_models_own_and_self_contained() -> None:
    definition = _place([])
    parameter = definition.parameters["properties"]["order"]
    validation = Order.model_json_schema(mode="validation")
    assert parameter == {
        **{k: v for k, v in validation.items() if k != "$defs"},
        "description": "what to place.",
    }
    assert definition.parameters["$defs"] == validation["$defs"]
    # Every field of a dumped model is present: the result schema requires them all.
    output = definition.output.schema
    assert sorted(output["required"]) == ["color", "id", "items", "placedAt", "total"]
    assert sorted(output["$defs"]["Item"]["required"]) == ["qty", "ship_on", "sku"]
    assert output["properties"]["total"] == {"title": "Total", "type": "string"}


@pytest.mark.anyio
async def test_nested_models_in_a_list_both_ways() -> None:
    seen: list[Any] = []

    async def restock(items: list[Item]) -> list[Item]:
        seen.append(items)
        return [item.model_copy(update={"qty": item.qty * 10}) for item in items]

    definition = define_tool(restock)
    schema = definition.parameters["properties"]["items"]
    assert schema["type"] == "array"
    assert schema["items"]["title"] == "Item"
    assert definition.output.schema["items"]["title"] == "Item"
    value = _value(
        await _call(definition, {"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]})
    )
    assert [type(item) for item in seen[0]] == [Item, Item]
    assert value == [
        {"sku": "a", "qty": 10, "ship_on": None},
        {"sku": "b", "qty": 20, "ship_on": None},
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("order", "pattern"),
    [
        # pydantic's own wording (which its releases may refine) between our frame of
        # "invalid arguments for <tool>: ...", the bad input and its path.
        pytest.param(
            {**ORDER_ARGS, "items": []},
            r"Value error, an order needs at least one item \(at \$\.order\.items\)",
            id="field-validator",
        ),
        pytest.param(
            {**ORDER_ARGS, "id": "zzz"},
            r"Input should be a valid UUID[^;]*, got 'zzz' \(at \$\.order\.id\)",
            id="uuid",
        ),
        pytest.param(
            {**ORDER_ARGS, "placedAt": "whenever", "total": "a lot"},
            r"Input should be a valid decimal[^;]*, got 'a lot' \(at \$\.order\.total\); "
            r"Input should be a valid datetime[^;]*, got 'whenever' \(at \$\.order\.placedAt\)",
            id="two-errors",
        ),
    ],
)
async def test_a_failing_model_is_invalid_args_with_every_error(
    order: dict[str, Any], pattern: str
) -> None:
    seen: list[Any] = []
    result = await _call(_place(seen), {"order": order})
    message = _error(result, INVALID_ARGS)
    assert re.fullmatch(f"invalid arguments for place: {pattern}", message), message
    assert seen == []


@pytest.mark.anyio
async def test_a_model_validator_failing_is_invalid_args() -> None:
    async def plan(span: Span) -> None: ...

    result = await _call(
        define_tool(plan),
        {"span": {"start": "2024-05-02T00:00:00Z", "end": "2024-05-01T00:00:00Z"}},
    )
    assert _error(result, INVALID_ARGS) == (
        "invalid arguments for plan: Value error, end is before start (at $.span)"
    )


@pytest.mark.anyio
async def test_recursive_model_and_same_named_models_get_their_own_defs() -> None:
    async def pack(a: IntBox, b: StrBox, tree: Node, extra: Item) -> Node:  # type: ignore[valid-type]
        return tree

    definition = define_tool(pack)
    defs = definition.parameters["$defs"]
    assert set(defs) == {"Item", "Item_2", "Node"}
    properties = definition.parameters["properties"]
    refs = {name: properties[name]["properties"]["item"]["$ref"] for name in ("a", "b")}
    assert refs == {"a": "#/$defs/Item", "b": "#/$defs/Item_2"}
    assert defs["Item"]["properties"]["value"]["type"] == "integer"
    assert defs["Item_2"]["properties"]["value"]["type"] == "string"
    # The module's Item has no $defs of its own: it is inlined, whatever its name.
    assert properties["extra"]["title"] == "Item"
    assert "sku" in properties["extra"]["properties"]
    assert properties["tree"] == {"$ref": "#/$defs/Node"}

    tree = {"name": "root", "children": [{"name": "leaf"}]}
    args = {"a": {"item": {"value": 1}}, "b": {"item": {"value": "x"}}, "tree": tree}
    value = _value(await _call(definition, {**args, "extra": {"sku": "s", "qty": 1}}))
    assert value == {"name": "root", "children": [{"name": "leaf", "children": []}]}
    bad = await _call(
        definition, {**args, "b": {"item": {"value": 1}}, "extra": {"sku": "s", "qty": 1}}
    )
    assert "(at $.b.item.value)" in _error(bad, INVALID_ARGS)


def test_a_model_pydantic_cannot_describe_is_a_registration_error() -> None:
    async def hook(bad: WithCallback) -> None: ...

    with pytest.raises(RegistrationError) as caught:
        define_tool(hook)
    assert "parameter 'bad': pydantic cannot give" in caught.value.problem
    assert caught.value.problem == (
        "parameter 'bad': pydantic cannot give WithCallback a JSON Schema: "
        "Cannot generate a JsonSchema for core_schema.CallableSchema"
    )


# --------------------------------------------------------------------------- dataclasses


def test_dataclass_schema_with_defaults_docs_and_closed_keys() -> None:
    async def deliver(window: Window) -> Window:
        return window

    definition = define_tool(deliver)
    assert definition.parameters["properties"]["window"] == {
        "title": "Window",
        "type": "object",
        "description": "A delivery window.",
        "properties": {
            "start": {"type": "string", "format": "date-time", "description": "when it opens."},
            "end": {
                "anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}],
                "description": "when it closes; open-ended when missing.",
                "default": None,
            },
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            "slot": {"type": "integer", "default": 1},
        },
        "required": ["start"],
        "additionalProperties": False,
    }
    # A returned instance has every field.
    assert definition.output.schema["required"] == ["start", "end", "tags", "slot"]


@pytest.mark.anyio
async def test_dataclass_with_defaults_round_trip() -> None:
    seen: list[Any] = []

    async def deliver(window: Window) -> Window:
        seen.append(window)
        return dataclasses.replace(window, slot=window.slot + 1)

    definition = define_tool(deliver)
    value = _value(await _call(definition, {"window": {"start": "2024-05-01T09:00:00+00:00"}}))
    assert seen == [Window(start=dt.datetime(2024, 5, 1, 9, tzinfo=UTC))]
    assert value == {"start": "2024-05-01T09:00:00+00:00", "end": None, "tags": [], "slot": 2}
    jsonschema.validate(value, definition.output.schema)


@pytest.mark.anyio
async def test_dataclass_post_init_failing_is_invalid_args() -> None:
    async def deliver(window: Window) -> None: ...

    window = {"start": "2024-05-02T00:00:00Z", "end": "2024-05-01T00:00:00Z"}
    result = await _call(define_tool(deliver), {"window": window})
    assert _error(result, INVALID_ARGS) == (
        "invalid arguments for deliver: Window: end is before start (at $.window)"
    )
    nested = await _call(
        define_tool(deliver), {"window": {"start": "2024-05-02T00:00:00Z", "end": "x"}}
    )
    assert _error(nested, INVALID_ARGS).endswith("(at $.window.end)")


@pydantic_dataclass
class Slot:
    hour: int

    @field_validator("hour")
    @classmethod
    def _office_hours(cls, hour: int) -> int:
        if not 9 <= hour <= 17:
            raise ValueError("outside office hours")
        return hour


@pytest.mark.anyio
async def test_a_pydantic_dataclass_validator_failing_is_invalid_args() -> None:
    async def book(slot: Slot) -> Slot:
        return slot

    definition = define_tool(book)
    assert _value(await _call(definition, {"slot": {"hour": 10}})) == {"hour": 10}
    result = await _call(definition, {"slot": {"hour": 20}})
    assert _error(result, INVALID_ARGS) == (
        "invalid arguments for book: Value error, outside office hours, got 20 (at $.slot.hour)"
    )


@pytest.mark.anyio
async def test_recursive_frozen_dataclass_and_init_false_fields() -> None:
    async def grow(tree: Tree, stamp: Stamped) -> Tree:
        assert isinstance(stamp, Stamped) and stamp.count == 0
        return Tree(label=tree.label + "!", kids=[tree])

    definition = define_tool(grow)
    assert definition.parameters["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    # count has init=False: not an argument, but part of what a Stamped returns.
    assert list(definition.parameters["properties"]["stamp"]["properties"]) == ["at"]
    value = _value(
        await _call(
            definition,
            {"tree": {"label": "a", "kids": [{"label": "b"}]}, "stamp": {"at": "2024-05-01T00:00"}},
        )
    )
    assert value == {
        "label": "a!",
        "kids": [{"label": "a", "kids": [{"label": "b", "kids": []}]}],
    }


def test_dataclass_registration_errors() -> None:
    async def uses_initvar(v: WithInitVar) -> None: ...

    async def uses_bytes(v: WithBytes) -> None: ...

    with pytest.raises(RegistrationError) as initvar:
        define_tool(uses_initvar)
    assert initvar.value.problem == (
        "parameter 'v': WithInitVar has an InitVar, which JSON cannot pass"
    )
    with pytest.raises(RegistrationError) as blob:
        define_tool(uses_bytes)
    assert blob.value.problem.startswith("parameter 'v' (field 'blob' of WithBytes): bytes")


# --------------------------------------------------------------------------- the boundary


@pytest.mark.anyio
async def test_a_tool_return_keeps_its_content_and_converts_its_value() -> None:
    async def stamp() -> dt.datetime:
        at = dt.datetime(2024, 5, 1, tzinfo=UTC)
        return ToolReturn(at, [{"type": "text", "text": "stamped"}])  # type: ignore[return-value]

    result = await _call(define_tool(stamp), {})
    assert isinstance(result, ToolSuccess)
    assert result.value == "2024-05-01T00:00:00+00:00"
    assert result.content == [{"type": "text", "text": "stamped"}]


@pytest.mark.anyio
async def test_sync_tools_convert_too() -> None:
    def shift(at: dt.datetime, hours: int) -> dt.datetime:
        return at + dt.timedelta(hours=hours)

    value = _value(await _call(define_tool(shift), {"at": "2024-05-01T23:00:00Z", "hours": 2}))
    assert value == "2024-05-02T01:00:00+00:00"


def test_without_pydantic_imported_nothing_imports_it() -> None:
    program = """
import dataclasses, datetime, sys
from registry import define_tool

@dataclasses.dataclass
class Slot:
    at: datetime.datetime

async def book(slot: Slot, day: datetime.date) -> Slot:
    return slot

definition = define_tool(book)
assert definition.parameters["properties"]["day"]["format"] == "date"
assert "pydantic" not in sys.modules, sorted(m for m in sys.modules if "pydantic" in m)
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


# --------------------------------------------------------------------------- code mode


def _shop() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def place(order: Order, deliver: Window) -> Order:
        """Place an order for delivery.

        Args:
            order: what to place.
            deliver: when to deliver it.
        """
        assert isinstance(order, Order) and isinstance(deliver, Window)
        return order.model_copy(update={"total": order.total + Decimal("5.00")})

    @registry.tool
    async def next_slot(after: dt.datetime) -> dt.datetime:
        """The next free delivery slot."""
        return after.replace(minute=0) + dt.timedelta(hours=1)

    return registry


@pytest.mark.anyio
async def test_a_program_calls_a_pydantic_typed_tool() -> None:
    code = """
slot = await tools.next_slot({"after": "2024-05-01T09:30:00+00:00"})
order = await tools.place({
    "order": {"id": "UID", "items": [{"sku": "a", "qty": 2}], "total": 12.5,
              "placedAt": "2024-05-01T09:00:00Z"},
    "deliver": {"start": slot},
})
try:
    await tools.place({"order": {**order, "items": []}, "deliver": {"start": slot}})
except ToolCallError as e:
    failure = [e.code, e.message]
return {"slot": slot, "total": order["total"], "items": order["items"], "failure": failure}
""".replace("UID", str(UID))
    async with CodeExecutor(_shop(), runtime=InProcessRuntime()) as executor:
        result = await executor.run_code(code, description="place an order")
    assert isinstance(result, ToolSuccess), result
    assert result.value["result"] == {
        "slot": "2024-05-01T10:00:00+00:00",
        "total": "17.50",
        "items": [{"sku": "a", "qty": 2, "ship_on": None}],
        "failure": [
            "INVALID_ARGS",
            "invalid arguments for place: Value error, an order needs at least one item "
            "(at $.order.items)",
        ],
    }


def test_the_sdk_text_of_typed_tools() -> None:
    text = CodeExecutor(_shop(), runtime=InProcessRuntime()).sdk_text()
    expected = [
        # the model as a TypedDict, its enum as a Literal, formats in the comments
        "class PlaceArgsOrder(TypedDict):\n"
        '    id: str  # (format "uuid")\n'
        "    items: list[PlaceItem]\n"
        '    placedAt: str  # (format "date-time")\n'
        "    total: float | str\n"
        '    color: NotRequired[Literal["red", "blue"]]  # (default "red")\n',
        "class PlaceItem(TypedDict):\n"
        '    """One line of an order."""\n'
        "    qty: int  # how many (greater than 0)\n"
        "    sku: str\n"
        '    ship_on: NotRequired[str | None]  # (default null, format "date")\n',
        # the dataclass, with its documented fields
        "class PlaceArgsDeliver(TypedDict):\n"
        '    start: str  # when it opens. (format "date-time")\n'
        "    end: NotRequired[str | None]  # when it closes; open-ended when missing. "
        '(default null, format "date-time")\n',
        # the result: every field present, the decimal a string
        "class Order(TypedDict):\n"
        '    color: Literal["red", "blue"]  # (default "red")\n'
        '    id: str  # (format "uuid")\n',
        "    total: str\n",
        '# (format "date-time")\nNextSlotResult: TypeAlias = str\n',
        "async def next_slot(self, args: NextSlotArgs) -> NextSlotResult:",
        "async def place(self, args: PlaceArgs) -> Order:",
    ]
    for piece in expected:
        assert piece in text, piece
    # The SDK is valid Python that names every type it uses.
    compile(text, "<sdk>", "exec")
    assert render_sdk(_shop().schemas(with_output=True)) == text
