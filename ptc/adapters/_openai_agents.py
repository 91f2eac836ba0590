"""OpenAI Agents SDK: code mode as one strict ``FunctionTool``.

    async with CodeExecutor(registry) as executor:
        agent = Agent(
            name="ops", instructions=system_prompt(executor), tools=[code_mode_tool(executor)]
        )
        result = await Runner.run(agent, "How do we retry outbound calls?")

The tool is ``run_code`` with its strict schema and its short description; the SDK text
goes in the agent's ``instructions`` (:func:`system_prompt`), not in the description,
since Chat Completions caps a function's description at 1,024 characters and an SDK is
longer than that. Each invocation runs through :meth:`ptc.CodeExecutor.execute` with the
model's tool call id, so events, sub-call ids and policy see it like any other model call.

What the model gets back, following the SDK's convention for a tool that handles its own
errors (a string the model reads; only infrastructure failures raise and end the run):

* a successful run: its text (what the program printed, then its result), or a list of
  ``ToolOutputText`` and ``ToolOutputImage`` when it passed images back;
* a failed run, or any other failure (malformed arguments, a denial, a limit, a busy
  executor): its ``Error: ...`` text, the same the executor gives every adapter. The SDK
  has no retry budget for tools, so nothing here is retried for the model; bound a loop
  with ``Runner.run(max_turns=...)``.

Contexts a run defers (``ctx.defer_context``) follow the output as text.
"""

from __future__ import annotations

from typing import Any

try:
    from agents import FunctionTool, ToolOutputImage, ToolOutputText
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ptc.adapters.code_mode_tool needs the OpenAI Agents SDK: "
        "pip install 'ptc-runner[openai-agents]'"
    ) from exc

from ptc import RUN_CODE, BatchResult, CodeExecutor, ExecutorConfigError, ModelCall
from ptc._calls import new_call_id

from ._formats import _contexts, _parts

__all__ = ["code_mode_tool"]

ToolOutput = str | list[ToolOutputText | ToolOutputImage]


def code_mode_tool(executor: CodeExecutor, scope: str | None = None) -> FunctionTool:
    """A strict ``FunctionTool`` named ``run_code`` that runs programs on ``executor``.

    Give the agent ``instructions=system_prompt(executor, scope)`` too: that is where the
    SDK of the scope's tools is. The tool does not own the executor: open and close it
    around the agent's runs (``async with CodeExecutor(...) as executor``).

    Raises:
        ExecutorConfigError: the executor is in ``native`` mode (it has no ``run_code``).
        UnknownScopeError: ``scope`` is not one of the registry's scopes.
    """
    if executor.mode == "native":
        raise ExecutorConfigError(
            "code_mode_tool needs an executor in 'code' or 'both' mode, not 'native'"
        )
    executor.registry.check_scope(scope)
    schema = executor.run_code_schema()

    async def run_code(ctx: ToolContext[Any], arguments: str) -> ToolOutput:
        call = ModelCall(
            call_id=ctx.tool_call_id or new_call_id(RUN_CODE), name=RUN_CODE, arguments=arguments
        )
        return tool_output(await executor.execute([call], scope=scope))

    return FunctionTool(
        name=RUN_CODE,
        description=schema["description"],
        params_json_schema=schema["parameters"],
        on_invoke_tool=run_code,
        strict_json_schema=True,
    )


def tool_output(batch: BatchResult) -> ToolOutput:
    """The model-facing output of a one-call batch, in the SDK's tool output types."""
    parts = [*_parts(batch.results[0].result.content), *_contexts(batch)]
    if all(isinstance(part, str) for part in parts):
        return "\n".join(part for part in parts if isinstance(part, str))
    return [
        ToolOutputText(text=part)
        if isinstance(part, str)
        else ToolOutputImage(image_url=part.data_url())
        for part in parts
    ]
