"""OpenAI Agents SDK: the strict ``run_code`` tool, invoked directly and by an agent run."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, ToolOutputImage, ToolOutputText
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

from ptc import BatchResult, CallResult, CodeExecutor, ExecutorConfigError
from ptc.adapters import code_mode_tool, system_prompt
from ptc.adapters._openai_agents import tool_output
from registry import ToolExecution, ToolRegistry, ToolResult, ToolSuccess
from runtime import Limits

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))

from tools import make_registry  # noqa: E402

pytestmark = pytest.mark.anyio

OFFLINE = RunConfig(tracing_disabled=True)


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


async def invoke(tool: FunctionTool, arguments: str, call_id: str = "call_1") -> Any:
    ctx = ToolContext(
        context=None, tool_name=tool.name, tool_call_id=call_id, tool_arguments=arguments
    )
    return await tool.on_invoke_tool(ctx, arguments)


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


def arguments(code: str) -> str:
    return json.dumps({"code": code, "description": "test"})


async def test_the_tool_is_run_code_with_its_strict_schema(executor: CodeExecutor) -> None:
    tool = code_mode_tool(executor)
    schema = executor.run_code_schema()
    assert isinstance(tool, FunctionTool)
    assert (tool.name, tool.description) == ("run_code", schema["description"])
    assert tool.strict_json_schema is True
    assert tool.params_json_schema == schema["parameters"]
    # The description stays under Chat Completions' 1,024 characters: the SDK is not in it.
    assert len(tool.description) <= 1024
    assert "async def" not in tool.description


async def test_invoking_the_tool_runs_the_program(
    executor: CodeExecutor, registry: ToolRegistry, seen: list[tuple[str, str]]
) -> None:
    tool = code_mode_tool(executor)
    program = (
        "issue = await tools.create_issue({'title': 'From the agent'})\n"
        "await tools.add_comment({'issue_id': issue['id'], 'text': 'hi'})\n"
        "print('created', issue['id'])\n"
        "return (await tools.get_issue({'issue_id': issue['id']}))['comments']"
    )
    out = await invoke(tool, arguments(program), call_id="call_7")
    assert out == 'created 4\n[\n  {\n    "author": "agent",\n    "text": "hi"\n  }\n]'
    assert seen == [
        ("call_7:ptc:1", "create_issue"),
        ("call_7:ptc:2", "add_comment"),
        ("call_7:ptc:3", "get_issue"),
        ("call_7", "run_code"),
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (arguments("return (1 +"), "Error: code run failed (syntax)"),
        (
            arguments("await tools.get_doc({'doc_id': 'nope'})"),
            "Error: code run failed (exception)",
        ),
        ("{not json", "Error: malformed tool call: its arguments are not valid JSON"),
        (json.dumps({"code": 1, "description": "x"}), "Error: invalid arguments for run_code"),
    ],
    ids=["syntax", "tool-error", "not-json", "bad-arguments"],
)
async def test_a_failure_is_error_text_the_model_reads(
    executor: CodeExecutor, raw: str, expected: str
) -> None:
    out = await invoke(code_mode_tool(executor), raw)
    assert isinstance(out, str)
    assert out.startswith(expected)


async def test_a_tool_error_in_the_program_names_the_tool(executor: CodeExecutor) -> None:
    out = await invoke(code_mode_tool(executor), arguments("await tools.get_doc({'doc_id': 'x'})"))
    assert "get_doc: no doc with id 'x'" in out


async def test_a_denial_is_error_text_too(executor: CodeExecutor, registry: ToolRegistry) -> None:
    registry.guard(lambda execution: "no programs today" if execution.name == "run_code" else None)
    out = await invoke(code_mode_tool(executor), arguments("return 1"))
    assert out.startswith("Error: ") and "no programs today" in out


async def test_an_agent_run_with_a_scripted_model(
    executor: CodeExecutor, seen: list[tuple[str, str]]
) -> None:
    program = (
        "hits = await tools.search_docs({'query': 'timeout', 'limit': 1})\n"
        "return (await tools.get_doc({'doc_id': hits[0]['id']}))['body']"
    )

    def first(call: ModelCall) -> list[Any]:
        # The model is given run_code alone and the SDK in the instructions.
        assert [tool.name for tool in call.tools] == ["run_code"]
        assert call.system_instructions == "You help engineers.\n\n" + system_prompt(executor)
        return [function_call("run_code", {"code": program, "description": "x"}, call_id="c1")]

    def second(call: ModelCall) -> list[Any]:
        [output] = [i for i in call.input if i.get("type") == "function_call_output"]
        assert output["call_id"] == "c1"
        return [assistant_message(f"The doc says: {output['output']}")]

    model = ScriptedModel([ModelStep.respond(first), ModelStep.respond(second)])
    agent = Agent(
        name="ops",
        instructions="You help engineers.\n\n" + system_prompt(executor),
        tools=[code_mode_tool(executor)],
        model=model,
    )
    result = await Runner.run(agent, "What is our connect timeout?", run_config=OFFLINE)
    model.assert_complete()
    assert result.final_output == (
        "The doc says: Every outbound call carries a deadline. "
        "Default connect timeout 2 s, read timeout 10 s."
    )
    assert [name for _, name in seen] == ["search_docs", "get_doc", "run_code"]
    assert seen[0][0] == "c1:ptc:1"


async def test_a_failed_run_lets_the_agent_go_on(executor: CodeExecutor) -> None:
    def broken(call: ModelCall) -> list[Any]:
        return [function_call("run_code", {"code": "1/0", "description": "x"}, call_id="c1")]

    def fixed(call: ModelCall) -> list[Any]:
        [output] = [i for i in call.input if i.get("type") == "function_call_output"]
        assert output["output"].startswith("Error: code run failed (exception)")
        assert "ZeroDivisionError" in output["output"]
        return [function_call("run_code", {"code": "return 1/1", "description": "x"}, call_id="c2")]

    def done(call: ModelCall) -> list[Any]:
        outputs = [i for i in call.input if i.get("type") == "function_call_output"]
        return [assistant_message(outputs[-1]["output"])]

    model = ScriptedModel([ModelStep.respond(s) for s in (broken, fixed, done)])
    agent = Agent(name="ops", tools=[code_mode_tool(executor)], model=model)
    result = await Runner.run(agent, "divide", run_config=OFFLINE)
    assert result.final_output == "1.0"


async def test_the_scope_decides_what_a_program_reaches() -> None:
    registry = ToolRegistry()
    registry.add_scope("admin")

    @registry.tool(scope="admin")
    async def secret() -> str:
        """Only admins see it."""
        return "s3cret"

    async with CodeExecutor(registry) as executor:
        program = arguments("return await tools.secret()")
        assert await invoke(code_mode_tool(executor, "admin"), program) == "s3cret"
        outside = await invoke(code_mode_tool(executor), program)
        assert outside.startswith("Error: code run failed (exception)")
        assert "no tool named 'secret'" in outside


async def test_the_tool_refuses_what_cannot_work(registry: ToolRegistry) -> None:
    async with CodeExecutor(registry, mode="native") as native:
        with pytest.raises(ExecutorConfigError, match="'native'"):
            code_mode_tool(native)
    async with CodeExecutor(registry) as executor:
        with pytest.raises(ValueError, match="nope"):
            code_mode_tool(executor, "nope")


async def test_an_image_a_program_returns_is_an_image_output(executor: CodeExecutor) -> None:
    png = base64.b64encode(tiny_png()).decode()
    image = {"type": "image", "data": png, "mimeType": "image/png"}
    out = await invoke(code_mode_tool(executor), arguments(f"print('chart')\nreturn {image!r}"))
    assert out == [
        ToolOutputText(text=f"chart\n<image 1: image/png, {len(tiny_png())} bytes>"),
        ToolOutputImage(image_url=f"data:image/png;base64,{png}"),
    ]


def test_images_in_a_result_become_image_outputs() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
    result = ToolSuccess(
        value={"logs": []},
        content=[
            {"type": "text", "text": "the chart:"},
            {"type": "image", "data": png, "mimeType": "image/png"},
        ],
    )
    batch = BatchResult(results=[CallResult(call_id="c", result=result)], additional_contexts=[1])
    assert tool_output(batch) == [
        ToolOutputText(text="the chart:"),
        ToolOutputImage(image_url=f"data:image/png;base64,{png}"),
        ToolOutputText(text="1"),
    ]


def test_the_tool_imports_the_agents_sdk_and_not_pydantic_ai() -> None:
    code = (
        "import sys\n"
        "from ptc.adapters import code_mode_tool\n"
        "assert 'agents' in sys.modules\n"
        "assert 'pydantic_ai' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_example_runs_offline() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "ran: search_docs, search_docs, get_doc, get_doc, run_code" in out.stdout
    assert out.stdout.rstrip().endswith("Timeouts and deadlines")
