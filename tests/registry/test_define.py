"""``define_tool`` and ``@ToolRegistry.tool``: schemas from signatures, docstrings, calls."""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Awaitable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    NewType,
    NotRequired,
    Optional,
    TypedDict,
    TypeVar,
    Union,
)

import anyio
import jsonschema
import pytest

from registry import (
    ABORTED,
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    AbortSignal,
    JsonValue,
    RegistrationError,
    ToolCall,
    ToolDefinition,
    ToolFailure,
    ToolRegistry,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from registry._docstring import parse_docstring

if TYPE_CHECKING:
    from decimal import Decimal

T = TypeVar("T")
UserId = NewType("UserId", str)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    A = "a"
    ONE = 1


class Perm(enum.Flag):
    READ = 1
    WRITE = 2


class Point(TypedDict):
    x: int
    y: int


class Options(TypedDict, total=False):
    """Search options.

    Attributes:
        limit: at most this many hits.
        exact: match whole words only.
    """

    limit: int
    exact: bool


class Query(TypedDict):
    text: str
    options: NotRequired[Options]
    near: NotRequired[Point | None]


class Tree(TypedDict):
    label: str
    children: list[Tree]


class Ping(TypedDict):
    next: NotRequired[Pong]


class Pong(TypedDict):
    back: NotRequired[Ping]


class Painted(TypedDict):
    shade: Color
    history: NotRequired[list[Painted]]


class Hit(TypedDict):
    path: str
    line: int
    preview: str


class SearchResult(TypedDict):
    """Matches of one search."""

    hits: list[Hit]
    truncated: bool


def _params(fn: Any, **kwargs: Any) -> dict[str, Any]:
    return dict(define_tool(fn, **kwargs).parameters)


def _prop(annotation: Any) -> dict[str, Any]:
    """The property schema of a lone parameter annotated ``annotation``."""

    async def tool(value: Any) -> None:
        return None

    tool.__annotations__ = {"value": annotation, "return": None}
    return dict(_params(tool)["properties"]["value"])


def _problem(fn: Any, **kwargs: Any) -> str:
    with pytest.raises(RegistrationError) as caught:
        define_tool(fn, **kwargs)
    return caught.value.problem


async def _run(registry: ToolRegistry, name: str, arguments: Any, **call: Any) -> Any:
    return await registry.execute(ToolCall(call_id="c1", name=name, arguments=arguments, **call))


# --------------------------------------------------------------------------- type mapping


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            Mapping[str, list[bool]],
            {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "boolean"}},
            },
        ),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (
            dict[Literal["a", "b"], int],
            {
                "type": "object",
                "propertyNames": {"enum": ["a", "b"]},
                "additionalProperties": {"type": "integer"},
            },
        ),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[True], {"type": "boolean", "enum": [True]}),
        (Literal["a", 1, None], {"enum": ["a", 1, None]}),
        (int | None, {"type": ["integer", "null"]}),
        (Optional[str], {"type": ["string", "null"]}),  # noqa: UP045 - the typing spelling on purpose
        (Union[int, str, bool], {"type": ["integer", "string", "boolean"]}),  # noqa: UP007
        (
            int | list[str],
            {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "string"}}]},
        ),
        (Literal["a"] | None, {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}]}),
        (Any, {}),
        (object, {}),
        (JsonValue, {}),
        (list[JsonValue], {"type": "array", "items": {}}),
        (Any | None, {}),
        (UserId, {"type": "string"}),
        (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
        (
            Annotated[int, {"minimum": 0}, "count"],
            {"type": "integer", "minimum": 0, "description": "count"},
        ),
        (Color, {"title": "Color", "type": "string", "enum": ["red", "blue"]}),
        (Level, {"title": "Level", "type": "integer", "enum": [1, 2]}),
        (Mixed, {"title": "Mixed", "enum": ["a", 1]}),
    ],
)
def test_annotation_maps_to_schema(annotation: Any, schema: dict[str, Any]) -> None:
    assert _prop(annotation) == schema


