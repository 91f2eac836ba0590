"""pydantic-ai: the code-mode toolset, driven end to end by a scripted ``FunctionModel``."""

from __future__ import annotations

import base64
import struct
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from pydantic_ai import Agent, UnexpectedModelBehavior
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ptc import CODE_ONLY_RULE, BatchResult, CallResult, CodeExecutor, ExecutorConfigError
from ptc.adapters import CodeModeToolset, code_mode_toolset, system_prompt
from ptc.adapters._pydantic_ai import _tool_return
from registry import ToolCall, ToolExecution, ToolRegistry, ToolResult, ToolSuccess
from runtime import Limits

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))

from tools import make_registry  # noqa: E402

pytestmark = pytest.mark.anyio

TRIAGE = """\
import asyncio
hits = await tools.search_docs({"query": "retry", "limit": 1})
doc = await tools.get_doc({"doc_id": hits[0]["id"]})
issue = await tools.create_issue({"title": "Audit retries", "labels": ["http"]})
print(doc["title"])
return issue["id"]
"""

Script = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def tiny_png() -> bytes:
    """A valid one-pixel PNG (the executor checks an image's signature)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def run_code(code: str, call_id: str) -> ModelResponse:
    return ModelResponse(
        parts=[
            ToolCallPart("run_code", {"code": code, "description": "test"}, tool_call_id=call_id)
        ]
    )


def last_return(messages: list[ModelMessage]) -> ToolReturnPart:
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    parts = [p for p in request.parts if isinstance(p, ToolReturnPart)]
    assert len(parts) == 1
    return parts[0]


def scripted(*steps: Script) -> FunctionModel:
    """A model that answers its n-th request with the n-th step."""
    calls = iter(steps)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return next(calls)(messages, info)

    return FunctionModel(respond)


@pytest.fixture
def registry() -> ToolRegistry:
    return make_registry(latency=0)


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
    async with CodeExecutor(registry, limits=Limits(timeout=5)) as ex:
        yield ex


async def test_an_agent_runs_a_program_that_calls_the_tools(
    executor: CodeExecutor, registry: ToolRegistry, seen: list[tuple[str, str]]
) -> None:
    def first(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # What the model is given: run_code alone, strict, and the SDK in the instructions.
        [tool] = info.function_tools
        assert (tool.name, tool.strict) == ("run_code", True)
        assert tool.parameters_json_schema == executor.run_code_schema()["parameters"]
        assert info.instructions is not None
        assert system_prompt(executor) in info.instructions
        assert CODE_ONLY_RULE in info.instructions
        assert "async def search_docs" in info.instructions
        assert "async def create_issue" in info.instructions
        return run_code(TRIAGE, "call_1")

    def second(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_return(messages)
        assert (part.tool_call_id, part.outcome) == ("call_1", "success")
        return ModelResponse(parts=[TextPart(f"Program said: {part.content}")])

    agent = Agent(scripted(first, second), toolsets=[code_mode_toolset(executor)])
    result = await agent.run("Audit our retry policy")

    assert result.output == "Program said: Retry policy for outbound HTTP calls\n4"
    # The sub-calls ran under the model's call id, in the program's order, then the outer call.
    assert seen == [
        ("call_1:ptc:1", "search_docs"),
        ("call_1:ptc:2", "get_doc"),
        ("call_1:ptc:3", "create_issue"),
        ("call_1", "run_code"),
    ]
    created = await registry.execute(
        ToolCall(call_id="check", name="get_issue", arguments={"issue_id": 4})
    )
    assert isinstance(created, ToolSuccess)
    assert created.value["title"] == "Audit retries"


async def test_a_broken_program_is_retried_with_its_error(executor: CodeExecutor) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return run_code("return (1 +", "call_1")

    def fixed(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_return(messages)
        assert part.outcome == "retried"
        assert part.tool_call_id == "call_1"
        assert str(part.content).startswith("code run failed (syntax)")
        # A retry, and the model is told how many it has.
        assert part.retry is not None
        assert (part.retry.attempt, part.retry.max_retries) == (1, 2)
        return run_code('raise KeyError("missing")', "call_2")

    def fixed_again(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_return(messages)
        assert part.outcome == "retried"
        assert str(part.content).startswith("code run failed (exception)")
        assert "KeyError: 'missing'" in str(part.content)
        return run_code("return 6 * 7", "call_3")

    def done(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_return(messages)
        assert (part.outcome, part.content) == ("success", "42")
        return ModelResponse(parts=[TextPart("42")])

    agent = Agent(
        scripted(broken, fixed, fixed_again, done),
        toolsets=[code_mode_toolset(executor, max_retries=2)],
    )
    assert (await agent.run("six times seven")).output == "42"


async def test_retries_of_broken_programs_are_bounded(executor: CodeExecutor) -> None:
    attempts = 0

    def always_broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal attempts
        attempts += 1
        return run_code("1/0", f"call_{attempts}")

    agent = Agent(
        FunctionModel(always_broken), toolsets=[code_mode_toolset(executor, max_retries=1)]
    )
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries count of 1"):
        await agent.run("divide")
    assert attempts == 2


async def test_the_agents_retries_are_the_default_budget(executor: CodeExecutor) -> None:
    attempts = 0

    def always_broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal attempts
        attempts += 1
        return run_code("1/0", f"call_{attempts}")

    agent = Agent(FunctionModel(always_broken), toolsets=[code_mode_toolset(executor)], retries=3)
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries count of 3"):
        await agent.run("divide")
    assert attempts == 4


async def test_a_limit_is_a_terminal_failure_that_spends_no_retry(registry: ToolRegistry) -> None:
    def loops(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return run_code("import asyncio\nwhile True:\n    await asyncio.sleep(0.01)", "call_1")

    def adapts(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_return(messages)
        assert part.outcome == "failed"
        assert str(part.content).startswith("code run failed (timeout)")
        assert part.retry is None
        return run_code("return 'quick'", "call_2")

    def done(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert last_return(messages).content == "quick"
        return ModelResponse(parts=[TextPart("done")])

    async with CodeExecutor(registry, limits=Limits(timeout=0.5)) as executor:
        # No retries at all: a limit must not need one.
        agent = Agent(
            scripted(loops, adapts, done), toolsets=[code_mode_toolset(executor, max_retries=0)]
        )
        assert (await agent.run("loop")).output == "done"


async def test_a_denied_run_is_a_terminal_failure(
    executor: CodeExecutor, registry: ToolRegistry, seen: list[tuple[str, str]]
) -> None:
    registry.guard(lambda execution: "no programs today" if execution.name == "run_code" else None)

    def tries(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return run_code("return await tools.list_issues()", "call_1")

    def gives_up(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_return(messages)
        assert part.outcome == "failed"
        assert "no programs today" in str(part.content)
        return ModelResponse(parts=[TextPart("cannot")])

    agent = Agent(scripted(tries, gives_up), toolsets=[code_mode_toolset(executor, max_retries=0)])
    assert (await agent.run("list")).output == "cannot"
    assert ("call_1:ptc:1", "list_issues") not in seen


async def test_the_scope_decides_the_sdk_and_the_tools_a_program_reaches() -> None:
    registry = ToolRegistry()
    registry.add_scope("reader")

    @registry.tool
    async def visible(x: int) -> int:
        """Visible everywhere."""
        return x + 1

    @registry.tool(scope="reader")
    async def reader_only(x: int) -> int:
        """Only the reader scope has it."""
        return x * 10

    def first(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert info.instructions is not None
        assert "async def reader_only" in info.instructions
        return run_code("return await tools.reader_only({'x': await tools.visible({'x': 1})})", "c")

    def done(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(str(last_return(messages).content))])

    async with CodeExecutor(registry) as executor:
        plain = code_mode_toolset(executor)
        assert "reader_only" not in await plain.get_instructions(None)  # type: ignore[arg-type]
        agent = Agent(scripted(first, done), toolsets=[code_mode_toolset(executor, "reader")])
        assert (await agent.run("go")).output == "20"


async def test_the_toolset_refuses_what_cannot_work(registry: ToolRegistry) -> None:
    async with CodeExecutor(registry, mode="native") as native:
        with pytest.raises(ExecutorConfigError, match="'native'"):
            code_mode_toolset(native)
    async with CodeExecutor(registry) as executor:
        with pytest.raises(ExecutorConfigError, match="max_retries"):
            code_mode_toolset(executor, max_retries=-1)
        with pytest.raises(ValueError, match="nope"):
            code_mode_toolset(executor, "nope")
        toolset = code_mode_toolset(executor, id="code")
        assert isinstance(toolset, CodeModeToolset)
        assert toolset.id == "code"


async def test_an_image_a_program_returns_reaches_the_model(executor: CodeExecutor) -> None:
    png = tiny_png()
    image = {"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"}

    def first(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return run_code(f"print('the chart:')\nreturn {image!r}", "call_1")

    def second(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_return(messages)
        text, shown = part.content
        assert text == f"the chart:\n<image 1: image/png, {len(png)} bytes>"
        assert isinstance(shown, BinaryContent)
        assert (shown.data, shown.media_type) == (png, "image/png")
        return ModelResponse(parts=[TextPart("seen")])

    agent = Agent(scripted(first, second), toolsets=[code_mode_toolset(executor)])
    assert (await agent.run("draw")).output == "seen"


def test_images_in_a_result_reach_the_model_as_binary_content() -> None:
    png = b"\x89PNG\r\n\x1a\nfake"
    result = ToolSuccess(
        value={"logs": []},
        content=[
            {"type": "text", "text": "the chart:"},
            {"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"},
        ],
    )
    batch = BatchResult(
        results=[CallResult(call_id="c", result=result)], additional_contexts=[{"note": "later"}]
    )
    returned = _tool_return(batch)
    assert isinstance(returned, list)
    text, image, context = returned
    assert (text, context) == ("the chart:", '{"note":"later"}')
    assert isinstance(image, BinaryContent)
    assert (image.data, image.media_type, image.is_image) == (png, "image/png", True)
    only_text = ToolSuccess(value=None, content=[{"type": "text", "text": "a"}])
    batch = BatchResult(
        results=[CallResult(call_id="c", result=only_text)], additional_contexts=["b"]
    )
    assert _tool_return(batch) == "a\nb"


def test_the_toolset_imports_pydantic_ai_and_not_the_agents_sdk() -> None:
    code = (
        "import sys\n"
        "from ptc.adapters import code_mode_toolset\n"
        "assert 'pydantic_ai' in sys.modules\n"
        "assert 'agents' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_example_runs_offline() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pydantic_ai_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "retry asked for: AttributeError: no tool named 'search_doc'" in out.stdout
    assert "Retry policy for outbound HTTP calls\nTimeouts and deadlines\n2\n" in out.stdout
    assert out.stdout.endswith("run_code calls: 2\n")
