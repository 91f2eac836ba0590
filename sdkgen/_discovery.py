"""Discovery mode: a compact index of the tools, and search/describe over them.

For a large tool set the ``tools:sdk`` section carries only :meth:`ToolCatalog.index_text`
(the usage rules, the small header and the tool names with one short line each);
the program finds the rest with ``await tools.search(query)`` and
``await tools.describe(name)``, which ``ptc`` answers with :meth:`ToolCatalog.search`
and :meth:`ToolCatalog.describe`.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Iterable
from typing import Any

from ._naming import namespace_of
from ._render import IMPORTS, Sdk, Tool, collect
from ._search import SearchIndex, terms
from ._text import docstring, first_sentence, fit, py_str

__all__ = ["DISCOVERY_INSTRUCTIONS", "ToolCatalog", "render_discovery"]

#: The fixed usage instructions of discovery mode (the module docstring of its text).
DISCOVERY_INSTRUCTIONS = """\
## Writing code for run_code

`run_code` takes two required arguments: `code` — the body of an async Python function — and `description`, a short summary of what the program does. Inside the program:

- The tools are listed below by name with one short line each, without their arguments. `await tools.search("query", limit=10)` returns the best matches as a list of `{"name": ..., "summary": ...}` dicts; `await tools.describe("name")` returns a tool's typed signature (its TypedDicts and method) as a str. Any listed tool can be called without describing it; describe it when unsure of its arguments, and print what you need to read.
- Call tools as `await tools.name(args)` with one dict of arguments — subscript access for exotic names: `await tools["my-tool"](args)`. A namespaced tool such as `git.status` is `await tools.git.status(args)`. Every call returns the tool's typed canonical JSON value. Arguments must be plain JSON (dict, list, str, int, float, bool, None).
- `await` works at the top level; do not call `asyncio.run()`. `tools` and `ToolCallError` already exist — do not import or define them.
- A FAILED tool call raises `ToolCallError` with the failed tool's `tool_name`, a human-readable `message` and the failure's stable `code` (`NOT_FOUND`, `TOOL_TIMEOUT`, `TOOL_DENIED`, …; `None` when it has none) — `try`/`except ToolCallError` to handle it and continue, branching on `e.code` when the failures need different handling.
- Independent read-only calls MAY overlap under `asyncio.gather(...)` (`import asyncio`; safe calls run concurrently; mutating calls run alone, in submission order). Sequence dependent work with `await`.
- Emit results with `return` and/or `print(...)`. ONLY what you print or return comes back to you — intermediate tool results never enter the conversation, so extract just what you need.
- To see an image or audio block a tool returned (`{"type": "image", "data": <base64>, "mimeType": ...}`), `return` it, alone or as an item of the returned list: it comes back to you as the image itself, not as text.

