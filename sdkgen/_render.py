"""The SDK text: header, ``JsonValue``, per-tool TypedDicts, namespaces, ``Tools``, ``tools``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from ._bases import share_fields
from ._naming import is_attribute_name, is_tools_member, namespace_of, pascal
from ._schema import Definitions, SchemaRenderer
from ._text import docstring, first_paragraph, py_str
from ._tools import coerce_tool, iter_tools

# dict first: the common case skips the slower ABC check
_MAPPING = (dict, Mapping)

__all__ = [
    "IMPORTS",
    "SDK_INSTRUCTIONS",
    "Sdk",
    "SdkStats",
    "Tool",
    "collect",
    "render_sdk",
    "sdk_stats",
]

#: The fixed usage instructions (the module docstring of the SDK text).
SDK_INSTRUCTIONS = """\
## Writing code for run_code

`run_code` takes two required arguments: `code` — the body of an async Python function — and `description`, a short summary of what the program does. Inside the program:

- Call tools as `await tools.name(args)` with one dict of arguments — subscript access for exotic names: `await tools["my-tool"](args)`. A namespaced tool such as `git.status` is `await tools.git.status(args)`. Every call returns the tool's typed canonical JSON value. Arguments must be plain JSON (dict, list, str, int, float, bool, None).
- `await` works at the top level; do not call `asyncio.run()`. `tools` and `ToolCallError` already exist — do not import or define them.
- A FAILED tool call raises `ToolCallError`, whose `tool_name` identifies the failed tool, whose `message` is human-readable and whose `code` is the failure's stable code (`NOT_FOUND`, `TOOL_TIMEOUT`, `TOOL_DENIED`, …; `None` when it has none) — `try`/`except ToolCallError` to handle it and continue, branching on `e.code` when the failures need different handling.
- Independent read-only calls MAY overlap under `asyncio.gather(...)` (`import asyncio`; safe calls run concurrently; mutating calls run alone, in submission order). Sequence dependent work with `await`.
- Emit results with `return` and/or `print(...)`. ONLY what you print or return comes back to you — intermediate tool results never enter the conversation, so extract just what you need.
- To see an image or audio block a tool returned (`{"type": "image", "data": <base64>, "mimeType": ...}`), `return` it, alone or as an item of the returned list: it comes back to you as the image itself, not as text.

The available tools:"""

IMPORTS = """\
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, NotRequired, Protocol, TypeAlias, TypedDict, overload

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"


class ToolCallError(Exception):
    \"\"\"Raised by `await tools.x(args)` when that tool call failed (denied, invalid, errored).\"\"\"

    tool_name: str  # the tool that failed
    message: str  # what went wrong, human-readable
    code: str | None  # the failure's stable code (NOT_FOUND, TOOL_TIMEOUT, TOOL_DENIED, ...), or None
"""

_METHOD_PREFIX = "    async def "
_ITEM_PREFIX = "    def __getitem__(self, name: Literal["


class SdkStats(TypedDict):
    """Size of an SDK text: what it costs in the prompt."""

    chars: int
    approx_tokens: int
    tools: int


class Tool:
    """One valid tool of a render, with the type names it was given."""

    __slots__ = ("args", "base", "description", "name", "output", "parameters", "result")

    def __init__(self, schema: dict[str, Any]) -> None:
        self.name: str = schema["name"]
        self.description: str = schema["description"]
        self.parameters: Any = schema["parameters"]
        self.output: Any = schema.get("output", _NO_OUTPUT)
        self.base = ""
        self.args = ""
        self.result = "JsonValue"


_NO_OUTPUT = object()


def collect(schemas: Any) -> tuple[list[Tool], int]:
    """Valid tools in lexicographic order, one per name; plus how many were dropped."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    dropped = 0
    try:
        entries = list(iter_tools(schemas) if isinstance(schemas, _MAPPING) else schemas)
    except TypeError:
        entries = []
    for entry in entries:
        tool = coerce_tool(entry)
        if isinstance(tool, str):
            dropped += 1
        else:
            by_name.setdefault(tool["name"], []).append(tool)
    tools: list[Tool] = []
    for name in sorted(by_name):
        same = by_name[name]
        if len(same) > 1:
            # Keep one, chosen by content so that input order cannot matter: equal
            # content written in another key order (which the text shows) included.
            dropped += len(same) - 1
            same.sort(key=lambda tool: (_canonical(tool, True), _canonical(tool, False)))
        tools.append(Tool(same[0]))
    return tools, dropped


def _canonical(value: Any, sort_keys: bool) -> str:
    try:
        return json.dumps(value, sort_keys=sort_keys, default=repr)
    except (ValueError, TypeError, RecursionError):
        return ""