def test_typeddict_is_a_closed_object_with_required_keys_in_order() -> None:
    async def search(query: Query) -> None:
        return None

    assert _params(search)["properties"]["query"] == {
        "title": "Query",
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "options": {
                "title": "Options",
                "type": "object",
                "description": "Search options.",
                "properties": {
                    "limit": {"type": "integer", "description": "at most this many hits."},
                    "exact": {"type": "boolean", "description": "match whole words only."},
                },
                "additionalProperties": False,
            },
            "near": {
                "anyOf": [
                    {
                        "title": "Point",
                        "type": "object",
                        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                        "required": ["x", "y"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ]
            },
        },
        # NotRequired written as a string annotation still counts (3.11's
        # __required_keys__ gets this wrong under ``from __future__ import annotations``).
        "required": ["text"],
        "additionalProperties": False,
    }


def test_recursive_typeddict_goes_to_defs() -> None:
    async def grow(tree: Tree) -> Tree:
        return tree

    definition = define_tool(grow)
    tree_schema = {
        "title": "Tree",
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        },
        "required": ["label", "children"],
        "additionalProperties": False,
    }
    assert definition.parameters["properties"] == {"tree": {"$ref": "#/$defs/Tree"}}
    assert definition.parameters["$defs"] == {"Tree": tree_schema}
    assert definition.output.schema == {"$ref": "#/$defs/Tree", "$defs": {"Tree": tree_schema}}
    validator = jsonschema.Draft202012Validator(dict(definition.parameters))
    assert validator.is_valid(
        {"tree": {"label": "a", "children": [{"label": "b", "children": []}]}}
    )
    assert not validator.is_valid(
        {"tree": {"label": "a", "children": [{"label": 1, "children": []}]}}
    )


def test_mutually_recursive_typeddicts_share_one_def() -> None:
    async def bounce(ping: Ping, pong: Pong) -> None:
        return None

    params = _params(bounce)
    assert list(params["$defs"]) == ["Ping"]
    assert params["properties"]["ping"] == {"$ref": "#/$defs/Ping"}
    # Pong is not itself on a cycle root, so it is inlined around the reference.
    assert params["properties"]["pong"]["properties"]["back"] == {"$ref": "#/$defs/Ping"}
    validator = jsonschema.Draft202012Validator(params)
    assert validator.is_valid({"ping": {"next": {"back": {}}}, "pong": {}})
    assert not validator.is_valid({"ping": {"next": {"back": {"next": {"back": 3}}}}, "pong": {}})


def test_output_schema_from_return_annotation_and_returns_section() -> None:
    async def nothing() -> None:
        """Do nothing.

        Returns:
            Always null.
        """

    async def listing() -> list[str]:
        return []

    assert define_tool(nothing).output.schema == {"type": "null", "description": "Always null."}
    assert define_tool(listing).output.schema == {"type": "array", "items": {"type": "string"}}


def test_output_schema_argument_overrides_the_annotation() -> None:
    async def raw() -> bytes:
        return b""

    definition = define_tool(raw, output_schema={"type": "string"})
    assert definition.output.schema == {"type": "string"}


# --------------------------------------------------------------------------- root schema


