"""## Writing code for run_code

`run_code` takes two required arguments: `code` — the body of an async Python function — and `description`, a short summary of what the program does. Inside the program:

- The tools are listed below by name with one short line each, without their arguments. `await tools.search("query", limit=10)` returns the best matches as a list of `{"name": ..., "summary": ...}` dicts; `await tools.describe("name")` returns a tool's typed signature (its TypedDicts and method) as a str. Any listed tool can be called without describing it; describe it when unsure of its arguments, and print what you need to read.
- Call tools as `await tools.name(args)` with one dict of arguments — subscript access for exotic names: `await tools["my-tool"](args)`. A namespaced tool such as `git.status` is `await tools.git.status(args)`. Every call returns the tool's typed canonical JSON value. Arguments must be plain JSON (dict, list, str, int, float, bool, None).
- `await` works at the top level; do not call `asyncio.run()`. `tools` and `ToolCallError` already exist — do not import or define them.
- A FAILED tool call raises `ToolCallError` with the failed tool's `tool_name`, a human-readable `message` and the failure's stable `code` (`NOT_FOUND`, `TOOL_TIMEOUT`, `TOOL_DENIED`, …; `None` when it has none) — `try`/`except ToolCallError` to handle it and continue, branching on `e.code` when the failures need different handling.
- Independent read-only calls MAY overlap under `asyncio.gather(...)` (`import asyncio`; safe calls run concurrently; mutating calls run alone, in submission order). Sequence dependent work with `await`.
- Emit results with `return` and/or `print(...)`. ONLY what you print or return comes back to you — intermediate tool results never enter the conversation, so extract just what you need.
- To see an image or audio block a tool returned (`{"type": "image", "data": <base64>, "mimeType": ...}`), `return` it, alone or as an item of the returned list: it comes back to you as the image itself, not as text.

The tool index:
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, NotRequired, Protocol, TypeAlias, TypedDict, overload

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"


class ToolCallError(Exception):
    """Raised by `await tools.x(args)` when that tool call failed (denied, invalid, errored)."""

    tool_name: str  # the tool that failed
    message: str  # what went wrong, human-readable
    code: str | None  # the failure's stable code (NOT_FOUND, TOOL_TIMEOUT, TOOL_DENIED, ...), or None

# Tool index (21 tools): `name: summary`; `await tools.describe("name")` shows a tool's arguments.
# GitTools: Takes the class name the git namespace wants.
# tools["_private.x"]: Not a namespace.
# tools["class.x"]: A keyword: not a namespace.
# echo: A plain tool.
# memory: A tool named like a namespace.
# tools["search"]: A tool named like the discovery method: tools["search"] only.
# Tools.* (1 tool)
#   tools["Tools.x"]: A reserved namespace.
# describe.* (1 tool)
#   tools["describe.schema"]: In a namespace named like the discovery method.
# everything.* (1 tool)
#   tools["everything.get-tiny-image"]: No attribute rest: no namespace class.
# git.* (6 tools): `await tools.git.<name>(args)`
#   tools["git.JsonValue"]: A rest named like an SDK type.
#   tools["git.a.b"]: A rest with a dot of its own.
#   log: Shows the commit logs.
#   tools["git.my-tool"]: A rest that is no attribute name.
#   search: A rest named search is still an attribute of its namespace.
#   status: Shows the working tree status.
# list.* (1 tool)
#   tools["list.x"]: A builtin's name as a namespace.
# memory.* (1 tool)
#   tools["memory.read"]: In a namespace that collides with a tool.
# myNs.* (1 tool): `await tools.myNs.<name>(args)`
#   b: Pascal-cases like my_ns.
# my_ns.* (1 tool): `await tools.my_ns.<name>(args)`
#   a: Pascal-cases like myNs.
# time.* (2 tools): `await tools.time.<name>(args)`
#   get_current_time: Current time in a timezone.
#   now: Now.
