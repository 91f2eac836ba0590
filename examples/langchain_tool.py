"""LangChain in code mode: one ``StructuredTool``, ``run_code``, over a registry's tools.

The registry holds the team docs of ``examples/tools.py`` and a tool written for
LangChain (``@tool reading_minutes``), registered as it is. The chat model gets one tool,
``run_code``, whose description carries the SDK of them all, and writes a program that
fans out over the docs and calls the LangChain tool from inside it.

The model here is a scripted chat model (it binds tools as a provider's does, with
``convert_to_openai_tool``), so the example runs offline with no API key. The loop is
LangChain's plain tool-calling loop, in sync code: ``run_code.invoke`` runs each program
in the adapter's background event loop. Swap in a real chat model and nothing else
changes:

    run_code = code_mode_langchain_tool(CodeExecutor(registry))
    llm = ChatOpenAI(model="gpt-5").bind_tools([run_code])   # or create_agent(model, [run_code])

Run it:  python examples/langchain_tool.py [--runtime subprocess|pyodide]
(needs the extra: pip install 'ptc-runner[langchain]')
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import make_registry

from ptc import CodeExecutor
from ptc.adapters import code_mode_langchain_tool, register_langchain_tools
from registry import ToolExecution, ToolResult

PROGRAM = """\
import asyncio
hits = await asyncio.gather(*(tools.search_docs({"query": q, "limit": 1}) for q in ["retry", "timeout"]))
docs = await asyncio.gather(*(tools.get_doc({"doc_id": batch[0]["id"]}) for batch in hits))
for d in docs:
    minutes = await tools.reading_minutes({"text": d["body"]})
    print(f"{d['title']} ({minutes} min)")
"""


@tool
def reading_minutes(text: str) -> int:
    """How many minutes it takes to read ``text`` (200 words a minute, at least 1)."""
    return max(1, round(len(text.split()) / 200))


class ScriptedChatModel(BaseChatModel):
    """A chat model whose two turns are scripted: write a program, then answer with its output."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        [run_code] = kwargs["tools"]
        # What the provider would send the model: the SDK is in run_code's description.
        assert "async def reading_minutes" in run_code["function"]["description"]
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"The docs that cover it:\n{last.content}")
        else:
            call = {"code": PROGRAM, "description": "find the retry/timeout docs and time them"}
            reply = AIMessage(
                content="", tool_calls=[{"name": "run_code", "args": call, "id": "call_1"}]
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def run(question: str, llm: Any, run_code: BaseTool) -> str:
    """LangChain's plain tool-calling loop: call the model, run its tool calls, repeat."""
    messages: list[BaseMessage] = [HumanMessage(question)]
    while True:
        reply = llm.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return str(reply.content)
        messages.extend(run_code.invoke(call) for call in reply.tool_calls)


def main(runtime: str) -> None:
    registry = make_registry()
    register_langchain_tools(registry, [reading_minutes], concurrency_safe=True)
    ran: list[str] = []

    def record(execution: ToolExecution, result: ToolResult) -> None:
        ran.append(execution.name)

    registry.on_result(record)
    run_code = code_mode_langchain_tool(CodeExecutor(registry, runtime=runtime))
    answer = run(
        "Which docs cover retries and timeouts?",
        ScriptedChatModel().bind_tools([run_code]),
        run_code,
    )
    print(f"ran: {', '.join(ran)}")
    print(answer)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="subprocess", choices=["subprocess", "pyodide"])
    main(parser.parse_args().runtime)