The tool index:"""

#: Characters the index itself may take (about 5,000 tokens) before it shows less:
#: with the instructions and header the whole text stays under about 5,700 tokens.
INDEX_BUDGET = 20_000
_MAX_LIMIT = 100
_MAX_QUERY = 1_000
_WIDTH = 100  # a wrapped line of names
_EXAMPLES = 3
_SUMMARY = 100  # a search result's summary
_INDEX_SUMMARY = 72  # shorter than a search result's summary: the index is for every tool
_FIRST_WORD = re.compile(r"[A-Za-z][a-z0-9]*|[^A-Za-z_.\-]+")


class ToolCatalog:
    """The visible tools of one tool set, for discovery: search, describe and the index.

    Built once per tool set from the same input as ``render_sdk`` (the same
    entries are dropped); immutable. The search weights are computed here; the
    typed render that ``describe`` and ``index_text`` cut from is made on first
    use (the same text as ``render_sdk`` of these schemas) and kept.
    """

    __slots__ = (
        "_by_name",
        "_dropped",
        "_index",
        "_lock",
        "_names",
        "_sdk",
        "_short",
        "_summaries",
        "_text",
        "_tools",
    )

    def __init__(self, schemas: Iterable[Any]) -> None:
        tools, dropped = collect(schemas)
        self._tools = tools
        self._dropped = dropped
        self._by_name = {tool.name: tool for tool in tools}
        self._names = tuple(self._by_name)
        sentences = [first_sentence(tool.description) for tool in tools]
        self._summaries = tuple(fit(sentence, _SUMMARY) for sentence in sentences)
        self._short = tuple(fit(sentence, _INDEX_SUMMARY) for sentence in sentences)
        self._index = SearchIndex([(t.name, t.description, t.parameters) for t in tools])
        self._lock = threading.Lock()
        self._sdk: Sdk | None = None
        self._text: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Every tool's name, sorted."""
        return self._names

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._by_name

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"<ToolCatalog of {len(self._tools)} tools>"

    def search(self, query: str, limit: int = 10) -> list[dict[str, str]]:
        """The tools that best match ``query``: ``[{"name", "summary"}]``, best first.

        Ranks over names (snake_case, camelCase, dots and dashes split),
        descriptions and parameters (BM25); ties go by name, and tools that
        match no term of the query are left out.

        Raises:
            TypeError: ``query`` is not a str or ``limit`` not an int.
            ValueError: ``query`` has no searchable word, is too long, or
                ``limit`` is not between 1 and 100.
        """
        if not isinstance(query, str):
            raise TypeError(
                f"tools.search() takes the query as a str, got {type(query).__name__}: "
                'for example await tools.search("create issue")'
            )
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(
                f"tools.search() takes limit as an int from 1 to {_MAX_LIMIT}, "
                f"got {type(limit).__name__}"
            )
        if not 1 <= limit <= _MAX_LIMIT:
            raise ValueError(f"tools.search() takes limit from 1 to {_MAX_LIMIT}, got {limit}")
        if len(query) > _MAX_QUERY:
            raise ValueError(
                f"tools.search() takes a query of at most {_MAX_QUERY:,} characters "
                f"(got {len(query):,}): search for a few keywords"
            )
        if not terms(query) and query.strip() not in self._by_name:
            raise ValueError(
                f"tools.search() found no word to search for in {query!r}: "
                'give a few keywords, for example await tools.search("list pull requests")'
            )
        tools, summaries = self._tools, self._summaries
        return [
            {"name": tools[i].name, "summary": summaries[i]}
            for i in self._index.search(query, limit)
        ]

    def describe(self, name: str) -> str:
        """The typed signature of one tool: the TypedDicts its method uses and the method.

        The same names and text as ``render_sdk`` of this tool set, with a first
        comment line saying how the tool is called. Byte-stable for an
        unchanged tool set.

        Raises:
            TypeError: ``name`` is not a str.
            KeyError: no tool has that name; the message names the closest ones.
        """
        if not isinstance(name, str):
            raise TypeError(
                f"tools.describe() takes a tool name as a str, got {type(name).__name__}"
            )
        tool = self._by_name.get(name)
        if tool is None:
            tool = self._by_name.get(_strip_call(name))
        if tool is None:
            raise KeyError(self._unknown(name))
        return self._render().describe(tool)

    def index_text(self) -> str:
        """The discovery-mode ``tools:sdk`` section: instructions, header and index."""
        text = self._text
        if text is None:
            sdk = self._render()
            parts = [
                docstring(DISCOVERY_INSTRUCTIONS.split("\n"), ""),
                IMPORTS,
                _index(sdk, self._short),
            ]
            text = self._text = "\n\n".join(p.rstrip("\n") for p in parts) + "\n"
        return text

    def _render(self) -> Sdk:
        sdk = self._sdk
        if sdk is None:
            with self._lock:  # one render, whichever thread asks first
                sdk = self._sdk
                if sdk is None:
                    sdk = self._sdk = Sdk(self._tools, self._dropped)
        return sdk

    def _unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, self._by_name, n=5, cutoff=0.6)
        if not close:
            found = self._index.search(name, 5) if len(name) <= _MAX_QUERY and terms(name) else []
            close = [self._tools[i].name for i in found]
        hint = (
            f"; the closest: {', '.join(close)}"
            if close
            else '; find tools with await tools.search("keywords")'
        )
        return f"no tool named {name!r} among the {len(self._tools)} visible tools{hint}"


def render_discovery(schemas: Iterable[Any]) -> str:
    """The discovery-mode ``tools:sdk`` section; ``ToolCatalog(schemas).index_text()``."""
    return ToolCatalog(schemas).index_text()


def _strip_call(name: str) -> str:
    """``tools.git.log`` or ``tools["my-tool"]`` (as the index shows them) -> the name."""
    name = name.strip()
    if name.startswith('tools["') and name.endswith('"]'):
        return name[7:-2]
    if name.startswith("tools."):
        return name[6:]
    return name


# ---------------------------------------------------------------------- the index


class _Group:
    __slots__ = ("call", "entries", "key")

    def __init__(self, key: str, call: str) -> None:
        self.key = key  # the namespace, or "" for tools without one
        self.call = call  # "tools.git" when its tools are attributes of a namespace
        self.entries: list[tuple[str, int]] = []  # (label, tool position)


def _groups(sdk: Sdk) -> list[_Group]:
    """Tools by namespace (tools without one first), each with how it is written."""
    layout = sdk.layout
    plain = _Group("", "")
    groups: dict[str, _Group] = {}
    for i, tool in enumerate(sdk.tools):
        owner = layout.owners.get(tool.name)
        split = namespace_of(tool.name)
        if split is None:
            group = plain
        else:
            group = groups.get(split[0]) or groups.setdefault(
                split[0], _Group(split[0], f"tools.{split[0]}" if owner else "")
            )
            if owner is not None and not group.call:
                group.call = f"tools.{owner.name}"
        group.entries.append((_label(tool, layout.calls[tool.name], owner is not None), i))
    ordered = [groups[key] for key in sorted(groups)]
    return [plain, *ordered] if plain.entries else ordered


