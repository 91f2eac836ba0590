"""A tool-use loop on the Anthropic Messages API, with code mode mounted.

Everything but the model is real: the ``anthropic`` SDK's client sends the tools, the
system prompt and the messages, and hands back ``anthropic.types.Message`` objects. The
model is a scripted stand-in behind the client's HTTP transport, so the example runs
offline; give ``AsyncAnthropic()`` no ``http_client`` (and an API key) and a real model
answers instead. The glue is four calls of ``ptc.adapters``:

    tools, system = anthropic_tools(executor), system_prompt(executor)
    message = await client.messages.create(..., system=system, tools=tools, messages=messages)
    batch = await executor.execute(anthropic_calls(message))
    messages += [{"role": "assistant", "content": message.content}, anthropic_results(batch)]

The stand-in first runs a program that fails (a doc that does not exist: the result comes
back with ``is_error``), then a fan-out program, then answers with text.

Run it:  python examples/anthropic_loop.py [--runtime subprocess|pyodide]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx2
from anthropic.types import MessageParam

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import make_registry

from ptc import CodeExecutor
from ptc.adapters import anthropic_calls, anthropic_results, anthropic_tools, system_prompt

MODEL = "claude-sonnet-4-5"  # any model id: the stand-in ignores it

BROKEN_PROGRAM = """\
doc = await tools.get_doc({"doc_id": "retry"})
return doc["title"]
"""

FANOUT_PROGRAM = """\
import asyncio
hits = await asyncio.gather(*(tools.search_docs({"query": q, "limit": 2}) for q in ["retry", "timeout"]))
ids = sorted({h["id"] for batch in hits for h in batch})
docs = await asyncio.gather(*(tools.get_doc({"doc_id": i}) for i in ids))
for d in docs:
    print(d["title"])
return len(docs)
"""


class ScriptedModel:
    """A stand-in for the Messages API: reads each request, answers with a fixed plan."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        step = len(self.requests)
        if step == 1:
            assert [tool["name"] for tool in body["tools"]] == ["run_code"]
            assert "async def search_docs" in body["system"]
            return _message(
                [_text("Let me look that up."), _run_code("toolu_1", BROKEN_PROGRAM)], "tool_use"
            )
        result = body["messages"][-1]["content"][0]
        if step == 2:
            assert result["tool_use_id"] == "toolu_1" and result["is_error"] is True
            assert "no doc with id 'retry'" in result["content"][0]["text"]
            return _message([_run_code("toolu_2", FANOUT_PROGRAM)], "tool_use")
        assert result["tool_use_id"] == "toolu_2" and "is_error" not in result
        return _message([_text(f"Done. The program said:\n{result['content'][0]['text']}")])


def _message(content: list[dict[str, Any]], stop_reason: str = "end_turn") -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    )


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _run_code(call_id: str, code: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "run_code",
        "input": {"code": code, "description": "look up the docs"},
    }


async def agent_loop(runtime: Any = "subprocess", model: ScriptedModel | None = None) -> str:
    """Ask about retries and timeouts; return the model's final text."""
    model = model or ScriptedModel()
    client = anthropic.AsyncAnthropic(
        api_key="offline",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model.answer)),
    )
    messages: list[MessageParam] = [
        {"role": "user", "content": "What do our docs say about retries and timeouts?"}
    ]
    async with client, CodeExecutor(make_registry(), runtime=runtime) as executor:
        tools, system = anthropic_tools(executor), system_prompt(executor)
        for _ in range(5):
            message = await client.messages.create(
                model=MODEL, max_tokens=4096, system=system, tools=tools, messages=messages
            )
            messages.append({"role": "assistant", "content": message.content})
            if message.stop_reason != "tool_use":
                return "".join(block.text for block in message.content if block.type == "text")
            batch = await executor.execute(anthropic_calls(message))
            messages.append(anthropic_results(batch))
            for item in batch.results:
                print(f"[{item.call_id}] {'error' if item.result.is_error else 'ok'}")
    raise RuntimeError("the model did not finish in 5 steps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="subprocess", choices=["subprocess", "pyodide"])
    args = parser.parse_args()
    print(anyio.run(agent_loop, args.runtime))


if __name__ == "__main__":
    main()