def test_root_schema_order_required_and_defaults() -> None:
    async def tool(
        b: str,
        a: int,
        c: float = 1.5,
        d: list[int] | None = None,
        e: Color = Color.BLUE,
        f: Any = (1, 2),
        g: int = "ten",  # type: ignore[assignment]
    ) -> None:
        return None

    params = _params(tool)
    assert list(params) == ["type", "properties", "required", "additionalProperties"]
    assert list(params["properties"]) == ["b", "a", "c", "d", "e", "f", "g"]
    assert params["required"] == ["b", "a"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["c"]["default"] == 1.5
    assert props["d"]["default"] is None
    assert props["e"]["default"] == "blue"  # the enum member is shown as its value
    assert "default" not in props["f"]  # a tuple is not lossless JSON
    assert "default" not in props["g"]  # "ten" breaks {"type": "integer"}; not advertised


def test_no_parameters_gives_an_empty_closed_object_without_required() -> None:
    async def now() -> str:
        return "t"

    assert _params(now) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_schemas_are_deterministic() -> None:
    async def search(query: Query, tree: Tree | None = None) -> SearchResult:
        raise NotImplementedError

    first, second = define_tool(search), define_tool(search)
    assert first.parameters == second.parameters
    assert first.output.schema == second.output.schema
    assert repr(first.parameters) == repr(second.parameters)  # key order too


# --------------------------------------------------------------------------- docstrings


def test_google_docstring_description_and_parameter_texts() -> None:
    async def lookup(city: str, days: int = 1, units: str = "metric") -> str:
        """Look up the weather forecast.

        Uses the national service; results are cached
        for ten minutes.

        Args:
            city: the city name, e.g. "Oslo". Ambiguous names
                pick the most populous match.
            days (int): how many days ahead.

        Returns:
            The forecast text.

        Raises:
            ValueError: never, really.
        """
        return ""

    definition = define_tool(lookup)
    assert definition.description == (
        "Look up the weather forecast.\n\nUses the national service; results are cached\nfor ten minutes."
    )
    props = definition.parameters["properties"]
    assert (
        props["city"]["description"]
        == 'the city name, e.g. "Oslo". Ambiguous names pick the most populous match.'
    )
    assert props["days"]["description"] == "how many days ahead."
    assert "description" not in props["units"]
    assert definition.output.schema["description"] == "The forecast text."


def test_docstring_without_args_and_missing_docstring() -> None:
    async def simple(x: int) -> int:
        """Double a number."""
        return 2 * x

    async def bare(x: int) -> int:
        return x

    assert define_tool(simple).description == "Double a number."
    assert "description" not in define_tool(simple).parameters["properties"]["x"]
    assert define_tool(bare).description == ""


def test_extra_sections_examples_dropped_notes_kept() -> None:
    doc = parse_docstring(
        """Summary.

        Example:
            >>> tool(1)

        Note:
            Slow on large inputs.

        Args:
            a: first.
        Trailing paragraph after the sections.
        """
    )
    assert (
        doc.description
        == "Summary.\n\nNote:\n    Slow on large inputs.\n\nTrailing paragraph after the sections."
    )
    assert doc.params == {"a": "first."}
    assert ">>>" not in doc.description


def test_rest_and_numpy_docstrings() -> None:
    rest = parse_docstring(
        """Fetch a page.

        :param url: the address
            to fetch.
        :param int retries: how often to retry.
        :type url: str
        :returns: the body.
        """
    )
    assert rest.description == "Fetch a page."
    assert rest.params == {"url": "the address to fetch.", "retries": "how often to retry."}
    assert rest.returns == "the body."

    numpy = parse_docstring(
        """Fetch a page.

        Parameters
        ----------
        url : str
            The address
            to fetch.
        a, b : int
            Two numbers.

        Notes
        -----
        Slow.

        Returns
        -------
        str
            The body.
        """
    )
    assert numpy.params == {
        "url": "The address to fetch.",
        "a": "Two numbers.",
        "b": "Two numbers.",
    }
    assert numpy.description == "Fetch a page.\n\nNotes\n-----\nSlow."
    assert numpy.returns == "The body."


def test_explicit_description_and_annotated_description_win() -> None:
    async def tool(x: Annotated[int, "from the annotation"], y: int) -> None:
        """Docstring summary.

        Args:
            x: from the docstring.
            y: why.
        """

    definition = define_tool(tool, description="Explicit.")
    assert definition.description == "Explicit."
    assert definition.parameters["properties"]["x"]["description"] == "from the annotation"
    assert definition.parameters["properties"]["y"]["description"] == "why."


def test_docstring_documenting_an_unknown_parameter_is_rejected() -> None:
    async def stale(new_name: str) -> None:
        """Stale docs.

        Args:
            old_name: renamed long ago.
        """

    assert "'old_name'" in _problem(stale)


# --------------------------------------------------------------------------- registration errors


async def _uses_bytes(data: bytes) -> None: ...
async def _uses_set(tags: set[str]) -> None: ...
async def _uses_tuple(pair: tuple[int, int]) -> None: ...
async def _uses_class(when: threading.Thread) -> None: ...
async def _uses_nested_bytes(blobs: list[dict[str, bytes]]) -> None: ...
async def _uses_int_keys(table: dict[int, str]) -> None: ...
async def _uses_flag(perm: Perm) -> None: ...
async def _uses_typevar(item: T) -> None: ...
async def _uses_type_checking_only(amount: Decimal) -> None: ...
async def _uses_ctx_in_list(ctxs: list[ToolRunContext]) -> None: ...
async def _unannotated(thing, other: int) -> None: ...  # type: ignore[no-untyped-def]
async def _star_args(*items: int) -> None: ...
async def _star_kwargs(**options: int) -> None: ...
async def _positional_only(a: int, /, b: int) -> None: ...
async def _no_return(a: int):  # type: ignore[no-untyped-def]
    return a


class _Plain:
    pass


async def _uses_bad_typeddict_key(point: _BadKeys) -> None: ...


class _BadKeys(TypedDict):
    ok: int
    bad: set[int]


@pytest.mark.parametrize(
    ("fn", "needles"),
    [
        (_uses_bytes, ["parameter 'data'", "bytes", "use str"]),
        (_uses_set, ["parameter 'tags'", "no sets", "list"]),
        (_uses_tuple, ["parameter 'pair'", "no tuples", "list"]),
        (_uses_class, ["parameter 'when'", "Thread", "no JSON Schema"]),
        (_uses_nested_bytes, ["parameter 'blobs' (list item) (dict value)", "bytes"]),
        (_uses_int_keys, ["parameter 'table'", "keys are strings"]),
        (_uses_flag, ["parameter 'perm'", "Flag"]),
        (_uses_typevar, ["parameter 'item'", "generic"]),
        (_uses_type_checking_only, ["parameter 'amount'", "'Decimal'", "TYPE_CHECKING"]),
        (_uses_ctx_in_list, ["parameter 'ctxs'", "injected"]),
        (_uses_bad_typeddict_key, ["parameter 'point' (key 'bad' of _BadKeys)", "no sets"]),
        (_unannotated, ["parameter 'thing'", "no type annotation"]),
        (_star_args, ["parameter 'items'", "*items", "variadic"]),
        (_star_kwargs, ["parameter 'options'", "**options", "variadic"]),
        (_positional_only, ["parameter 'a'", "positional-only"]),
        (_no_return, ["return annotation is missing", "output_schema"]),
    ],
)
def test_unsupported_signatures_fail_at_registration(fn: Any, needles: list[str]) -> None:
    problem = _problem(fn)
    for needle in needles:
        assert needle in problem


def test_registration_error_names_the_tool() -> None:
    with pytest.raises(RegistrationError) as caught:
        define_tool(_uses_bytes, name="upload")
    assert caught.value.tool_name == "upload"
    assert str(caught.value).startswith("cannot register tool 'upload': parameter 'data'")


def test_non_functions_and_generators_are_rejected() -> None:
    def numbers() -> Any:
        yield 1

    assert "generator" in _problem(numbers)
    assert "expected a function" in _problem(_Plain)


def test_bad_return_annotation_is_rejected() -> None:
    async def blob() -> bytes:
        return b""

    assert (
        _problem(blob)
        == "the return annotation: bytes is not JSON; use str (for example base64 text)"
    )


async def _increment(n: int) -> int:
    return n + 1


@pytest.mark.anyio
async def test_sync_function_returning_an_awaitable_is_awaited() -> None:
    registry = ToolRegistry()

    @registry.tool
    @functools.wraps(_increment)
    def wrapped(*args: Any, **kwargs: Any) -> Any:  # a decorator unaware of async
        return _increment(*args, **kwargs)

    @registry.tool
    def deferred(n: int) -> Awaitable[int]:
        return _increment(n)

    definition = registry.get("deferred")
    assert definition is not None and definition.output.schema == {"type": "integer"}
    for name in ("_increment", "deferred"):
        result = await _run(registry, name, {"n": 1})
        assert isinstance(result, ToolSuccess), name
        assert result.value == 2


def test_literal_of_a_non_json_value_is_rejected() -> None:
    async def tool(shade: Literal[Color.RED]) -> None: ...

    assert "literal" in _problem(tool)


def test_annotations_without_future_import_resolve_too() -> None:
    namespace: dict[str, Any] = {}
    source = (
        "from typing import Optional\n"
        "from registry import JsonValue\n"
        "async def legacy(a: Optional[int], b: 'list[str]', c: JsonValue = None) -> 'dict[str, int]':\n"
        "    return {}\n"
    )
    exec(compile(source, "<legacy>", "exec"), namespace)
    definition = define_tool(namespace["legacy"])
    assert definition.parameters["properties"] == {
        "a": {"type": ["integer", "null"]},
        "b": {"type": "array", "items": {"type": "string"}},
        "c": {"default": None},
    }
    assert definition.output.schema == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }


