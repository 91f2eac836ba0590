"""LangChain: ``run_code`` as a real ``StructuredTool``, invoked sync and async."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool

from ptc import (
    CODE_ONLY_RULE,
    BatchResult,
    CallResult,
    CodeExecutor,
    ExecutorConfigError,
)
from ptc.adapters import code_mode_langchain_tool
from ptc.adapters._langchain import _BACKGROUND, tool_output
from registry import (
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    UnknownScopeError,
)
from runtime import Limits
from runtime.testing import InProcessRuntime

ROOT = Path(__file__).resolve().parents[3]


def make_registry(threads: list[str]) -> ToolRegistry:
    """Two tools; ``where`` records the thread its body ran in."""
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool
    async def where() -> str:
        """Name the thread this call ran in."""
        threads.append(threading.current_thread().name)
        return threading.current_thread().name

    return registry


@pytest.fixture
def threads() -> list[str]:
    return []


@pytest.fixture
def registry(threads: list[str]) -> ToolRegistry:
    return make_registry(threads)


@pytest.fixture
def seen(registry: ToolRegistry) -> list[tuple[str, str]]:
    """(call id, tool name) of every call the registry settled, sub-calls included."""
    calls: list[tuple[str, str]] = []

    def record(execution: ToolExecution, result: ToolResult) -> None:
        calls.append((execution.call_id, execution.name))

    registry.on_result(record)
    return calls


@pytest.fixture
async def executor(registry: ToolRegistry) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(registry, runtime=InProcessRuntime(limits=Limits(timeout=5))) as ex:
        yield ex


def tool_call(args: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    """A model's tool call as LangChain passes it to a tool."""
    return {"type": "tool_call", "id": call_id, "name": "run_code", "args": args}


def program(code: str) -> dict[str, str]:
    return {"code": code, "description": "test"}


# --------------------------------------------------------------------------- the tool


@pytest.mark.anyio
async def test_the_tool_is_run_code_with_its_schema_and_the_sdk_in_its_description(
    executor: CodeExecutor,
) -> None:
    tool = code_mode_langchain_tool(executor)
    schema = executor.run_code_schema()
    assert isinstance(tool, StructuredTool)
    assert tool.name == "run_code"
    assert tool.args_schema == schema["parameters"]
    assert set(tool.args) == {"code", "description"}
    assert tool.response_format == "content_and_artifact"
    assert tool.description.startswith(schema["description"])
    assert CODE_ONLY_RULE in tool.description
    assert tool.description.endswith(executor.sdk_text())
    assert "async def add(self, args: AddArgs) -> AddResult:" in tool.description
    # What a chat model's bind_tools sends: the exact schema and the whole description.
    assert convert_to_openai_tool(tool) == {
        "type": "function",
        "function": {
            "name": "run_code",
            "description": tool.description,
            "parameters": schema["parameters"],
        },
    }


@pytest.mark.anyio
async def test_without_the_sdk_in_the_description_it_is_the_short_one(
    executor: CodeExecutor,
) -> None:
    tool = code_mode_langchain_tool(executor, sdk_in_description=False)
    assert tool.description == executor.run_code_schema()["description"]


@pytest.mark.anyio
async def test_both_mode_leaves_out_the_code_only_rule(registry: ToolRegistry) -> None:
    async with CodeExecutor(registry, runtime=InProcessRuntime(), mode="both") as executor:
        tool = code_mode_langchain_tool(executor)
    assert CODE_ONLY_RULE not in tool.description
    assert tool.description.endswith(executor.sdk_text())


@pytest.mark.anyio
async def test_a_scope_limits_the_sdk_and_the_programs(registry: ToolRegistry) -> None:
    registry.add_scope("reader")
    registry.restrict("reader", deny=["add"])
    async with CodeExecutor(registry, runtime=InProcessRuntime()) as executor:
        tool = code_mode_langchain_tool(executor, scope="reader")
        assert "async def where" in tool.description
        assert "async def add" not in tool.description
        message = await tool.ainvoke(tool_call(program("return await tools.add({'a': 1, 'b': 2})")))
    assert message.status == "error"
    assert "no tool named 'add'; available tools: where" in message.content


