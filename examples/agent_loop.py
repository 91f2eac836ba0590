"""An agent loop with ``CodeExecutor`` mounted as its tool executor.

The "model" here is a scripted stand-in so the example runs offline: it reads
the model input the executor describes (the ``run_code`` schema and the SDK
section), answers with tool calls, and finally with text. Swap
``ScriptedModel`` for a real LLM client and the loop stays the same:

    describe(scope) -> model -> execute(batch) -> results -> model -> ...

Run it:  python examples/agent_loop.py [--runtime subprocess|pyodide]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import make_registry

from ptc import CodeExecutor, ModelCall

FANOUT_PROGRAM = """\
import asyncio
hits = await asyncio.gather(*(tools.search_docs({"query": q, "limit": 2}) for q in ["retry", "timeout"]))
ids = sorted({h["id"] for batch in hits for h in batch})
docs = await asyncio.gather(*(tools.get_doc({"doc_id": i}) for i in ids))
for d in docs:
    print(d["title"])
return len(docs)
"""


@dataclass
class ScriptedModel:
    """A stand-in for an LLM that follows a fixed plan, reacting to tool results."""

    transcript: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0

    def respond(self, model_input: dict[str, Any]) -> list[ModelCall] | str:
        self.step += 1
        tool_names = [t["name"] for t in model_input["tools"]]
        if self.step == 1:
            # A first attempt many models make: calling a tool from the SDK directly.
            return [ModelCall(call_id="call_1", name="search_docs", arguments='{"query": "retry"}')]
        if self.step == 2:
            last = self.transcript[-1]
            assert last["is_error"] and "run_code" in last["text"], "expected the route-back hint"
            assert tool_names == ["run_code"]
            assert "async def search_docs" in model_input["sections"]["tools:sdk"]
            return [
                ModelCall(
                    call_id="call_2",
                    name="run_code",
                    arguments={"code": FANOUT_PROGRAM, "description": "find retry/timeout docs"},
                )
            ]
        last = self.transcript[-1]
        return f"Done. The program said:\n{last['text']}"


async def agent_loop(runtime: Any) -> str:
    registry = make_registry()
    model = ScriptedModel()
    async with CodeExecutor(registry, runtime=runtime, mode="code") as executor:
        for _ in range(5):
            model_input = executor.describe()
            reply = model.respond(model_input)
            if isinstance(reply, str):
                return reply
            batch = await executor.execute(reply)
            for item in batch.results:
                text = "\n".join(b["text"] for b in item.result.content if b["type"] == "text")
                model.transcript.append(
                    {"call_id": item.call_id, "is_error": item.result.is_error, "text": text}
                )
                print(f"[{item.call_id}] {'error' if item.result.is_error else 'ok'}: {text}")
    raise RuntimeError("the model did not finish in 5 steps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="subprocess", choices=["subprocess", "pyodide"])
    args = parser.parse_args()
    print(anyio.run(agent_loop, args.runtime))


if __name__ == "__main__":
    main()