@pytest.mark.anyio
async def test_callable_object_uses_its_call_signature() -> None:
    class Adder:
        """Add a constant.

        Args:
            step: added to every input (a constructor argument, not a tool one).
        """

        def __init__(self, step: int) -> None:
            self.step = step

        async def __call__(self, x: int) -> int:
            return x + self.step

    registry = ToolRegistry()
    registry.tool(Adder(5), name="add_five")
    definition = registry.get("add_five")
    assert definition is not None
    assert definition.parameters["properties"] == {"x": {"type": "integer"}}
    assert definition.description == "Add a constant."
    result = await _run(registry, "add_five", {"x": 1})
    assert isinstance(result, ToolSuccess) and result.value == 6


# --------------------------------------------------------------------------- calling


@pytest.mark.anyio
async def test_context_is_injected_under_any_name_and_not_in_schema() -> None:
    seen: list[tuple[str, str]] = []
    registry = ToolRegistry()

    @registry.tool
    async def who(text: str, runtime: ToolRunContext) -> str:
        seen.append((runtime.call_id, runtime.name))
        return text.upper()

    assert registry.schemas()[0]["parameters"]["properties"] == {"text": {"type": "string"}}
    result = await _run(registry, "who", {"text": "hi"})
    assert isinstance(result, ToolSuccess)
    assert result.value == "HI"
    assert seen == [("c1", "who")]