@pytest.mark.anyio
async def test_a_native_executor_or_an_unknown_scope_is_refused(registry: ToolRegistry) -> None:
    async with CodeExecutor(registry, runtime=InProcessRuntime(), mode="native") as native:
        with pytest.raises(ExecutorConfigError, match="native"):
            code_mode_langchain_tool(native)
    async with CodeExecutor(registry, runtime=InProcessRuntime()) as executor:
        with pytest.raises(UnknownScopeError):
            code_mode_langchain_tool(executor, scope="nope")


# --------------------------------------------------------------------------- ainvoke


@pytest.mark.anyio
async def test_ainvoke_with_a_tool_call_gives_a_tool_message_with_the_output_and_artifact(
    executor: CodeExecutor, seen: list[tuple[str, str]]
) -> None:
    tool = code_mode_langchain_tool(executor)
    code = "print('adding')\nreturn await tools.add({'a': 2, 'b': 3})"
    message = await tool.ainvoke(tool_call(program(code), call_id="call_7"))
    assert isinstance(message, ToolMessage)
    assert (message.tool_call_id, message.name, message.status) == ("call_7", "run_code", "success")
    assert message.content == "adding\n5"
    assert message.artifact == {"logs": ["adding"], "result": 5}
    # The model's call id is the run's: its sub-calls are call_7:ptc:<n>.
    assert seen == [("call_7:ptc:1", "add"), ("call_7", "run_code")]


@pytest.mark.anyio
async def test_ainvoke_with_plain_arguments_gives_the_text(
    executor: CodeExecutor, seen: list[tuple[str, str]]
) -> None:
    tool = code_mode_langchain_tool(executor)
    assert await tool.ainvoke(program("return 'plain'")) == "plain"
    [(call_id, name)] = seen
    assert name == "run_code" and call_id.startswith("run_code-")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (program("return (1 +"), "Error: code run failed (syntax)"),
        (
            program("raise ValueError('boom')"),
            # The traceback in the program's own lines, as every backend reports it.
            "Error: code run failed (exception): Traceback (most recent call last):\n"
            '  File "<program>", line 1, in <module>\n'
            "    raise ValueError('boom')\n"
            "ValueError: boom",
        ),
        ({"code": "return 1"}, "'description' is a required property"),
        ({**program("return 1"), "extra": 1}, "Additional properties are not allowed"),
    ],
)
async def test_a_failure_is_an_error_tool_message_the_model_reads(
    executor: CodeExecutor, args: dict[str, Any], expected: str
) -> None:
    tool = code_mode_langchain_tool(executor)
    message = await tool.ainvoke(tool_call(args))
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert isinstance(message.content, str) and expected in message.content
    assert message.content.startswith("Error: ")
    # Without a tool call id, LangChain hands back the same text.
    assert await tool.ainvoke(args) == message.content


@pytest.mark.anyio
async def test_a_tool_call_error_inside_the_program_can_be_handled_by_it(
    executor: CodeExecutor,
) -> None:
    tool = code_mode_langchain_tool(executor)
    code = (
        "try:\n"
        "    await tools.add({'a': 'x', 'b': 1})\n"
        "except ToolCallError as e:\n"
        "    return e.code"
    )
    message = await tool.ainvoke(tool_call(program(code)))
    assert (message.status, message.content) == ("success", "INVALID_ARGS")


@pytest.mark.anyio
async def test_deferred_contexts_follow_the_output(registry: ToolRegistry) -> None:
    @registry.tool
    async def remind(ctx: ToolRunContext) -> str:
        """Leave a note for the model."""
        ctx.defer_context("note: check the logs")
        return "ok"

    async with CodeExecutor(registry, runtime=InProcessRuntime()) as executor:
        tool = code_mode_langchain_tool(executor)
        message = await tool.ainvoke(tool_call(program("return await tools.remind({})")))
    assert message.content == "ok\nnote: check the logs"