def render_sdk(schemas: Iterable[Any], *, instructions: bool = True) -> str:
    """Render the typed Python SDK a model programs against; never raises.

    Args:
        schemas: tool schemas (registry, MCP, OpenAI or Anthropic spelling);
            malformed entries are dropped, malformed schemas degrade to ``Any``.
        instructions: start with :data:`SDK_INSTRUCTIONS` as the module docstring.

    Returns:
        Python source that compiles and that ``mypy --strict`` accepts; the same
        tool set always gives byte-identical text, whatever the input order.
    """
    tools, dropped = collect(schemas)
    return Sdk(tools, dropped).text(instructions=instructions)


class Sdk:
    """One render of a tool set: its named types and where each tool is declared.

    ``render_sdk`` joins all of it; ``describe`` (discovery) cuts one tool's
    part out of the same render, so both show the same names and text.
    """

    __slots__ = ("defs", "dropped", "layout", "tools")

    def __init__(self, tools: list[Tool], dropped: int) -> None:
        self.tools = tools
        self.dropped = dropped
        self.defs = defs = Definitions()
        _name_types(tools, defs)
        self.layout = _Layout(tools, defs)

    def counted(self) -> str:
        """``117 tools``, and how many entries were left out, if any."""
        count = f"{len(self.tools):,} tool{'' if len(self.tools) == 1 else 's'}"
        if self.dropped:
            count += f"; {self.dropped} malformed or duplicate entries left out"
        return count

    def text(self, *, instructions: bool) -> str:
        """The whole SDK text."""
        parts: list[str] = []
        if instructions:
            parts.append(docstring(SDK_INSTRUCTIONS.split("\n"), ""))
        parts.append(
            f"# Tool SDK ({self.counted()}). Declarations only: at run time `tools` and\n"
            "# `ToolCallError` already exist. Call `await tools.name(args)`.\n"
        )
        parts.append(IMPORTS)
        parts.extend(self.defs.blocks)
        layout = self.layout
        parts.extend(_namespace_class(namespace) for namespace in layout.namespaces)
        parts.append(_tools_class(layout))
        parts.append("tools: Tools\n")
        return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"

    def describe(self, tool: Tool) -> str:
        """One tool's declarations: the types its method uses, then the method.

        Every block is the SDK's own text (see :meth:`text`); the method stands
        under the header line of the class that declares it, and an overloaded
        ``__getitem__`` loses its ``@overload`` line (alone, it is no overload).
        """
        layout = self.layout
        call = layout.calls[tool.name]
        parts = [f"# {py_str(tool.name)}: `await {call}(args)`\n"]
        parts.extend(self.defs.closure([tool.args, tool.result]))
        owner = layout.owners.get(tool.name)
        if owner is not None:
            rest = tool.name[len(owner.name) + 1 :]
            parts.append(f"class {owner.class_name}(Protocol):\n" + _method(rest, tool))
        elif id(tool) in layout.exotic_set:
            parts.append("class Tools(Protocol):\n" + _item(tool, overload=False))
        else:
            parts.append("class Tools(Protocol):\n" + _method(tool.name, tool))
        return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def _name_types(tools: list[Tool], defs: Definitions) -> None:
    """Give every tool its base, argument and result type names, and declare them."""
    bases: set[str] = set()
    for tool in tools:
        base = pascal(tool.name, "Tool")
        n = 2
        unique = base
        while unique in bases:
            unique = f"{base}{n}"
            n += 1
        bases.add(unique)
        tool.base = unique
        tool.args = defs.allocator.allocate(unique + "Args")
    # A titled output schema that several tools share (say, what an MCP tool
    # without an outputSchema returns) is declared once, under its title.
    shared: dict[str, str] = {}
    first: set[int] = set()
    for tool in tools:
        if tool.output is _NO_OUTPUT:
            continue
        key = _shared_key(tool.output)
        if key is None:
            tool.result = defs.allocator.allocate(tool.base + "Result")
            first.add(id(tool))
        elif key in shared:
            tool.result = shared[key]
        else:
            tool.result = shared[key] = defs.allocator.allocate(
                pascal(tool.output["title"], "Result")
            )
            first.add(id(tool))
    for tool in tools:
        _declare(defs, tool.parameters, tool.args, tool.base)
        if id(tool) in first:
            _declare(defs, tool.output, tool.result, tool.base)
    share_fields(defs)


def _shared_key(schema: Any) -> str | None:
    """The identity of a titled output schema (tools with equal ones share one type)."""
    if not isinstance(schema, _MAPPING) or not isinstance(schema.get("title"), str):
        return None
    if not pascal(schema["title"], ""):
        return None
    return _canonical(schema, True) or None


def _declare(defs: Definitions, schema: Any, name: str, base: str) -> None:
    renderer = SchemaRenderer(schema, defs, base)
    try:
        renderer.declare(name)
    except RecursionError:  # pragma: no cover - depth is bounded by the renderer
        defs.emit(name, f"{name}: TypeAlias = dict[str, Any]\n")