@pytest.mark.anyio
async def test_arguments_stay_json_shaped_and_defaults_apply() -> None:
    received: list[Any] = []
    registry = ToolRegistry()

    @registry.tool
    async def collect(points: list[Point], scale: float = 2.0, note: str | None = None) -> int:
        received.append((points, scale, note))
        return len(points)

    result = await _run(registry, "collect", {"points": [{"x": 1, "y": 2}]})
    assert isinstance(result, ToolSuccess)
    assert result.value == 1
    assert received == [([{"x": 1, "y": 2}], 2.0, None)]
    assert type(received[0][0]) is list and type(received[0][0][0]) is dict


@pytest.mark.anyio
async def test_integral_floats_become_ints_where_an_int_is_promised() -> None:
    received: list[Any] = []
    registry = ToolRegistry()

    @registry.tool
    async def count(n: int, maybe: int | None, either: float | int, points: list[Point]) -> None:
        received.append((n, maybe, either, points))

    arguments = {"n": 2.0, "maybe": 3.0, "either": 4.0, "points": [{"x": 1.0, "y": 2}]}
    result = await _run(registry, "count", arguments)
    assert isinstance(result, ToolSuccess), result
    [(n, maybe, either, points)] = received
    assert (type(n), type(maybe), type(either)) == (int, int, float)
    assert (n, maybe, either) == (2, 3, 4.0)
    assert points == [{"x": 1, "y": 2}] and type(points[0]["x"]) is int


@pytest.mark.anyio
async def test_enums_are_members_inside_and_values_outside() -> None:
    received: list[Any] = []
    registry = ToolRegistry()

    @registry.tool
    async def paint(
        shade: Color, levels: list[Level], maybe: Color | None, art: Painted
    ) -> Painted:
        received.append((shade, levels, maybe, art))
        return {"shade": Color.BLUE, "history": [{"shade": shade}]}

    arguments = {
        "shade": "red",
        "levels": [2, 1],
        "maybe": None,
        "art": {"shade": "blue", "history": [{"shade": "red"}]},
    }
    result = await _run(registry, "paint", arguments)
    assert isinstance(result, ToolSuccess), result
    assert received == [
        (
            Color.RED,
            [Level.HIGH, Level.LOW],
            None,
            {"shade": Color.BLUE, "history": [{"shade": Color.RED}]},
        )
    ]
    assert result.value == {"shade": "blue", "history": [{"shade": "red"}]}

    result = await _run(registry, "paint", {**arguments, "maybe": "blue"})
    assert isinstance(result, ToolSuccess)
    assert received[-1][2] is Color.BLUE


@pytest.mark.anyio
async def test_sync_tool_runs_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        threads.append(threading.get_ident())
        return a + b

    result = await _run(registry, "add", {"a": 2, "b": 3})
    assert isinstance(result, ToolSuccess)
    assert result.value == 5
    assert len(threads) == 1 and threads[0] != loop_thread


@pytest.mark.anyio
async def test_cancelled_sync_tool_is_waited_for_not_abandoned() -> None:
    started, proceed = threading.Event(), threading.Event()
    finished: list[bool] = []
    results: list[Any] = []
    registry = ToolRegistry()
    signal = AbortSignal()

    @registry.tool
    def slow() -> str:
        started.set()
        proceed.wait(timeout=10)  # bounded: a regression fails instead of hanging
        finished.append(True)
        return "done"

    async def call() -> None:
        results.append(await _run(registry, "slow", {}, signal=signal))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.to_thread.run_sync(started.wait)
        signal.abort()
        await anyio.wait_all_tasks_blocked()
        assert results == []  # the call is still waiting for its thread
        proceed.set()
    assert finished == [True]
    assert isinstance(results[0], ToolFailure)
    assert results[0].error.info is not None and results[0].error.info.code == ABORTED