def _label(tool: Tool, call: str, namespaced: bool) -> str:
    if namespaced:
        return tool.name.partition(".")[2]  # under its namespace's heading
    if call.startswith("tools["):
        return call
    return tool.name


def _heading(group: _Group) -> str:
    if not group.key:
        return ""
    where = f": `await {group.call}.<name>(args)`" if group.call else ""
    return f"# {group.key}.* ({_tools(len(group.entries))}){where}\n"


def _index(sdk: Sdk, summaries: tuple[str, ...]) -> str:
    """The index lines: one line per tool, else names only, else groups with counts."""
    groups = _groups(sdk)
    counted = sdk.counted()
    help_line = '`await tools.describe("name")` shows a tool\'s arguments'
    lines = [f"# Tool index ({counted}): `name: summary`; {help_line}.\n"]
    for group in groups:
        indent = "#   " if group.key else "# "
        lines.append(_heading(group))
        for label, i in group.entries:
            text = summaries[i]
            lines.append(f"{indent}{label}: {text}\n" if text else f"{indent}{label}\n")
    text = "".join(lines)
    if len(text) <= INDEX_BUDGET:
        return text
    lines = [
        f"# Tool index ({counted}), names only: `await tools.search(query)` finds tools, "
        f"{help_line}.\n"
    ]
    for group in groups:
        lines.append(_heading(group))
        indent = "#   " if group.key else "# "
        lines.extend(_wrap([label for label, _ in group.entries], indent))
    text = "".join(lines)
    if len(text) <= INDEX_BUDGET:
        return text
    return _counts(sdk, groups)


def _wrap(labels: list[str], indent: str) -> list[str]:
    lines: list[str] = []
    line = ""
    for label in labels:
        if line and len(line) + len(label) + 2 > _WIDTH:
            lines.append(line + ",\n")
            line = ""
        line = f"{line}, {label}" if line else indent + label
    if line:
        lines.append(line + "\n")
    return lines


def _counts(sdk: Sdk, groups: list[_Group]) -> str:
    """Too many tools to list: the groups, their counts and a few example names."""
    rows: list[tuple[str, int, list[str]]] = []  # (title, count, labels)
    for group in groups:
        if group.key:
            rows.append((_heading(group)[2:-1], len(group.entries), [e[0] for e in group.entries]))
            continue
        # tools without a namespace: by the first word of their names
        by_word: dict[str, list[str]] = {}
        for label, _ in group.entries:
            by_word.setdefault(_first_word(label), []).append(label)
        for word in sorted(by_word):
            names = by_word[word]
            rows.append((f"{word}* ({_tools(len(names))})", len(names), names))
    head = (
        f"# Tool index ({sdk.counted()}) in {len(rows):,} groups, too many to list: find them with "
        '`await tools.search("keywords")`, then `await tools.describe("name")`.\n'
    )
    for examples in (_EXAMPLES, 0):
        lines = [head]
        for title, _, names in rows:
            shown = _spread(names, examples)
            lines.append(f"# {title}; e.g. {', '.join(shown)}\n" if shown else f"# {title}\n")
        text = "".join(lines)
        if len(text) <= INDEX_BUDGET:
            return text
    # even the headings are too many: the largest groups, then how many more
    order = sorted(range(len(rows)), key=lambda r: (-rows[r][1], r))
    kept: set[int] = set()
    size = len(head)
    for r in order:
        line = f"# {rows[r][0]}\n"
        if size + len(line) > INDEX_BUDGET - 200:
            break
        kept.add(r)
        size += len(line)
    lines = [head] + [f"# {rows[r][0]}\n" for r in sorted(kept)]
    rest = len(rows) - len(kept)
    lines.append(f"# … and {rest:,} more groups (search finds their tools).\n")
    return "".join(lines)


def _tools(count: int) -> str:
    return f"{count:,} tool{'' if count == 1 else 's'}"


def _first_word(label: str) -> str:
    """``get_issue`` -> ``get_``, ``getIssue`` -> ``get``, ``tools["my-tool"]`` -> ``my-``."""
    name = label[7:-2] if label.startswith('tools["') else label
    match = _FIRST_WORD.match(name)
    if match is None:
        return py_str(name[:1]) if name else '""'
    word = match.group()
    following = name[match.end() : match.end() + 1]
    return word + following if following and following in "_-." else word


def _spread(names: list[str], count: int) -> list[str]:
    """``count`` names spread over the (sorted) list: the first, then evenly apart."""
    if count <= 0 or not names:
        return []
    if len(names) <= count:
        return names
    return [names[k * len(names) // count] for k in range(count)]
