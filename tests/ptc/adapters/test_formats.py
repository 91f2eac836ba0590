"""The raw API formats, checked against the ``openai`` and ``anthropic`` SDKs' own types.

What the adapters build is validated as the SDKs' request ``TypedDict``\\s (pydantic drops
keys a ``TypedDict`` does not declare, so comparing the validated value with the input
catches extra keys too); what they read is the SDKs' response models, built locally. The
SDK clients run against a scripted model behind their own HTTP transport: no network.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import openai
import pytest
from anthropic.types import (
    ImageBlockParam,
    Message,
    MessageParam,
    TextBlockParam,
    ToolResultBlockParam,
)
from anthropic.types import ToolParam as AnthropicToolParam
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionToolMessageParam,
    ChatCompletionToolParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import FunctionToolParam, Response
from openai.types.responses.response_input_item_param import FunctionCallOutput
from openai.types.responses.response_input_item_param import Message as ResponsesMessage
from pydantic import TypeAdapter

from ptc import (
    CODE_ONLY_RULE,
    CODE_RUN_FAILED,
    MALFORMED_CALL,
    RUN_CODE,
    BatchResult,
    CallResult,
    CodeExecutor,
    ModelCall,
)
from ptc.adapters import (
    anthropic_calls,
    anthropic_results,
    anthropic_tools,
    api_names,
    openai_chat_calls,
    openai_chat_results,
    openai_chat_tools,
    openai_responses_calls,
    openai_responses_results,
    openai_responses_tools,
    strict_json_schema,
    system_prompt,
)
from ptc.adapters._formats import _strict_problem
from registry import (
    ToolDefinition,
    ToolOutput,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    ToolSuccess,
)
from runtime.testing import InProcessRuntime

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))

from tools import make_registry  # noqa: E402

pytestmark = pytest.mark.anyio

# A 1x1 PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

PROGRAM = """\
hits = await tools.search_docs({"query": "retry", "limit": 1})
print(hits[0]["title"])
return hits[0]["id"]
"""


def conforms(kind: Any, value: Any) -> bool:
    """``value`` is a valid ``kind`` with nothing ``kind`` does not declare."""
    adapter = TypeAdapter(kind)  # alive while the lazy iterables are consumed
    return _materialized(adapter.validate_python(value)) == value


def _materialized(value: Any) -> Any:
    # pydantic validates an ``Iterable`` field lazily: iterating it validates the items.
    if isinstance(value, Mapping):
        return {key: _materialized(item) for key, item in value.items()}
    if value is None or isinstance(value, str | bytes | int | float):
        return value
    return [_materialized(item) for item in value]


def test_the_conformance_check_catches_extra_missing_and_wrong_keys() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {}, "strict": True}}
    assert conforms(ChatCompletionToolParam, tool)
    assert not conforms(ChatCompletionToolParam, {**tool, "name": "f"})  # Responses' shape
    with pytest.raises(ValueError):
        conforms(ChatCompletionToolParam, {"type": "function"})
    with pytest.raises(ValueError):  # an image part where a tool message takes text only
        conforms(
            ChatCompletionToolMessageParam,
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url",
                                                               "image_url": {"url": "x"}}]},
        )  # fmt: skip


@asynccontextmanager
async def executor_of(
    registry: ToolRegistry | None = None, mode: Any = "code"
) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(
        registry or make_registry(latency=0), runtime=InProcessRuntime(), mode=mode
    ) as executor:
        yield executor


def run_code_call(call_id: str, code: str = PROGRAM) -> ModelCall:
    return ModelCall(call_id=call_id, name=RUN_CODE, arguments={"code": code, "description": "d"})


def image_registry() -> ToolRegistry:
    """A tool that returns an image with its text, and one that defers a context."""
    registry = ToolRegistry()

    async def chart(args: dict[str, Any], ctx: ToolRunContext) -> Any:
        return ToolReturn(
            {"points": 3},
            [
                {"type": "text", "text": "the chart of 3 points"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ],
        )

    async def noted(args: dict[str, Any], ctx: ToolRunContext) -> Any:
        ctx.defer_context("the user prefers metric units")
        ctx.defer_context({"kind": "note", "n": 2})
        return "ok"

    for name, execute in (("chart", chart), ("noted", noted)):
        registry.register(
            ToolDefinition(
                name=name,
                description=f"the {name} tool",
                parameters={"type": "object", "properties": {}, "additionalProperties": False},
                output=ToolOutput(schema={}),
                execute=execute,
            )
        )
    return registry


# --------------------------------------------------------------------------- imports


def test_importing_the_adapters_imports_no_framework() -> None:
    probe = (
        "import sys, ptc.adapters\n"
        "heavy = ('openai', 'anthropic', 'pydantic_ai', 'agents', 'langchain', "
        "'langchain_core', 'opentelemetry')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- tools


@pytest.mark.parametrize("mode", ["code", "both"])
async def test_each_format_is_the_sdks_tool_type(mode: str) -> None:
    async with executor_of(mode=mode) as executor:
        described = executor.describe()["tools"]
        chat = openai_chat_tools(executor)
        responses = openai_responses_tools(executor)
        claude = anthropic_tools(executor)
    assert [t["function"]["name"] for t in chat] == [t["name"] for t in described]
    assert [t["name"] for t in responses] == [t["name"] for t in described]
    assert [t["name"] for t in claude] == [t["name"] for t in described]
    for tool in chat:
        assert conforms(ChatCompletionToolParam, tool)
        assert tool["type"] == "function" and isinstance(tool["function"]["strict"], bool)
    for tool in responses:
        assert conforms(FunctionToolParam, tool)
        assert tool["type"] == "function" and isinstance(tool["strict"], bool)
    for tool, schema in zip(claude, described, strict=True):
        assert conforms(AnthropicToolParam, tool)
        assert tool == {
            "name": schema["name"],
            "description": schema["description"],
            "input_schema": schema["parameters"],
        }


async def test_run_code_is_strict_in_every_openai_format() -> None:
    async with executor_of() as executor:
        (chat,) = openai_chat_tools(executor)
        (responses,) = openai_responses_tools(executor)
        parameters = executor.run_code_schema()["parameters"]
    assert chat["function"]["strict"] is True and responses["strict"] is True
    assert chat["function"]["parameters"] == responses["parameters"] == parameters
    assert strict_json_schema(parameters) == parameters  # already strict: unchanged


async def test_a_tool_is_strict_only_when_its_schema_means_the_same_in_strict_form() -> None:
    async with executor_of(mode="native") as executor:
        schemas = {s["name"]: s["parameters"] for s in executor.describe()["tools"]}
        tools = {t["name"]: t for t in openai_responses_tools(executor)}
    strict = {name for name, tool in tools.items() if tool["strict"]}
    # Every parameter required, or optional with null as its default.
    assert strict == {"add_comment", "get_doc", "get_issue"}
    for name, tool in tools.items():
        if not tool["strict"]:  # sent exactly as declared
            assert tool["parameters"] == schemas[name]
    assert _strict_problem(schemas["search_docs"]) == (
        "/properties/limit is optional without null as a valid default"
    )


async def test_an_optional_nullable_property_becomes_required_and_null_still_means_the_default() -> (
    None
):
    registry = ToolRegistry()
    seen: list[Any] = []

    @registry.tool
    async def find(query: str, tag: str | None = None) -> list[str]:
        """Find things.

        Args:
            query: what to find.
            tag: only things with this tag.
        """
        seen.append(tag)
        return [query]

    async with executor_of(registry, mode="native") as executor:
        (tool,) = openai_chat_tools(executor)
        function = tool["function"]
        assert function["strict"] is True
        parameters = function["parameters"]
        assert parameters["required"] == ["query", "tag"]
        assert parameters["additionalProperties"] is False
        assert "default" not in parameters["properties"]["tag"]
        # What strict mode makes the model send is what the tool took before.
        arguments = {"query": "x", "tag": None}
        jsonschema.validate(arguments, parameters)
        batch = await executor.execute(
            openai_chat_calls([_chat_call("call_1", "find", json.dumps(arguments))])
        )
    assert not batch.results[0].result.is_error and seen == [None]


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object"}, "free-form object"),
        (_object(a={"type": "object", "additionalProperties": True}), "free-form object"),
        (
            _object(a={"type": "object", "properties": {}, "additionalProperties": {}}),
            "allows properties it does not list",
        ),
        (_object(a={"oneOf": [{"type": "string"}, {"type": "integer"}]}), "uses `oneOf`"),
        (_object(a={"type": "string", "minLength": 1}), "uses `minLength`"),
        (_object(a={"type": "string", "format": "uri"}), "the format 'uri'"),
        (_object(a={"type": "array"}), "an array without an items schema"),
        (_object(a={"description": "anything"}), "has no type"),
        (_object(a=True), "boolean schema"),
        ({"anyOf": [{"type": "object"}]}, "the root is not an object schema"),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "default": 1}}},
            "optional without null as a valid default",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "default": None}}},
            "optional without null as a valid default",  # null is its default, but not valid
        ),
    ],
)
def test_a_schema_with_no_strict_form_of_the_same_meaning_is_refused(
    schema: dict[str, Any], problem: str
) -> None:
    assert strict_json_schema(schema) is None
    assert problem in (_strict_problem(schema) or "")


def test_the_strict_form_closes_listed_objects_and_inlines_refs_with_siblings() -> None:
    node = {
        "type": "object",
        "properties": {
            "value": {"type": "integer", "minimum": 0},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
        },
        "required": ["value", "children"],
    }
    schema = {
        "type": "object",
        "properties": {
            "root": {"$ref": "#/$defs/Node", "description": "the tree"},
            "when": {"type": ["string", "null"], "format": "date-time", "default": None},
        },
        "required": ["root"],
        "$defs": {"Node": node},
    }
    before = copy.deepcopy(schema)
    strict = strict_json_schema(schema)
    assert schema == before  # the input is not changed
    closed_node = {**node, "additionalProperties": False}
    assert strict == {
        "type": "object",
        "properties": {
            "root": {**closed_node, "description": "the tree"},
            "when": {"type": ["string", "null"], "format": "date-time"},
        },
        "required": ["root", "when"],
        "$defs": {"Node": closed_node},
        "additionalProperties": False,
    }
    # The recursive reference stays a reference; the strict form accepts what it should.
    jsonschema.validate({"root": {"value": 1, "children": []}, "when": None}, strict)


def test_limits_of_strict_mode_are_kept() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = _object(a=deep)
    assert "nest deeper than 10" in (_strict_problem(deep) or "")
    wide = _object(**{f"p{i}": {"type": "string"} for i in range(5001)})
    assert "more than 5000 properties" in (_strict_problem(wide) or "")
    enums = _object(**{f"e{i}": {"type": "integer", "enum": list(range(100))} for i in range(11)})
    assert "more than 1000 enum values" in (_strict_problem(enums) or "")


async def test_a_name_the_apis_refuse_is_renamed_and_mapped_back() -> None:
    registry = make_registry(latency=0)

    @registry.tool(name="docs.search", concurrency_safe=True)
    async def search(query: str) -> str:
        """Search."""
        return f"found {query}"

    @registry.tool(name="docs_search")
    async def other(query: str) -> str:
        """Another tool whose name the plain rename would take."""
        return "the other one"

    async with executor_of(registry, mode="both") as executor:
        names = api_names(executor)
        renamed = names["docs.search"]
        assert names["docs_search"] == "docs_search"  # a fitting name is kept
        assert re.fullmatch(r"docs_search_[0-9a-f]{8}", renamed)  # clash: a hash of its own
        assert api_names(executor) == names  # deterministic
        for make in (openai_chat_tools, openai_responses_tools, anthropic_tools):
            listed = [json.dumps(tool) for tool in make(executor)]
            assert any(f'"{renamed}"' in tool for tool in listed)
            assert not any('"docs.search"' in tool for tool in listed)
        message = Message.model_validate(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [
                    {"type": "tool_use", "id": "tu_1", "name": renamed, "input": {"query": "x"}}
                ],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
        calls = anthropic_calls(message, executor)
        assert [call.name for call in calls] == ["docs.search"]
        batch = await executor.execute(calls)
        assert batch.results[0].result.value == "found x"
        assert [call.name for call in anthropic_calls(message)] == [renamed]  # no executor: as is
    async with executor_of(registry, mode="code") as executor:  # only run_code is a tool
        assert [t["name"] for t in anthropic_tools(executor)] == [RUN_CODE]


async def test_the_system_prompt_is_the_rule_and_the_sdk() -> None:
    async with executor_of() as executor:
        prompt = system_prompt(executor)
        sdk = executor.sdk_text()
    assert prompt.startswith(CODE_ONLY_RULE)
    assert f"```python\n{sdk.rstrip()}\n```" in prompt
    assert "async def search_docs" in prompt
    async with executor_of(mode="both") as executor:
        both = system_prompt(executor)
    assert CODE_ONLY_RULE not in both and "async def search_docs" in both
    async with executor_of(mode="native") as executor:
        assert system_prompt(executor) == ""


async def test_the_sdk_fence_outlasts_a_fence_in_a_description() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def shell(command: str) -> str:
        """Run a command such as ```ls -l```."""
        return command

    async with executor_of(registry) as executor:
        prompt = system_prompt(executor)
    assert "\n````python\n" in prompt and prompt.endswith("\n````")


# --------------------------------------------------------------------------- calls


def _chat_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _chat_completion(*tool_calls: dict[str, Any]) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                }
            ],
        }
    )


def _anthropic_message(*content: dict[str, Any]) -> Message:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
    )


def _response(*output: dict[str, Any]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-test",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )


EXPECTED_CALLS = [
    ModelCall(call_id="call_1", name=RUN_CODE, arguments={"code": PROGRAM, "description": "d"}),
    ModelCall(call_id="call_2", name="get_doc", arguments={"doc_id": "timeouts"}),
]


def test_chat_completion_tool_calls_become_model_calls() -> None:
    completion = _chat_completion(
        _chat_call("call_1", RUN_CODE, json.dumps({"code": PROGRAM, "description": "d"})),
        _chat_call("call_2", "get_doc", '{"doc_id": "timeouts"}'),
    )
    message = completion.choices[0].message
    assert openai_chat_calls(completion) == EXPECTED_CALLS
    assert openai_chat_calls(message) == EXPECTED_CALLS
    assert openai_chat_calls(message.tool_calls or []) == EXPECTED_CALLS
    assert openai_chat_calls(completion.model_dump()) == EXPECTED_CALLS
    assert openai_chat_calls(message.model_dump()) == EXPECTED_CALLS
    text_only = ChatCompletion.model_validate(
        {**completion.model_dump(), "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": "hi"}}]}
    )  # fmt: skip
    assert openai_chat_calls(text_only) == []
    with pytest.raises(TypeError, match="expected a message or its tool calls"):
        openai_chat_calls(message.tool_calls[0])


def test_responses_function_calls_become_model_calls() -> None:
    response = _response(
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": RUN_CODE,
            "arguments": json.dumps({"code": PROGRAM, "description": "d"}),
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_2",
            "name": "get_doc",
            "arguments": '{"doc_id": "timeouts"}',
        },
    )
    assert openai_responses_calls(response) == EXPECTED_CALLS
    assert openai_responses_calls(response.output) == EXPECTED_CALLS
    assert openai_responses_calls(response.model_dump()) == EXPECTED_CALLS


def test_anthropic_tool_use_blocks_become_model_calls() -> None:
    message = _anthropic_message(
        {"type": "text", "text": "Looking."},
        {
            "type": "tool_use",
            "id": "call_1",
            "name": RUN_CODE,
            "input": {"code": PROGRAM, "description": "d"},
        },
        {"type": "tool_use", "id": "call_2", "name": "get_doc", "input": {"doc_id": "timeouts"}},
    )
    assert anthropic_calls(message) == EXPECTED_CALLS
    assert anthropic_calls(message.content) == EXPECTED_CALLS
    assert anthropic_calls(message.model_dump()) == EXPECTED_CALLS
    assert anthropic_calls({"role": "assistant", "content": "just text"}) == []


async def test_arguments_that_are_not_json_are_one_calls_malformed_error() -> None:
    completion = _chat_completion(
        _chat_call("call_1", "get_doc", '{"doc_id": "timeo'),  # cut short
        _chat_call("call_2", "get_doc", '{"doc_id": "timeouts"}'),
    )
    calls = openai_chat_calls(completion)
    assert calls[0].arguments == '{"doc_id": "timeo'
    async with executor_of(mode="native") as executor:
        batch = await executor.execute(calls)
    bad, good = (item.result for item in batch.results)
    assert bad.is_error and bad.error.info is not None
    assert bad.error.info.code == MALFORMED_CALL
    assert "its arguments are not valid JSON" in bad.error.message
    assert not good.is_error and good.value["id"] == "timeouts"
    (message, _) = openai_chat_results(batch)
    assert "not valid JSON" in message["content"]


# --------------------------------------------------------------------------- results


async def _code_batch() -> BatchResult:
    """A run that prints and returns, and one whose program raises."""
    async with executor_of() as executor:
        return await executor.execute(
            [run_code_call("call_1"), run_code_call("call_2", "raise ValueError('boom')")]
        )


async def test_chat_results_are_tool_messages() -> None:
    batch = await _code_batch()
    assert batch.results[1].result.error.info.code == CODE_RUN_FAILED
    messages = openai_chat_results(batch)
    assert [m["role"] for m in messages] == ["tool", "tool"]
    for message, item in zip(messages, batch.results, strict=True):
        assert conforms(ChatCompletionToolMessageParam, message)
        assert message["tool_call_id"] == item.call_id
        assert message["content"] == item.result.content[0]["text"]
    assert "Retry policy for outbound HTTP calls" in messages[0]["content"]
    assert "ValueError: boom" in messages[1]["content"]


async def test_responses_results_are_function_call_outputs() -> None:
    batch = await _code_batch()
    items = openai_responses_results(batch)
    for output, item in zip(items, batch.results, strict=True):
        assert conforms(FunctionCallOutput, output)
        assert output == {
            "type": "function_call_output",
            "call_id": item.call_id,
            "output": item.result.content[0]["text"],
        }


async def test_anthropic_results_are_one_user_message_with_is_error() -> None:
    batch = await _code_batch()
    message = anthropic_results(batch)
    assert conforms(MessageParam, message)
    ok, failed = message["content"]
    for block in (ok, failed):
        assert conforms(ToolResultBlockParam, block)
    assert ok["tool_use_id"] == "call_1" and "is_error" not in ok
    assert failed["tool_use_id"] == "call_2" and failed["is_error"] is True
    assert "ValueError: boom" in failed["content"][0]["text"]


async def _native_image_batch() -> BatchResult:
    async with executor_of(image_registry(), mode="native") as executor:
        return await executor.execute(
            [ModelCall(call_id="call_1", name="chart", arguments={}),
             ModelCall(call_id="call_2", name="chart", arguments="{}")]
        )  # fmt: skip


async def test_an_image_a_tool_returns_reaches_chat_as_an_image_url_part() -> None:
    messages = openai_chat_results(await _native_image_batch())
    first, second, user = messages
    for message in (first, second):
        assert conforms(ChatCompletionToolMessageParam, message)
        assert message["content"] == (
            "the chart of 3 points\n"
            "[image 1 (image/png): in the user message after these tool results]"
        )
    assert conforms(ChatCompletionUserMessageParam, user)
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Tool call call_1, image 1:"},
            image,
            {"type": "text", "text": "Tool call call_2, image 1:"},
            image,
        ],
    }


async def test_an_image_a_tool_returns_reaches_responses_as_input_image() -> None:
    first, _ = openai_responses_results(await _native_image_batch())
    assert conforms(FunctionCallOutput, first)
    assert first["output"] == [
        {"type": "input_text", "text": "the chart of 3 points"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
    ]


async def test_an_image_a_tool_returns_reaches_anthropic_inside_its_tool_result() -> None:
    message = anthropic_results(await _native_image_batch())
    assert conforms(MessageParam, message)
    first = message["content"][0]
    assert conforms(ToolResultBlockParam, first)
    text, image = first["content"]
    assert conforms(TextBlockParam, text) and conforms(ImageBlockParam, image)
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }


def test_content_the_apis_cannot_take_is_described_in_text() -> None:
    content = [
        {"type": "image", "data": PNG, "mimeType": "image/jpg"},  # a common misspelling
        {"type": "image", "data": "PHN2Zz4=", "mimeType": "image/svg+xml"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}},
        {"type": "resource", "resource": {"uri": "file:///a.pdf", "blob": "JVBE",
                                          "mimeType": "application/pdf"}},
        {"type": "resource_link", "uri": "file:///b", "name": "b"},
        {"type": "text", "text": ""},
    ]  # fmt: skip
    batch = BatchResult(
        results=[CallResult(call_id="c", result=ToolSuccess(value=None, content=content))],
        additional_contexts=[],
    )
    message = anthropic_results(batch)
    assert conforms(MessageParam, message)
    blocks = message["content"][0]["content"]
    assert blocks[0]["source"]["media_type"] == "image/jpeg"
    assert [b["text"] for b in blocks[1:]] == [
        "[an image (image/svg+xml): not shown, the API takes PNG, JPEG, GIF and WebP]",
        "[audio (audio/wav): not shown, tool results take none]",
        "[resource file:///a.txt]\nhello",
        "[resource file:///a.pdf (application/pdf): not shown]",
        "[resource link: b file:///b]",
    ]
    (tool, user) = openai_chat_results(batch)
    assert conforms(ChatCompletionToolMessageParam, tool)
    assert conforms(ChatCompletionUserMessageParam, user)
    (output,) = openai_responses_results(batch)
    assert conforms(FunctionCallOutput, output)


async def test_deferred_contexts_follow_the_results_as_user_text() -> None:
    async with executor_of(image_registry(), mode="native") as executor:
        batch = await executor.execute([ModelCall(call_id="call_1", name="noted", arguments={})])
    texts = ["the user prefers metric units", '{"kind":"note","n":2}']
    _, user = openai_chat_results(batch)
    assert conforms(ChatCompletionUserMessageParam, user)
    assert [p["text"] for p in user["content"]] == texts
    _, message = openai_responses_results(batch)
    assert conforms(ResponsesMessage, message)
    assert [p["text"] for p in message["content"]] == texts
    anthropic_message = anthropic_results(batch)
    assert conforms(MessageParam, anthropic_message)
    blocks = anthropic_message["content"]
    assert [b["text"] for b in blocks[1:]] == texts


# --------------------------------------------------------------------------- the SDK clients


class ScriptedChat:
    """A Chat Completions endpoint that asks for one program, then answers with its output."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if len(self.requests) == 1:
            call = _chat_call("call_1", RUN_CODE, json.dumps({"code": PROGRAM, "description": "d"}))
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": body["messages"][-1]["content"]}
        completion = _chat_completion().model_dump()
        completion["choices"][0]["message"] = message
        return httpx2.Response(200, json=completion)