class _Namespace:
    """One ``<Namespace>Tools`` protocol: the tools reached as ``tools.<name>.<rest>``."""

    __slots__ = ("class_name", "members", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.class_name = ""
        self.members: list[tuple[str, Tool]] = []  # (rest, tool), in name order


class _Layout:
    """Where each tool is declared: a ``Tools`` method, a namespace's method or a subscript.

    A tool is a ``Tools`` method when its name can be an attribute of ``tools``
    (see ``is_tools_member``: not ``search`` or ``describe``, which are the
    discovery methods). A namespace (``namespace_of``) gets a protocol, and
    ``Tools`` an attribute typed by it, when its name can be such an attribute
    too, no tool has that name (at run time such a tool is callable and a
    namespace at once, which the SDK does not try to say; its namespace's tools
    are declared by full name instead), and at least one of its rests is an
    attribute name. Every other tool of the namespace is declared by full name.
    Every tool is declared exactly once.
    """

    __slots__ = ("calls", "exotic", "exotic_set", "methods", "namespaces", "owners")

    def __init__(self, tools: list[Tool], defs: Definitions) -> None:
        taken = frozenset(defs.allocator.taken)
        names = {tool.name for tool in tools}
        self.methods: list[Tool] = []
        self.exotic: list[Tool] = []
        #: tool name -> how a program calls it, e.g. ``tools.git.log`` or ``tools["my-tool"]``
        self.calls: dict[str, str] = {}
        #: tool name -> the namespace that declares it (namespaced tools only)
        self.owners: dict[str, _Namespace] = {}
        groups: dict[str, _Namespace] = {}
        for tool in tools:  # name order, so each list is in name order too
            if is_tools_member(tool.name, taken):
                self.methods.append(tool)
                self.calls[tool.name] = f"tools.{tool.name}"
                continue
            split = namespace_of(tool.name)
            if (
                split is not None
                and split[0] not in names
                and is_tools_member(split[0], taken)
                and is_attribute_name(split[1], taken)
            ):
                group = groups.get(split[0])
                if group is None:
                    group = groups[split[0]] = _Namespace(split[0])
                group.members.append((split[1], tool))
                self.owners[tool.name] = group
                self.calls[tool.name] = f"tools.{tool.name}"
            else:
                self.exotic.append(tool)
                self.calls[tool.name] = f"tools[{py_str(tool.name)}]"
        self.exotic_set = frozenset(id(tool) for tool in self.exotic)
        self.namespaces = [groups[name] for name in sorted(groups)]
        # Types named like a member of ``Tools`` would be shadowed in its body.
        members = {tool.name for tool in self.methods} | set(groups)
        for namespace in self.namespaces:
            namespace.class_name = defs.allocator.allocate(
                pascal(namespace.name, "Tool") + "Tools", members
            )


def _method(name: str, tool: Tool) -> str:
    """``async def <name>(self, args: ...) -> ...:`` and its docstring, as in the SDK."""
    head = f"{_METHOD_PREFIX}{name}(self, args: {tool.args}) -> {tool.result}:\n"
    return head + _body(tool.description)


def _item(tool: Tool, *, overload: bool) -> str:
    """The ``__getitem__`` signature of a tool reached by subscript, as in the SDK."""
    return (
        ("    @overload\n" if overload else "")
        + f"{_ITEM_PREFIX}{py_str(tool.name)}]) -> "
        + f"Callable[[{tool.args}], Awaitable[{tool.result}]]:\n"
        + f"        # usage: await tools[{py_str(tool.name)}](args)\n"
        + _body(tool.description)
    )


def _namespace_class(namespace: _Namespace) -> str:
    name = namespace.name
    lines = [
        f"class {namespace.class_name}(Protocol):\n",
        f'    """Tools of `{name}`: `await tools.{name}.name(args)`."""\n',
    ]
    for rest, tool in namespace.members:
        lines.append("\n" + _method(rest, tool))
    return "".join(lines)


def _tools_class(layout: _Layout) -> str:
    summary = 'Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`'
    if layout.namespaces:
        summary += "; namespaced tools: `await tools.namespace.name(args)`"
    lines = ["class Tools(Protocol):\n", f'    """{summary}."""\n']
    if layout.namespaces:
        lines.append("\n")
        lines.extend(f"    {ns.name}: {ns.class_name}\n" for ns in layout.namespaces)
    for tool in layout.methods:
        lines.append("\n" + _method(tool.name, tool))
    overload = len(layout.exotic) > 1
    for tool in layout.exotic:
        lines.append("\n" + _item(tool, overload=overload))
    return "".join(lines)


def _body(description: str) -> str:
    doc = first_paragraph(description)
    return docstring(doc, "        ") if doc else "        ...\n"


def sdk_stats(text: str) -> SdkStats:
    """Size of an SDK text: characters, approximate tokens (chars / 4) and tools."""
    tools = 0
    for line in text.splitlines():
        if line.startswith(_METHOD_PREFIX) or line.startswith(_ITEM_PREFIX):
            tools += 1
    return {"chars": len(text), "approx_tokens": (len(text) + 3) // 4, "tools": tools}
