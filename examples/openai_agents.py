"""An OpenAI Agents SDK ``Agent`` in code mode: one strict tool, ``run_code``, and the SDK in its instructions.

The model here is the SDK's own ``ScriptedModel`` (``agents.testing``), so the example runs
offline with no API key: it checks the SDK is in its instructions, calls ``run_code`` with
a program that fans out over the docs, and answers with what the program printed. Drop
``model=`` (or name a real model) and nothing else changes:

    async with CodeExecutor(registry) as executor:
        agent = Agent(name="docs", instructions=system_prompt(executor), tools=[code_mode_tool(executor)])
        result = await Runner.run(agent, "Which docs cover retries and timeouts?")

Run it:  python examples/openai_agents.py [--runtime subprocess|pyodide]
(needs the extra: pip install 'ptc-runner[openai-agents]')
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
from agents import Agent, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import make_registry

from ptc import CodeExecutor
from ptc.adapters import code_mode_tool, system_prompt
from registry import ToolExecution, ToolResult

FANOUT_PROGRAM = """\
import asyncio
hits = await asyncio.gather(*(tools.search_docs({"query": q, "limit": 1}) for q in ["retry", "timeout"]))
docs = await asyncio.gather(*(tools.get_doc({"doc_id": batch[0]["id"]}) for batch in hits))
for d in docs:
    print(d["title"])
"""


def write_program(call: ModelCall) -> list[Any]:
    """The model's first turn: it reads the SDK in its instructions and writes a program."""
    assert call.system_instructions and "async def search_docs" in call.system_instructions
    arguments = {"code": FANOUT_PROGRAM, "description": "find retry/timeout docs"}
    return [function_call("run_code", arguments, call_id="call_1")]


def answer(call: ModelCall) -> list[Any]:
    """The model's second turn: it answers with what the program printed."""
    [output] = [item for item in call.input if item.get("type") == "function_call_output"]
    return [assistant_message(f"The docs that cover it:\n{output['output']}")]


async def main(runtime: str) -> None:
    registry = make_registry()
    ran: list[str] = []

    def record(execution: ToolExecution, result: ToolResult) -> None:
        ran.append(execution.name)

    registry.on_result(record)
    model = ScriptedModel([ModelStep.respond(write_program), ModelStep.respond(answer)])
    async with CodeExecutor(registry, runtime=runtime) as executor:
        agent = Agent(
            name="docs",
            instructions=system_prompt(executor),
            tools=[code_mode_tool(executor)],
            model=model,
        )
        # Tracing off: the SDK would otherwise try to export its traces to OpenAI.
        result = await Runner.run(
            agent,
            "Which docs cover retries and timeouts?",
            run_config=RunConfig(tracing_disabled=True),
        )
    print(f"ran: {', '.join(ran)}")
    print(result.final_output)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="subprocess", choices=["subprocess", "pyodide"])
    anyio.run(main, parser.parse_args().runtime)
