"""Tools written for LangChain, pydantic-ai and FastMCP, registered into a ToolRegistry as they are."""

from __future__ import annotations

import base64
import datetime
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import pytest
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp_types import ToolAnnotations
from pydantic import AfterValidator, BaseModel, Field
from pydantic_ai import (
    BinaryContent,
    CallDeferred,
    ModelRetry,
    RunContext,
    Tool,
    ToolFailed,
    ToolReturn,
)
from pydantic_ai.toolsets import FunctionToolset

from ptc import CodeExecutor
from ptc.adapters import (
    MODEL_RETRY,
    TOOL_EXCEPTION,
    TOOL_FAILED,
    TOOL_NEEDS_FRAMEWORK,
    register_fastmcp_tools,
    register_langchain_tools,
    register_pydantic_ai_tools,
)
from registry import (
    APPROVAL_UNAVAILABLE,
    INVALID_ARGS,
    MCP_TOOL_ERROR,
    TOOL_TIMEOUT,
    RegistrationError,
    ToolCall,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolSuccess,
)
from runtime import Limits
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
PNG_B64 = base64.b64encode(PNG).decode()


async def call(registry: ToolRegistry, name: str, arguments: Any = None) -> ToolResult:
    return await registry.execute(ToolCall(call_id="c1", name=name, arguments=arguments or {}))


def code_of(result: ToolResult) -> tuple[str | None, str]:
    """(code, message) of a failure."""
    assert isinstance(result, ToolFailure), result
    info = result.error.info
    return (None if info is None else info.code), result.error.message


async def run(registry: ToolRegistry, code: str) -> ToolResult:
    async with CodeExecutor(
        registry, runtime=InProcessRuntime(limits=Limits(timeout=5))
    ) as executor:
        return await executor.run_code(code, "test")


def schema_of(registry: ToolRegistry, name: str) -> dict[str, Any]:
    [schema] = [s for s in registry.schemas(with_output=True) if s["name"] == name]
    return schema


# --------------------------------------------------------------------------- LangChain


class Forecast(BaseModel):
    city: str
    high: float
    when: datetime.date


@tool
def forecast(city: str, days: int = 1) -> Forecast:
    """The forecast for a city, ``days`` from now."""
    if city == "Atlantis":
        raise ToolException(f"no forecast for {city}")
    if city == "":
        raise ValueError("a city has a name")
    return Forecast(city=city, high=20.5 + days, when=datetime.date(2026, 1, days))


@tool
async def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"


class LookupArgs(BaseModel):
    key: Annotated[str, AfterValidator(lambda v: v if v.islower() else _bad_key())]


def _bad_key() -> str:
    raise ValueError("keys are lower case")


class Lookup(BaseTool):
    """A tool written as a BaseTool subclass, sync and async."""

    name: str = "lookup"
    description: str = "Look a key up."
    args_schema: type[BaseModel] = LookupArgs
    ran_in: list[str] = Field(default_factory=list)

    def _run(self, key: str) -> dict[str, Any]:
        self.ran_in.append("sync")
        return {"key": key, "found": True}

    async def _arun(self, key: str) -> dict[str, Any]:
        self.ran_in.append("async")
        return {"key": key, "found": key != "missing"}


async def test_langchain_tools_keep_their_name_description_and_schemas() -> None:
    registry = ToolRegistry()
    lookup = Lookup()
    register_langchain_tools(registry, [forecast, shout, lookup])
    for lc_tool in (forecast, shout, lookup):
        function = convert_to_openai_tool(lc_tool)["function"]
        schema = schema_of(registry, function["name"])
        assert schema["description"] == function["description"]
        assert schema["parameters"] == function["parameters"]
    # The return annotation is the output schema (any JSON without one).
    assert schema_of(registry, "forecast")["output"] == Forecast.model_json_schema(
        mode="serialization"
    )
    assert schema_of(registry, "shout")["output"] == {"type": "string"}
    assert schema_of(registry, "lookup")["output"] == {
        "type": "object",
        "additionalProperties": True,
    }
    assert [d.concurrency_safe for d in registry.definitions()] == [False, False, False]


