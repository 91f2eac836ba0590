"""pydantic-ai: code mode as a toolset an ``Agent`` mounts.

    async with CodeExecutor(registry) as executor:
        agent = Agent(model, toolsets=[code_mode_toolset(executor)])
        result = await agent.run("How do we retry outbound calls?")

The toolset offers one tool, ``run_code`` (its schema strict), and adds
``system_prompt(executor, scope)`` (the code-only rule, then the SDK of the scope's tools)
to the agent's instructions, so nothing else needs wiring. Each call runs through :meth:`ptc.CodeExecutor.execute` with the model's tool call
id, so events, sub-call ids and policy see it like any other model call.

How a failed run reaches the model:

* **retry** (pydantic-ai's ``ModelRetry``): the program did not compile or raised
  (``CODE_RUN_FAILED`` of kind ``syntax`` or ``exception``, an uncaught ``ToolCallError``
  included), or the call's arguments were malformed (``INVALID_ARGS``). The model gets the
  message and is asked to fix its program; each such failure spends one of the tool's
  retries (``max_retries``, the agent's ``retries`` by default), and when they are spent
  pydantic-ai ends the run (``UnexpectedModelBehavior``), so a model stuck on a broken
  program cannot loop forever.
* **terminal** (``ToolFailed``): every other failure — a limit (``timeout``, ``memory``,
  ``output_limit``, ``tool_call_limit``), a run that was cancelled, crashed or lacked its
  sandbox, a denial of ``run_code`` by policy, a busy executor. The model reads the message
  and adapts (a smaller program, another approach, telling the user); no retry is spent,
  since sending the same program again would meet the same wall. Bound those with
  pydantic-ai's ``UsageLimits``.

A successful run's output is the tool's return: its text, with any image a program passed
back (PNG, JPEG, GIF, WebP) as ``BinaryContent``, and other content described in a line of
text, as in every adapter. Contexts a run defers (``ctx.defer_context``) follow the output
as text in the same tool return.
"""

from __future__ import annotations

import base64
import re
from typing import Any

try:
    from pydantic_ai import (
        AbstractToolset,
        BinaryContent,
        ModelRetry,
        RunContext,
        ToolDefinition,
        ToolFailed,
        ToolsetTool,
    )
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ptc.adapters.code_mode_toolset needs pydantic-ai: pip install 'ptc-runner[pydantic-ai]'"
    ) from exc

from ptc import CODE_RUN_FAILED, RUN_CODE, BatchResult, CodeExecutor, ExecutorConfigError, ModelCall
from ptc._calls import new_call_id
from registry import INVALID_ARGS, ToolFailure

from ._formats import _contexts, _parts, system_prompt

__all__ = ["CodeModeToolset", "code_mode_toolset"]

RETRIED_KINDS = frozenset({"syntax", "exception"})
"""The kinds of a failed run that are the program's own fault, worth a retry."""

_KIND = re.compile(r"code run failed \(([a-z_]+)\)")


# run_code's arguments as pydantic-ai validates them before the call (the pipeline
# validates them again against the same schema).
_ARGS_VALIDATOR = SchemaValidator(
    core_schema.typed_dict_schema(
        {
            "code": core_schema.typed_dict_field(core_schema.str_schema()),
            "description": core_schema.typed_dict_field(core_schema.str_schema()),
        },
        extra_behavior="forbid",
    )
)


class CodeModeToolset(AbstractToolset[Any]):
    """A pydantic-ai toolset with one tool, ``run_code``, backed by a :class:`CodeExecutor`.

    Build it with :func:`code_mode_toolset`. The toolset does not own the executor: open
    and close it around the agent's runs (``async with CodeExecutor(...) as executor``).
    """

    def __init__(
        self,
        executor: CodeExecutor,
        scope: str | None = None,
        *,
        max_retries: int | None = None,
        id: str | None = None,
    ) -> None:
        if executor.mode == "native":
            raise ExecutorConfigError(
                "code_mode_toolset needs an executor in 'code' or 'both' mode, not 'native'"
            )
        executor.registry.check_scope(scope)
        if max_retries is not None and (
            isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0
        ):
            raise ExecutorConfigError(
                f"max_retries must be a non-negative integer or None, got {max_retries!r}"
            )
        self.executor = executor
        self.scope = scope
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_instructions(self, ctx: RunContext[Any]) -> str:
        """The SDK of the scope's tools and the code-only rule, for the agent's instructions."""
        return system_prompt(self.executor, self.scope)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        schema = self.executor.run_code_schema()
        definition = ToolDefinition(
            name=RUN_CODE,
            description=schema["description"],
            parameters_json_schema=schema["parameters"],
            strict=True,
        )
        retries = ctx.max_retries if self.max_retries is None else self.max_retries
        tool = ToolsetTool(
            toolset=self,
            tool_def=definition,
            max_retries=retries,
            args_validator=_ARGS_VALIDATOR,
        )
        return {RUN_CODE: tool}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call = ModelCall(
            call_id=ctx.tool_call_id or new_call_id(RUN_CODE),
            name=name,
            arguments=dict(tool_args),
        )
        batch = await self.executor.execute([call], scope=self.scope)
        result = batch.results[0].result
        if isinstance(result, ToolFailure):
            raise _model_facing_error(result, _contexts(batch))
        return _tool_return(batch)


def code_mode_toolset(
    executor: CodeExecutor,
    scope: str | None = None,
    *,
    max_retries: int | None = None,
    id: str | None = None,
) -> CodeModeToolset:
    """A pydantic-ai toolset that mounts ``executor``'s ``run_code`` for ``scope``'s tools.

    Pass it to ``Agent(toolsets=[...])``: the agent's model gets ``run_code`` and the SDK
    text in its instructions. ``max_retries`` bounds the retries a broken program gets
    (``None``: the agent's ``retries``); see the module docstring for which failures retry.

    Raises:
        ExecutorConfigError: the executor is in ``native`` mode (it has no ``run_code``),
            or ``max_retries`` is not a non-negative integer.
        UnknownScopeError: ``scope`` is not one of the registry's scopes.
    """
    return CodeModeToolset(executor, scope, max_retries=max_retries, id=id)


def run_failure_kind(failure: ToolFailure) -> str | None:
    """The kind of a failed run (``syntax``, ``timeout``, ...), ``None`` for other failures.

    The kind is read from the documented head of a ``CODE_RUN_FAILED`` message,
    ``code run failed (<kind>): ...``.
    """
    info = failure.error.info
    if info is None or info.code != CODE_RUN_FAILED:
        return None
    match = _KIND.match(failure.error.message)
    return match.group(1) if match else None


def _model_facing_error(failure: ToolFailure, contexts: list[str]) -> ModelRetry | ToolFailed:
    message = "\n".join([failure.error.message, *contexts])
    info = failure.error.info
    if run_failure_kind(failure) in RETRIED_KINDS or (
        info is not None and info.code == INVALID_ARGS
    ):
        return ModelRetry(message)
    return ToolFailed(message)


def _tool_return(batch: BatchResult) -> str | list[str | BinaryContent]:
    parts = [*_parts(batch.results[0].result.content), *_contexts(batch)]
    if all(isinstance(part, str) for part in parts):
        return "\n".join(part for part in parts if isinstance(part, str))
    return [
        part
        if isinstance(part, str)
        else BinaryContent(data=base64.b64decode(part.data), media_type=part.media_type)
        for part in parts
    ]
