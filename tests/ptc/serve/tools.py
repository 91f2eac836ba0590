"""The tool set the ``ptc serve`` tests serve (a Python registry, loaded by path).

- ``lookup`` (safe): a canned record per key.
- ``wait`` (safe): waits until cancelled; appends ``started <n>`` and
  ``cancelled <n>`` lines to the file named by ``SERVE_TEST_LOG``.
- ``steps``: reports progress ``steps`` times, then returns.
- ``guarded``: every call is an ``Ask`` (the server turns it into elicitation).
- ``picture``: returns a value with an image block as its content.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import anyio.lowlevel

from registry import Ask, ToolExecution, ToolRegistry, ToolReturn, ToolRunContext

registry = ToolRegistry()


def _log(line: str) -> None:
    path = os.environ.get("SERVE_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


@registry.tool(concurrency_safe=True)
async def lookup(key: str) -> dict[str, Any]:
    """Look a key up."""
    return {"key": key, "length": len(key)}


@registry.tool(concurrency_safe=True)
async def wait(n: int) -> str:
    """Wait until cancelled."""
    _log(f"started {n}")
    try:
        await anyio.sleep_forever()
    finally:
        _log(f"cancelled {n}")
    return "never"


@registry.tool
async def steps(count: int, ctx: ToolRunContext) -> str:
    """Report progress, then return."""
    for step in range(1, count + 1):
        ctx.report_progress(step, count, f"step {step}")
        await anyio.lowlevel.checkpoint()
    return "stepped"


@registry.tool
async def guarded(note: str) -> str:
    """A call that needs the user's approval."""
    return f"approved: {note}"


@registry.tool(output_schema={"type": "string"})
async def picture() -> ToolReturn:
    """A tiny picture."""
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    return ToolReturn("a picture", [{"type": "text", "text": "here:"}, image])


async def _ask_for_guarded(execution: ToolExecution, call_next: Any) -> Any:
    if execution.name == "guarded":
        return Ask("guarded calls need a yes")
    return await call_next()


registry.on_pre_execute(_ask_for_guarded)