async def test_a_program_calls_langchain_tools_sync_and_async() -> None:
    registry = ToolRegistry()
    lookup = Lookup()
    register_langchain_tools(registry, [forecast, shout, lookup], concurrency_safe=True)
    threads: list[str] = []
    registry.on_result(lambda e, r: threads.append(threading.current_thread().name))
    code = (
        "import asyncio\n"
        "f, s, k = await asyncio.gather(\n"
        "    tools.forecast({'city': 'Oslo', 'days': 2}),\n"
        "    tools.shout({'text': 'hi'}),\n"
        "    tools.lookup({'key': 'missing'}),\n"
        ")\n"
        "return [f, s, k]"
    )
    result = await run(registry, code)
    assert isinstance(result, ToolSuccess), result
    assert result.value["result"] == [
        {"city": "Oslo", "high": 22.5, "when": "2026-01-02"},
        "HI!",
        {"key": "missing", "found": False},
    ]
    assert lookup.ran_in == ["async"]  # a tool with an async implementation runs it


async def test_a_sync_only_langchain_tool_runs_in_a_worker_thread() -> None:
    seen: list[str] = []

    def where() -> str:
        """Name the thread."""
        seen.append(threading.current_thread().name)
        return "ok"

    registry = ToolRegistry()
    register_langchain_tools(registry, [StructuredTool.from_function(where)])
    assert isinstance(await call(registry, "where"), ToolSuccess)
    assert seen and seen[0] != threading.current_thread().name


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (False, "no forecast for Atlantis"),
        (True, "no forecast for Atlantis"),
        ("Try another city.", "Try another city."),
        (lambda exc: f"Sorry: {exc}", "Sorry: no forecast for Atlantis"),
        (lambda exc: [{"type": "text", "text": "in"}, "blocks"], "in\nblocks"),
    ],
)
async def test_a_tool_exception_is_a_failure_with_the_text_its_author_gave(
    handler: Any, expected: str
) -> None:
    registry = ToolRegistry()
    # LangChain itself would return a handled error as the tool's output: here it fails.
    register_langchain_tools(registry, [forecast.model_copy(update={"handle_tool_error": handler})])
    result = await call(registry, "forecast", {"city": "Atlantis"})
    assert code_of(result) == (TOOL_EXCEPTION, expected)


async def test_langchain_validation_and_other_errors() -> None:
    registry = ToolRegistry()
    register_langchain_tools(registry, [forecast, Lookup()])
    # A rule the JSON Schema cannot say: the tool's own pydantic validation rejects it.
    assert code_of(await call(registry, "lookup", {"key": "UPPER"})) == (
        INVALID_ARGS,
        "invalid arguments for lookup: key: Value error, keys are lower case",
    )
    strict = ToolRegistry()
    register_langchain_tools(strict, [Lookup(handle_validation_error="Use a lower-case key.")])
    assert code_of(await call(strict, "lookup", {"key": "UPPER"})) == (
        INVALID_ARGS,
        "Use a lower-case key.",
    )
    # Any other exception is a failure as a registry tool's is, without a code.
    assert code_of(await call(registry, "forecast", {"city": ""})) == (
        None,
        "ValueError: a city has a name",
    )


