"""A pydantic-ai ``Agent`` in code mode: one toolset, ``run_code``, and the SDK in its instructions.

The model here is pydantic-ai's ``FunctionModel`` following a script, so the example runs
offline: it reads the SDK in its instructions, writes a program with a typo (the run fails,
and the toolset asks for a retry with the error), fixes it, and answers with what the program
printed. Swap the ``FunctionModel`` for a real one and nothing else changes:

    async with CodeExecutor(registry) as executor:
        agent = Agent("openai:gpt-5.2", toolsets=[code_mode_toolset(executor)])
        result = await agent.run("Which docs cover retries and timeouts?")

Run it:  python examples/pydantic_ai_agent.py [--runtime subprocess|pyodide]
(needs the extra: pip install 'ptc-runner[pydantic-ai]')
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import make_registry

from ptc import CodeExecutor
from ptc.adapters import code_mode_toolset

TYPO_PROGRAM = """\
hits = await tools.search_doc({"query": "retry"})
return hits
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


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A stand-in for an LLM: reacts to the last tool result, or starts from the instructions."""
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if isinstance(last, ModelRequest) and not returned:
        assert info.instructions and "async def search_docs" in info.instructions
        code = TYPO_PROGRAM
    elif returned[0].outcome == "retried":
        print(f"retry asked for: {str(returned[0].content).splitlines()[-1]}")
        code = FANOUT_PROGRAM
    else:
        return ModelResponse(parts=[TextPart(f"The docs that cover it:\n{returned[0].content}")])
    return ModelResponse(
        parts=[ToolCallPart("run_code", {"code": code, "description": "find retry/timeout docs"})]
    )


async def main(runtime: str) -> None:
    registry = make_registry()
    async with CodeExecutor(registry, runtime=runtime) as executor:
        agent = Agent(FunctionModel(scripted_model), toolsets=[code_mode_toolset(executor)])
        result = await agent.run("Which docs cover retries and timeouts?")
    print(result.output)
    calls = [
        part
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    print(f"run_code calls: {len(calls)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="subprocess", choices=["subprocess", "pyodide"])
    anyio.run(main, parser.parse_args().runtime)