def test_images_in_the_content_are_langchain_image_blocks() -> None:
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    success = ToolSuccess(
        value={"logs": [], "result": image},
        content=[{"type": "text", "text": "a chart"}, image],
    )
    batch = BatchResult(
        results=[CallResult(call_id="call_1", result=success)], additional_contexts=[]
    )
    content, artifact = tool_output(batch)
    assert content == [
        {"type": "text", "text": "a chart"},
        {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
    ]
    assert artifact == success.value
    # A LangChain ToolMessage takes them as they are.
    message = ToolMessage(content=content, tool_call_id="call_1")
    assert message.content == content


def test_a_failure_raises_tool_exception_with_its_error_text() -> None:
    failure = ToolFailure.of("code run failed (timeout): too slow")
    batch = BatchResult(
        results=[CallResult(call_id="call_1", result=failure)], additional_contexts=["later"]
    )
    with pytest.raises(ToolException) as raised:
        tool_output(batch)
    assert str(raised.value) == "Error: code run failed (timeout): too slow\nlater"


# --------------------------------------------------------------------------- invoke


def test_invoke_from_plain_sync_code_runs_in_the_background_loop() -> None:
    """Made and invoked with no event loop: the real subprocess runtime, run twice."""
    threads: list[str] = []
    registry = make_registry(threads)
    executor = CodeExecutor(registry, limits=Limits(timeout=10))
    tool = code_mode_langchain_tool(executor)
    try:
        first = tool.invoke(tool_call(program("return await tools.where({})")))
        second = tool.invoke(program("return await tools.add({'a': 40, 'b': 2})"))
    finally:
        _BACKGROUND.close()  # closes the executor in its loop, then the loop
    assert isinstance(first, ToolMessage)
    assert (first.status, first.content) == ("success", "ptc-adapters-loop")
    assert second == "42"  # the same executor (and its runtime) in the same loop again
    assert threads == ["ptc-adapters-loop"]
    assert not any(t.name == "ptc-adapters-loop" for t in threading.enumerate())


@pytest.mark.anyio
async def test_invoke_from_a_worker_thread_runs_in_the_loop_the_tool_was_made_in(
    executor: CodeExecutor, threads: list[str]
) -> None:
    tool = code_mode_langchain_tool(executor)
    here = threading.current_thread().name
    message = await anyio.to_thread.run_sync(
        tool.invoke, tool_call(program("return await tools.where({})"), call_id="call_9")
    )
    assert (message.status, message.content, message.tool_call_id) == ("success", here, "call_9")
    assert threads == [here]


@pytest.mark.anyio
async def test_invoke_inside_a_running_loop_raises_and_points_to_ainvoke(
    executor: CodeExecutor,
) -> None:
    tool = code_mode_langchain_tool(executor)
    with pytest.raises(RuntimeError, match="ainvoke"):
        tool.invoke(program("return 1"))


def test_invoke_after_the_loop_the_tool_was_made_in_ended_says_so(
    registry: ToolRegistry,
) -> None:
    async def make() -> StructuredTool:
        return code_mode_langchain_tool(CodeExecutor(registry, runtime=InProcessRuntime()))

    tool = anyio.run(make)
    with pytest.raises(RuntimeError, match="has ended"):
        tool.invoke(program("return 1"))


# --------------------------------------------------------------------------- packaging


def test_the_tool_imports_langchain_and_no_other_framework() -> None:
    code = (
        "import sys\n"
        "from ptc.adapters import code_mode_langchain_tool\n"
        "assert 'langchain_core' in sys.modules\n"
        "assert 'pydantic_ai' not in sys.modules and 'agents' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_example_runs_offline() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_tool.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.splitlines() == [
        "ran: search_docs, search_docs, get_doc, get_doc, reading_minutes, reading_minutes, run_code",
        "The docs that cover it:",
        "Retry policy for outbound HTTP calls (1 min)",
        "Timeouts and deadlines (1 min)",
    ]