async def test_a_chat_completions_loop_through_the_openai_client() -> None:
    model = ScriptedChat()
    client = openai.AsyncOpenAI(
        api_key="offline",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model.answer)),
    )
    async with client, executor_of() as executor:
        messages: list[Any] = [
            {"role": "system", "content": system_prompt(executor)},
            {"role": "user", "content": "What is our retry policy?"},
        ]
        tools = openai_chat_tools(executor)
        for _ in range(3):
            completion = await client.chat.completions.create(
                model="gpt-test", messages=messages, tools=tools
            )
            message = completion.choices[0].message
            messages.append(message)
            if not message.tool_calls:
                break
            messages += openai_chat_results(await executor.execute(openai_chat_calls(message)))
    assert message.content is not None and "Retry policy for outbound" in message.content
    sent = model.requests[1]
    assert sent["tools"] == tools
    assert sent["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert sent["messages"][3]["role"] == "tool" and sent["messages"][3]["tool_call_id"] == "call_1"


class ScriptedResponses:
    """A Responses endpoint: one program, then its output as the answer."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if len(self.requests) == 1:
            output: dict[str, Any] = {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": RUN_CODE,
                "arguments": json.dumps({"code": PROGRAM, "description": "d"}),
                "status": "completed",
            }
        else:
            result = body["input"][-1]
            output = {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": result["output"], "annotations": []}],
            }
        return httpx2.Response(200, json=_response(output).model_dump(mode="json"))


async def test_a_responses_loop_through_the_openai_client() -> None:
    model = ScriptedResponses()
    client = openai.AsyncOpenAI(
        api_key="offline",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model.answer)),
    )
    async with client, executor_of() as executor:
        inputs: list[Any] = [{"role": "user", "content": "What is our retry policy?"}]
        tools = openai_responses_tools(executor)
        for _ in range(3):
            response = await client.responses.create(
                model="gpt-test", instructions=system_prompt(executor), input=inputs, tools=tools
            )
            calls = openai_responses_calls(response)
            if not calls:
                break
            inputs += response.output
            inputs += openai_responses_results(await executor.execute(calls))
    assert "Retry policy for outbound" in response.output_text
    assert model.requests[1]["input"][-1]["call_id"] == "call_1"
    assert model.requests[1]["tools"] == tools


def test_the_anthropic_example_runs_on_the_subprocess_runtime() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "anthropic_loop.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "[toolu_1] error",
        "[toolu_2] ok",
        "Done. The program said:",
        "Retry policy for outbound HTTP calls",
        "Timeouts and deadlines",
        "2",
    ]


async def test_the_anthropic_example_loop_sends_what_the_adapters_build() -> None:
    from anthropic_loop import ScriptedModel, agent_loop

    model = ScriptedModel()
    answer = await agent_loop(InProcessRuntime(), model)
    assert answer.startswith("Done. The program said:\nRetry policy")
    first, second, _ = model.requests
    assert [t["name"] for t in first["tools"]] == [RUN_CODE]
    assert conforms(AnthropicToolParam, first["tools"][0])
    assert second["messages"][1]["content"][1]["type"] == "tool_use"  # the assistant's turn
    assert conforms(MessageParam, second["messages"][2])