async def test_langchain_content_blocks_become_the_results_content() -> None:
    @tool
    def chart() -> list[dict[str, Any]]:
        """A chart."""
        return [
            {"type": "text", "text": "the chart"},
            {"type": "image", "base64": PNG_B64, "mime_type": "image/png"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        ]

    registry = ToolRegistry()
    register_langchain_tools(registry, [chart])
    result = await call(registry, "chart")
    image = {"type": "image", "data": PNG_B64, "mimeType": "image/png"}
    expected = [{"type": "text", "text": "the chart"}, image, image]
    assert isinstance(result, ToolSuccess)
    assert result.content == expected
    assert result.value == expected


async def test_langchain_registration_is_all_or_nothing_and_one_disposer_undoes_it() -> None:
    registry = ToolRegistry()
    register_langchain_tools(registry, [shout])
    with pytest.raises(RegistrationError, match="shout"):
        register_langchain_tools(registry, [forecast, shout])
    assert [d.name for d in registry.definitions()] == ["shout"]
    with pytest.raises(TypeError, match="LangChain tools"):
        register_langchain_tools(registry, [lambda: None])  # type: ignore[list-item]
    dispose = register_langchain_tools(registry, [forecast, Lookup()], scope="weather")
    assert {d.name for d in registry.definitions("weather")} == {"forecast", "lookup", "shout"}
    dispose()
    assert [d.name for d in registry.definitions("weather")] == ["shout"]


# --------------------------------------------------------------------------- pydantic-ai


@dataclass
class Deps:
    today: datetime.date


class Meeting(BaseModel):
    title: str
    start: datetime.datetime


def make_toolset() -> FunctionToolset[Deps]:
    toolset: FunctionToolset[Deps] = FunctionToolset()

    @toolset.tool
    def days_until(ctx: RunContext[Deps], day: datetime.date) -> int:
        """Days from today until ``day``."""
        assert ctx.tool_name == "days_until"
        return (day - ctx.deps.today).days

    @toolset.tool_plain
    async def book(meeting: Meeting) -> Meeting:
        """Book a meeting."""
        if not meeting.title:
            raise ModelRetry("a meeting needs a title")
        if meeting.title == "never":
            raise ToolFailed("the calendar is read-only")
        if meeting.title == "later":
            raise CallDeferred()
        return meeting

    @toolset.tool_plain(sequential=True)
    def reset() -> str:
        """Clear the calendar (runs alone)."""
        return "cleared"

    return toolset


async def test_pydantic_ai_tools_keep_their_definitions() -> None:
    toolset = make_toolset()
    registry = ToolRegistry()
    register_pydantic_ai_tools(registry, toolset, deps=Deps(datetime.date(2026, 1, 1)))
    for name, pa_tool in toolset.tools.items():
        schema = schema_of(registry, name)
        definition = pa_tool.tool_def
        assert schema["description"] == definition.description
        assert schema["parameters"] == definition.parameters_json_schema
        assert schema["output"] == pa_tool.function_schema.return_schema
    assert schema_of(registry, "days_until")["output"] == {"type": "integer"}
    # pydantic-ai runs tools in parallel unless they are sequential.
    assert {d.name: d.concurrency_safe for d in registry.definitions()} == {
        "book": True,
        "days_until": True,
        "reset": False,
    }


async def test_a_program_calls_pydantic_ai_tools_with_typed_arguments() -> None:
    registry = ToolRegistry()
    register_pydantic_ai_tools(registry, make_toolset(), deps=Deps(datetime.date(2026, 1, 1)))
    code = (
        "days = await tools.days_until({'day': '2026-03-01'})\n"
        "meeting = await tools.book({'title': 'plan', 'start': '2026-03-01T09:30:00Z'})\n"
        "return [days, meeting, await tools.reset({})]"
    )
    result = await run(registry, code)
    assert isinstance(result, ToolSuccess), result
    assert result.value["result"] == [
        59,
        {"title": "plan", "start": "2026-03-01T09:30:00Z"},
        "cleared",
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"title": "", "start": "2026-03-01T09:30:00Z"}, (MODEL_RETRY, "a meeting needs a title")),
        (
            {"title": "never", "start": "2026-03-01T09:30:00Z"},
            (TOOL_FAILED, "the calendar is read-only"),
        ),
        (
            {"title": "later", "start": "2026-03-01T09:30:00Z"},
            (
                TOOL_NEEDS_FRAMEWORK,
                "book deferred the call, which only a pydantic-ai agent run can carry out",
            ),
        ),
    ],
)
async def test_pydantic_ai_errors_are_failures_with_stable_codes(
    arguments: dict[str, Any], expected: tuple[str, str]
) -> None:
    registry = ToolRegistry()
    register_pydantic_ai_tools(registry, make_toolset(), deps=Deps(datetime.date(2026, 1, 1)))
    assert code_of(await call(registry, "book", arguments)) == expected


async def test_a_program_reads_a_model_retry_as_a_tool_call_error_code() -> None:
    registry = ToolRegistry()
    register_pydantic_ai_tools(registry, make_toolset(), deps=Deps(datetime.date(2026, 1, 1)))
    code = (
        "try:\n"
        "    await tools.book({'title': '', 'start': '2026-03-01T09:30:00Z'})\n"
        "except ToolCallError as e:\n"
        "    return [e.code, e.message]"
    )
    result = await run(registry, code)
    assert isinstance(result, ToolSuccess)
    assert result.value["result"] == [MODEL_RETRY, "a meeting needs a title"]


async def test_the_tools_own_validation_turns_json_into_typed_values() -> None:
    registry = ToolRegistry()
    register_pydantic_ai_tools(registry, make_toolset(), deps=Deps(datetime.date(2026, 1, 1)))
    code, message = code_of(await call(registry, "days_until", {"day": "not a date"}))
    assert code == INVALID_ARGS
    assert message.startswith("invalid arguments for days_until: day: Input should be a valid date")