@pytest.mark.anyio
async def test_wrong_argument_type_is_invalid_args() -> None:
    calls: list[int] = []
    registry = ToolRegistry()

    @registry.tool
    async def square(n: int) -> int:
        calls.append(n)
        return n * n

    for bad in ({"n": "3"}, {}, {"n": 3, "extra": 1}):
        result = await _run(registry, "square", bad)
        assert isinstance(result, ToolFailure)
        assert result.error.info is not None and result.error.info.code == INVALID_ARGS
    assert calls == []


@pytest.mark.anyio
async def test_return_value_breaking_the_annotation_is_invalid_tool_output() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def liar(n: int) -> int:
        return str(n)  # type: ignore[return-value]

    @registry.tool
    async def sloppy() -> Point:
        return {"x": 1, "y": 2, "z": 3}  # type: ignore[typeddict-unknown-key]

    for name, arguments in (("liar", {"n": 1}), ("sloppy", {})):
        result = await _run(registry, name, arguments)
        assert isinstance(result, ToolFailure), name
        assert result.error.info is not None and result.error.info.code == INVALID_TOOL_OUTPUT


@pytest.mark.anyio
async def test_realistic_typeddict_returning_tool() -> None:
    registry = ToolRegistry()
    files = {"a.py": ["import os", "x = 1"], "b.py": ["y = os.sep"]}

    @registry.tool(concurrency_safe=True, timeout=5.0)
    async def grep(pattern: str, max_hits: int = 10) -> SearchResult:
        """Search the workspace for lines containing a text.

        Args:
            pattern: literal text to look for.
            max_hits: stop after this many matches.
        """
        hits: list[Hit] = [
            {"path": path, "line": number, "preview": text}
            for path, lines in sorted(files.items())
            for number, text in enumerate(lines, 1)
            if pattern in text
        ]
        return {"hits": hits[:max_hits], "truncated": len(hits) > max_hits}

    [schema] = registry.schemas(with_output=True)
    assert schema["description"] == "Search the workspace for lines containing a text."
    assert schema["parameters"]["required"] == ["pattern"]
    assert schema["output"]["properties"]["hits"]["items"]["required"] == [
        "path",
        "line",
        "preview",
    ]
    assert (
        registry.execution_mode(ToolCall(call_id="m", name="grep", arguments={"pattern": "os"}))
        == "parallel"
    )

    result = await _run(registry, "grep", {"pattern": "os", "max_hits": 1})
    assert isinstance(result, ToolSuccess)
    assert result.value == {
        "hits": [{"path": "a.py", "line": 1, "preview": "import os"}],
        "truncated": True,
    }
    assert '"truncated": true' in result.content[0]["text"]


# --------------------------------------------------------------------------- the decorator


def test_bare_decorator_registers_and_returns_the_function() -> None:
    registry = ToolRegistry()

    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    assert registry.tool(echo) is echo
    definition = registry.get("echo")
    assert isinstance(definition, ToolDefinition)
    assert definition.description == "Echo the text."
    assert definition.concurrency_safe is False and definition.timeout is None


@pytest.mark.anyio
async def test_decorator_with_arguments_passes_them_through() -> None:
    registry = ToolRegistry()

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": f"{args['text']} -> {value}"}]

    @registry.tool(
        name="shout",
        description="Shout it.",
        concurrency_safe=True,
        timeout=3.0,
        scope="agent",
        render=render,
    )
    async def loud(text: str) -> str:
        return text.upper()

    assert registry.get("shout") is None  # only the scope sees it
    definition = registry.get("shout", scope="agent")
    assert definition is not None
    assert (definition.description, definition.concurrency_safe, definition.timeout) == (
        "Shout it.",
        True,
        3.0,
    )
    result = await _run(registry, "shout", {"text": "hey"}, scope="agent")
    assert isinstance(result, ToolSuccess)
    assert result.content == [{"type": "text", "text": "hey -> HEY"}]


def test_decorator_with_output_schema_and_duplicate_name() -> None:
    registry = ToolRegistry()

    @registry.tool(output_schema={"type": "string", "maxLength": 3})
    async def short():  # type: ignore[no-untyped-def]
        return "abc"

    definition = registry.get("short")
    assert definition is not None and definition.output.schema == {"type": "string", "maxLength": 3}
    with pytest.raises(RegistrationError, match="already registered"):
        registry.tool(short, output_schema={"type": "string"})