async def test_pydantic_ai_tools_functions_and_args_validators() -> None:
    def double(n: int) -> int:
        """Twice n."""
        return 2 * n

    def positive(ctx: RunContext[None], n: int) -> None:
        if n < 0:
            raise ModelRetry("n must be positive")

    def context(ctx: RunContext[str]) -> dict[str, Any]:
        """What the context holds."""
        return {
            "deps": ctx.deps,
            "tool_name": ctx.tool_name,
            "tool_call_id": ctx.tool_call_id,
            "model": ctx.model.model_name,
        }

    registry = ToolRegistry()
    register_pydantic_ai_tools(
        registry, [double, Tool(double, name="checked", args_validator=positive), context], deps="d"
    )
    assert (await call(registry, "double", {"n": 4})).value == 8  # type: ignore[union-attr]
    assert code_of(await call(registry, "checked", {"n": -1})) == (
        MODEL_RETRY,
        "n must be positive",
    )
    assert (await call(registry, "context")).value == {  # type: ignore[union-attr]
        "deps": "d",
        "tool_name": "context",
        "tool_call_id": "c1",
        "model": "ptc-registry",
    }


async def test_a_pydantic_ai_timeout_is_the_registrys() -> None:
    async def slow() -> str:
        """Never done in time."""
        await anyio.sleep(30)
        return "late"

    registry = ToolRegistry()
    register_pydantic_ai_tools(registry, [Tool(slow, timeout=0.05)])
    assert registry.definitions()[0].timeout == 0.05
    with anyio.fail_after(5):
        code, _ = code_of(await call(registry, "slow"))
    assert code == TOOL_TIMEOUT


async def test_a_tool_that_requires_approval_asks_the_registry_first() -> None:
    def wipe() -> str:
        """Delete everything."""
        return "wiped"

    asked: list[str] = []

    async def approve(execution: ToolExecution, reason: str | None) -> bool:
        asked.append(f"{execution.name}: {reason}")
        return True

    denied = ToolRegistry()
    register_pydantic_ai_tools(
        denied, [Tool(wipe, requires_approval=True), Tool(wipe, name="free")]
    )
    assert code_of(await call(denied, "wipe"))[0] == APPROVAL_UNAVAILABLE
    assert (await call(denied, "free")).value == "wiped"  # type: ignore[union-attr]

    allowed = ToolRegistry(approval=approve)
    dispose = register_pydantic_ai_tools(allowed, [Tool(wipe, requires_approval=True)])
    assert (await call(allowed, "wipe")).value == "wiped"  # type: ignore[union-attr]
    assert asked == ["wipe: wipe requires approval"]
    dispose()  # the tool and its approval rule both go
    assert allowed.definitions() == [] and allowed.policy(None).pre == ()


async def test_a_tool_return_and_binary_content() -> None:
    def report() -> ToolReturn:
        """A value and a note for the model."""
        return ToolReturn(return_value={"rows": 3}, content="3 rows were read")

    def picture() -> BinaryContent:
        """An image."""
        return BinaryContent(data=PNG, media_type="image/png")

    registry = ToolRegistry()
    register_pydantic_ai_tools(registry, [report, picture])
    reported = await call(registry, "report")
    assert isinstance(reported, ToolSuccess)
    assert (reported.value, reported.additional_contexts) == ({"rows": 3}, ("3 rows were read",))
    pictured = await call(registry, "picture")
    image = {"type": "image", "data": PNG_B64, "mimeType": "image/png"}
    assert isinstance(pictured, ToolSuccess)
    assert (pictured.value, pictured.content) == (image, [image])


async def test_pydantic_ai_prepare_and_bad_items_are_refused() -> None:
    async def hide(ctx: RunContext[None], definition: Any) -> None:
        return None

    def hidden() -> str:
        """Seen only when prepare says so."""
        return "x"

    registry = ToolRegistry()
    with pytest.raises(RegistrationError, match="prepare"):
        register_pydantic_ai_tools(
            registry, [Tool(hidden, name="first"), Tool(hidden, prepare=hide)]
        )
    assert registry.definitions() == []  # all or nothing
    with pytest.raises(TypeError, match="FunctionToolset"):
        register_pydantic_ai_tools(registry, [42])  # type: ignore[list-item]


# --------------------------------------------------------------------------- FastMCP


class Note(BaseModel):
    id: int
    text: str


def make_server() -> MCPServer:
    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_note(id: int) -> Note:
        """Get a note by id."""
        if id == 0:
            raise McpToolError("there is no note 0")
        if id < 0:
            raise ValueError("ids are positive")
        return Note(id=id, text=f"note {id}")

    @server.tool()
    async def count_words(text: str, ctx: Context) -> int:
        """Count the words of a text, reporting progress."""
        words = text.split()
        await ctx.report_progress(len(words), len(words), "counted")
        return len(words)

    @server.tool()
    def half(n: Annotated[int, AfterValidator(lambda n: n if n % 2 == 0 else _odd())]) -> int:
        """Half of an even number."""
        return n // 2

    return server


def _odd() -> int:
    raise ValueError("n must be even")


async def test_fastmcp_tools_are_registered_as_the_server_lists_them() -> None:
    server = make_server()
    registry = ToolRegistry()
    register_fastmcp_tools(registry, server)
    listed = await server.list_tools()
    assert {s["name"] for s in registry.schemas()} == {t.name for t in listed}
    for mcp_tool in listed:
        schema = schema_of(registry, mcp_tool.name)
        assert schema["description"] == mcp_tool.description
        assert schema["parameters"] == mcp_tool.input_schema
        assert schema["output"] == mcp_tool.output_schema
    # A read-only tool may overlap with others, as for a connected server.
    assert {d.name: d.concurrency_safe for d in registry.definitions()} == {
        "count_words": False,
        "get_note": True,
        "half": False,
    }


async def test_a_program_calls_fastmcp_tools_and_reads_their_errors() -> None:
    registry = ToolRegistry()
    register_fastmcp_tools(registry, make_server(), namespace="notes")
    progress: list[tuple[str, float, float | None, str | None]] = []
    registry.on_progress(lambda e, p, t, m: progress.append((e.name, p, t, m)))
    code = (
        "out = [await tools.notes.get_note({'id': 7}), await tools.notes.count_words({'text': 'a b c'})]\n"
        "for args in ({'id': 0}, {'id': -1}):\n"
        "    try:\n"
        "        await tools.notes.get_note(args)\n"
        "    except ToolCallError as e:\n"
        "        out.append([e.code, e.message])\n"
        "return out"
    )
    result = await run(registry, code)
    assert isinstance(result, ToolSuccess), result
    assert result.value["result"] == [
        {"id": 7, "text": "note 7"},
        {"result": 3},
        [MCP_TOOL_ERROR, "Error executing tool get_note: there is no note 0"],
        [None, "ValueError: ids are positive"],
    ]
    assert progress == [("notes.count_words", 3, 3, "counted")]


async def test_fastmcp_validation_errors_are_invalid_args() -> None:
    registry = ToolRegistry()
    register_fastmcp_tools(registry, make_server())
    code, message = code_of(await call(registry, "half", {"n": 3}))
    assert code == INVALID_ARGS
    assert message == "invalid arguments for half: n: Value error, n must be even"
    assert (await call(registry, "half", {"n": 4})).value == {"result": 2}  # type: ignore[union-attr]


async def test_fastmcp_refuses_what_is_not_a_server() -> None:
    with pytest.raises(TypeError, match="MCPServer"):
        register_fastmcp_tools(ToolRegistry(), object())  # type: ignore[arg-type]


# --------------------------------------------------------------------------- together


@pytest.fixture
async def mixed() -> AsyncIterator[CodeExecutor]:
    """One registry with a tool of each framework."""
    registry = ToolRegistry()
    register_langchain_tools(registry, [shout])
    register_pydantic_ai_tools(registry, make_toolset(), deps=Deps(datetime.date(2026, 1, 1)))
    register_fastmcp_tools(registry, make_server(), namespace="notes")
    async with CodeExecutor(registry, runtime=InProcessRuntime()) as executor:
        yield executor


async def test_one_program_over_tools_of_all_three_frameworks(mixed: CodeExecutor) -> None:
    sdk = mixed.sdk_text()
    for declaration in ("async def shout", "async def days_until", "async def get_note"):
        assert declaration in sdk
    code = (
        "note = await tools.notes.get_note({'id': 2})\n"
        "days = await tools.days_until({'day': '2026-01-11'})\n"
        "return await tools.shout({'text': f\"{note['text']} in {days} days\"})"
    )
    result = await mixed.run_code(code, "test")
    assert isinstance(result, ToolSuccess), result
    assert result.value["result"] == "NOTE 2 IN 10 DAYS!"


def test_importing_the_register_functions_imports_no_framework() -> None:
    code = (
        "import sys\n"
        "from ptc.adapters import register_langchain_tools, register_pydantic_ai_tools\n"
        "from ptc.adapters import register_fastmcp_tools\n"
        "heavy = {'langchain_core', 'pydantic_ai', 'mcp', 'agents'}\n"
        "assert not heavy & {m.split('.')[0] for m in sys.modules}, sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
