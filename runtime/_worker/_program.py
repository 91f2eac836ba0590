"""What a program sees of its worker, shared by the CPython and the Pyodide worker.

Compiling a program as the body of an ``async def``, its ``tools`` object,
``ToolCallError``, the ``print`` writer and the traceback a failure reports: one
definition of the program semantics for both workers. Standard library only and
no package-relative import: the CPython worker imports it as ``runtime._worker._program``,
the Pyodide worker loads this file as the module ``_ptc_program``. What both
ends of the channel check and count alike (lossless JSON, the output limit's
accounting) is in ``_wire``, loaded beside it.

Security warning: this code runs in the same interpreter as the untrusted
program, which can patch it and read its state. It enforces nothing the host
relies on; the host checks every frame and every limit again.
"""

from __future__ import annotations

import ast
import asyncio
import io
import itertools
import keyword
import traceback
from collections.abc import Callable, Iterable, Iterator
from types import CodeType, TracebackType
from typing import Any, NoReturn, Protocol

__all__ = [
    "DESCRIBE_CALL",
    "DISCOVERY_CALLS",
    "MAX_PARTIAL_CHARS",
    "NOTHING",
    "NOTHING_NAME",
    "PROGRAM_FILENAME",
    "PROGRAM_FUNCTION",
    "SEARCH_CALL",
    "LogWriter",
    "ProgramRun",
    "ToolCallError",
    "Tools",
    "compile_program",
    "format_program_exception",
    "is_memory_error",
    "is_namespace_part",
    "memory_message",
    "namespace_of",
    "pack_names",
    "program_module",
    "run_frame",
    "syntax_message",
]

PROGRAM_FILENAME = "<program>"
#: The name of the ``async def`` that holds the program.
PROGRAM_FUNCTION = "<module>"
#: The builtin name of the "no result" sentinel a bare ``return`` yields.
NOTHING_NAME = "__ptc_nothing__"
#: Partial lines are flushed as a line of their own once they get this long.
MAX_PARTIAL_CHARS = 1 << 16


class _Nothing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no result>"


NOTHING = _Nothing()


class ToolCallError(Exception):
    """A tool call failed: ``tool_name`` says which, ``message`` why, ``code`` how.

    ``code`` is the failure's stable code (``NOT_FOUND``, ``TOOL_TIMEOUT``,
    ``TOOL_DENIED``, ...), or ``None`` when the failure has none, so a program
    can branch on it.

    ``str()`` names the tool once: ``<tool_name>: <message>``, or the message
    alone when it already names the tool.
    """

    def __init__(self, tool_name: str, message: str, code: str | None = None) -> None:
        super().__init__(tool_name, message, code)
        self.tool_name = tool_name
        self.message = message
        self.code = code

    def __str__(self) -> str:
        if names_tool(self.message, self.tool_name):
            return self.message
        return f"{self.tool_name}: {self.message}"


def names_tool(message: str, tool_name: str) -> bool:
    """Whether ``message`` names ``tool_name`` as a word of its own (not inside another name)."""
    if not tool_name:
        return False
    start = message.find(tool_name)
    while start >= 0:
        end = start + len(tool_name)
        before = message[start - 1] if start else " "
        after = message[end] if end < len(message) else " "
        if not (_is_name_char(before) or _is_name_char(after)):
            return True
        start = message.find(tool_name, start + 1)
    return False


def _is_name_char(char: str) -> bool:
    return char.isalnum() or char == "_"


# Shown to the program (and in its tracebacks) as a builtin name.
ToolCallError.__module__ = "builtins"


class ProgramRun(Protocol):
    """What the ``tools`` bindings and the ``print`` writer need of a worker's run.

    ``log`` sends one log frame and counts it (``_wire.log_cost``) toward the
    output limit, stopping the program once the count passes it.
    """

    def call(self, name: str, args: Any) -> asyncio.Future[Any]: ...

    def log(self, text: str) -> None: ...


# --------------------------------------------------------------------------- compile


class _TopLevel(ast.NodeTransformer):
    """Rewrite bare ``return`` to "no result" and reject ``yield`` at the top level."""

    def visit_Return(self, node: ast.Return) -> ast.Return:
        if node.value is None:
            node.value = ast.copy_location(ast.Name(id=NOTHING_NAME, ctx=ast.Load()), node)
        return node

    def _yield(self, node: ast.Yield | ast.YieldFrom) -> NoReturn:
        error = SyntaxError("'yield' is not allowed at the top level of the program")
        error.filename = PROGRAM_FILENAME
        error.lineno = node.lineno
        error.offset = node.col_offset + 1
        raise error

    visit_Yield = _yield
    visit_YieldFrom = _yield

    def _scope(self, node: ast.AST) -> ast.AST:
        return node  # nested scopes keep their own return/yield semantics

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _scope


_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _rewrite_bare_returns(statements: list[ast.stmt]) -> None:
    """What :class:`_TopLevel` does for ``return``, walking statements only.

    A ``return`` is always a statement (lambdas and comprehensions cannot hold
    one), so the expressions, most of a tree, need no visit.
    """
    for node in statements:
        if isinstance(node, ast.Return):
            if node.value is None:
                node.value = ast.copy_location(ast.Name(id=NOTHING_NAME, ctx=ast.Load()), node)
        elif not isinstance(node, _NESTED_SCOPES):
            # if/for/while/with/try bodies; except handlers; match cases.
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if inner:
                    _rewrite_bare_returns(inner)
            for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
                _rewrite_bare_returns(part.body)


def compile_program(code: str) -> CodeType:
    """Compile ``code`` as the body of an ``async def`` named ``<module>``.

    Line numbers stay the program's own; a falling-off or bare ``return``
    yields the "no result" sentinel.

    Raises:
        SyntaxError: the program does not compile.
    """
    module = program_module(ast.parse(code, PROGRAM_FILENAME, "exec"), code)
    return compile(module, PROGRAM_FILENAME, "exec", dont_inherit=True)


def program_module(tree: ast.Module, code: str) -> ast.Module:
    """``tree`` (parsed from ``code``) as a module defining ``async def <module>()``.

    ``from __future__`` imports stay at module level; the rest is the function's
    body, with bare ``return`` rewritten and a final ``return`` of the "no
    result" sentinel.

    Raises:
        SyntaxError: ``yield`` at the top level.
    """
    body = tree.body
    hoisted: list[ast.stmt] = []
    while body and isinstance(body[0], ast.ImportFrom) and body[0].module == "__future__":
        hoisted.append(body.pop(0))
    # Keywords are ASCII in the source (look-alike letters make names): without
    # the words, no yield or return node can exist, and the statement-only
    # walk, far cheaper than a visit of every node, is enough.
    if "yield" in code:
        transformer = _TopLevel()
        body = [transformer.visit(statement) for statement in body]
    elif "return" in code:
        _rewrite_bare_returns(body)
    line = (body[-1].end_lineno or 1) if body else 1
    # Explicit end positions: Python 3.13+ rejects a node whose range is inverted.
    where = {"lineno": line, "end_lineno": line, "col_offset": 0, "end_col_offset": 0}
    nothing = ast.Name(id=NOTHING_NAME, ctx=ast.Load(), **where)
    body.append(ast.Return(value=nothing, **where))
    function = ast.AsyncFunctionDef(
        name=PROGRAM_FUNCTION,
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body,
        decorator_list=[],
        returns=None,
        type_comment=None,
        # Every other parsed node has its position: no fix_missing_locations
        # walk over the whole tree.
        lineno=1,
        col_offset=0,
        end_lineno=line,
        end_col_offset=0,
    )
    return ast.Module(body=[*hoisted, function], type_ignores=[])


# --------------------------------------------------------------------------- errors


def _trim_traceback(
    tb: TracebackType | None, internal: Callable[[str], bool]
) -> TracebackType | None:
    kept: list[TracebackType] = []
    while tb is not None:
        if not internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    for current, following in itertools.pairwise(kept):
        current.tb_next = following
    if kept:
        kept[-1].tb_next = None
        return kept[0]
    return None


def format_program_exception(exc: BaseException, *, internal: Callable[[str], bool]) -> str:
    """The traceback of ``exc`` (and its causes) without the frames ``internal`` names.

    ``internal(filename)`` is true for a frame of the worker itself.
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = _trim_traceback(current.__traceback__, internal)
        pending.extend((current.__cause__, current.__context__))
    return "".join(traceback.format_exception(exc)).rstrip("\n")


def syntax_message(exc: SyntaxError) -> str:
    """Where and why ``exc`` happened, with the offending line when known."""
    where = f"line {exc.lineno}" if exc.lineno else "unknown line"
    if exc.offset:
        where += f", column {exc.offset}"
    head = f"SyntaxError at {where}: {exc.msg}"
    if not exc.text:
        return head
    detail = "".join(traceback.format_exception_only(exc)).rstrip("\n")
    return f"{head}\n{detail}"


def memory_message() -> str:
    """The failure message of a ``MemoryError`` whose traceback could not be formatted.

    Reported as an ``exception``: only the host can tell (from the kernel's
    account of the worker's memory) whether it was the memory limit.
    """
    return "MemoryError: out of memory (no memory left to format the traceback)"


def is_memory_error(message: str) -> bool:
    """Whether a failure ``message`` (a traceback) ends in a ``MemoryError`` line."""
    return message[message.rfind("\n") + 1 :].startswith("MemoryError")


# --------------------------------------------------------------------------- tools


def namespace_of(name: str) -> tuple[str, str] | None:
    """``(namespace, rest)`` of a namespaced tool name, or ``None`` for a plain one.

    The naming rule (``sdkgen._naming`` states it again; the packages share no
    code): the text before the FIRST ``"."`` is the namespace when it is a
    non-empty ASCII identifier that is not a keyword and does not start with
    ``"_"``; the rest is everything after that dot. Such a tool is reached as
    ``tools.<namespace>.<rest>`` when the rest obeys the same rule, and always
    as ``tools.<namespace>["<rest>"]`` and ``tools["<namespace>.<rest>"]``.
    """
    namespace, dot, rest = name.partition(".")
    if dot and is_namespace_part(namespace):
        return namespace, rest
    return None


def is_namespace_part(text: str) -> bool:
    """Whether ``text`` can be a namespace, or a rest reached as an attribute."""
    return (
        text.isascii()
        and text.isidentifier()
        and not text.startswith("_")
        and not keyword.iskeyword(text)
    )


class _Binding:
    __slots__ = ("_name", "_run")

    def __init__(self, run: ProgramRun, name: str) -> None:
        self._run = run
        self._name = name

    def __call__(self, args: Any = None, /, **kwargs: Any) -> asyncio.Future[Any]:
        if args is None:
            args = kwargs
        elif kwargs:
            raise TypeError(
                f"tools[{self._name!r}]() takes one dict of arguments or keyword arguments, not both"
            )
        return self._run.call(self._name, args)

    def __repr__(self) -> str:
        return f"<tool {self._name!r}>"


class _Members:
    """The access a namespace gives to its tools; ``_name`` is the namespace.

    Every public attribute name reaches a tool (the class defines none of its
    own), so ``tools.git.status`` is ``tools.git["status"]``.
    """

    __slots__ = ()
    _name: str
    _members: dict[str, _Binding]

    def _missing(self, rest: object) -> str:
        prefix = self._name + "."
        names = ", ".join(prefix + rest for rest in sorted(self._members))
        wanted = repr(prefix + rest) if isinstance(rest, str) else repr(rest)
        return f"no tool named {wanted} in namespace {self._name!r}; available tools: {names}"

    def __getattr__(self, rest: str) -> _Binding:
        if rest.startswith("_"):
            # As the rule says: no tool by attribute, so protocol probes
            # (copy, pickle) never find one, nor recurse on an unset slot.
            raise AttributeError(
                f"no attribute {rest!r}: a tool named with a leading '_' is "
                f"reached by subscript, tools.<namespace>[{rest!r}]"
            )
        try:
            return self._members[rest]
        except KeyError:
            raise AttributeError(self._missing(rest)) from None

    def __getitem__(self, rest: str) -> _Binding:
        try:
            return self._members[rest]
        except (KeyError, TypeError):
            raise KeyError(self._missing(rest)) from None

    def __contains__(self, rest: object) -> bool:
        return rest in self._members

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._members))

    def __len__(self) -> int:
        return len(self._members)

    def __dir__(self) -> list[str]:
        return sorted(rest for rest in self._members if is_namespace_part(rest))


class _Namespace(_Members):
    """``tools.git``: the tools named ``git.<rest>``, by attribute or subscript."""

    __slots__ = ("_members", "_name")

    def __init__(self, name: str, members: dict[str, _Binding]) -> None:
        self._name = name
        self._members = members

    def __repr__(self) -> str:
        return f"<tools.{self._name}: {', '.join(sorted(self._members))}>"


class _NamespaceBinding(_Binding, _Members):
    """A tool named like a namespace: callable as that tool, and its namespace too."""

    __slots__ = ("_members",)

    def __init__(self, run: ProgramRun, name: str, members: dict[str, _Binding]) -> None:
        super().__init__(run, name)
        self._members = members

    def __repr__(self) -> str:
        return f"<tool {self._name!r} and tools.{self._name}: {', '.join(sorted(self._members))}>"


#: What separates the tool names :func:`pack_names` packs; no tool name holds it
#: (the host refuses one, as the registry refuses every control character).
NAME_SEPARATOR = "\n"


#: The calls the ``tools`` object's own methods make: ``tools.search(query,
#: limit=...)`` sends ``{"query", "limit"}``, ``tools.describe(name)`` sends
#: ``{"name"}``. No tool has these names (they hold :data:`NAME_SEPARATOR`), so
#: the host answers them itself (discovery) or fails them; they count as calls.
SEARCH_CALL = NAME_SEPARATOR + "search"
DESCRIBE_CALL = NAME_SEPARATOR + "describe"
DISCOVERY_CALLS = frozenset((SEARCH_CALL, DESCRIBE_CALL))


def pack_names(ordered: Iterable[str]) -> str:
    """Tool names, sorted and distinct, as :class:`Tools` keeps them: each between two newlines.

    The run frame carries them so (the host packs them once per set of names),
    and the worker keeps the one string it decodes instead of a string per
    tool: a run costs about the same with 10 visible tools as with 5,000.
    """
    names = list(ordered)
    return NAME_SEPARATOR + NAME_SEPARATOR.join(names) + NAME_SEPARATOR if names else NAME_SEPARATOR


def run_frame(
    code: str,
    tools: object,
    *,
    max_output_bytes: int,
    max_tool_calls: int,
    max_message_bytes: int,
    compiled: bool = False,
) -> dict[str, object]:
    """The frame that starts a run, as every worker reads it.

    ``tools`` is :func:`pack_names`'s string (or its JSON, encoded once by the
    host). ``compiled``: the program's code object follows the frame (the host
    compiled it; a length-prefixed ``marshal`` payload).
    """
    frame: dict[str, object] = {
        "type": "run",
        "code": code,
        "tools": tools,
        "max_output_bytes": max_output_bytes,
        "max_tool_calls": max_tool_calls,
        "max_message_bytes": max_message_bytes,
    }
    if compiled:
        frame["compiled"] = True
    return frame


class Tools:
    """The program's ``tools`` object: ``tools.name(...)`` or ``tools["any-name"](...)``.

    A tool named ``<namespace>.<rest>`` (see :func:`namespace_of`) is also
    ``tools.<namespace>.<rest>(...)`` and ``tools.<namespace>["<rest>"](...)``.
    ``in``, ``len`` and iteration count full tool names. ``await
    tools.search(query, limit=10)`` and ``await tools.describe(name)`` are
    its own methods: calls named :data:`SEARCH_CALL` and :data:`DESCRIBE_CALL`,
    which the host answers (a failure raises ``ToolCallError`` naming
    ``tools.search`` or ``tools.describe``).

    ``names`` is the names' :func:`pack_names` string (as the run frame has
    it), or the names themselves. A lookup is a search of that string, and a
    namespace's tools are one stretch of it (they sort together); a binding or
    a namespace is made on first use and kept.
    """

    __slots__ = ("_bindings", "_names", "_namespaces", "_run")

    def __init__(self, run: ProgramRun, names: str | Iterable[str]) -> None:
        self._run = run
        self._names = names if isinstance(names, str) else pack_names(sorted(set(names)))
        self._bindings: dict[str, _Binding] = {}
        self._namespaces: dict[str, _Namespace | None] = {}

    def _listed(self) -> list[str]:
        return self._names[1:-1].split(NAME_SEPARATOR) if len(self._names) > 1 else []

    def _has(self, name: str) -> bool:
        return (
            NAME_SEPARATOR not in name and f"{NAME_SEPARATOR}{name}{NAME_SEPARATOR}" in self._names
        )

    def _members(self, namespace: str) -> dict[str, _Binding] | None:
        """The tools of ``namespace`` by their rest, or ``None`` when it is none."""
        if not is_namespace_part(namespace):
            return None
        names, prefix = self._names, namespace + "."
        start = names.find(NAME_SEPARATOR + prefix)
        if start < 0:
            return None
        members: dict[str, _Binding] = {}
        start += 1
        while names.startswith(prefix, start):
            end = names.index(NAME_SEPARATOR, start)
            name = names[start:end]
            binding = self._bindings.get(name)
            if binding is None:  # (a dotted name is no namespace: a plain binding)
                binding = self._bindings[name] = _Binding(self._run, name)
            members[name[len(prefix) :]] = binding
            start = end + 1
        return members

    def _binding(self, name: object) -> _Binding:
        """The binding of tool ``name``; ``KeyError`` if there is no such tool."""
        try:
            return self._bindings[name]  # type: ignore[index]
        except (KeyError, TypeError):
            pass
        if not isinstance(name, str) or not self._has(name):
            raise KeyError(name)
        # A tool named like a namespace is that namespace too: one object for both.
        members = self._members(name)
        binding = (
            _Binding(self._run, name)
            if members is None
            else _NamespaceBinding(self._run, name, members)
        )
        self._bindings[name] = binding
        return binding

    def _namespace(self, name: str) -> _Namespace | None:
        try:
            return self._namespaces[name]
        except KeyError:
            members = self._members(name)
            namespace = self._namespaces[name] = (
                None if members is None else _Namespace(name, members)
            )
            return namespace

    def _missing(self, name: object) -> str:
        names = ", ".join(self._listed()) or "(none)"
        return f"no tool named {name!r}; available tools: {names}"

    # Discovery: methods of the object itself, so a tool named ``search`` or
    # ``describe`` (or a namespace so named) is reached by subscript only.

    async def search(self, query: str, limit: int = 10) -> Any:
        """The tools that best match ``query``: ``[{"name", "summary"}]``, best first."""
        if not isinstance(query, str):
            raise TypeError(f"tools.search() takes a str query, got {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"tools.search() takes an int limit, got {type(limit).__name__}")
        return await self._discover(SEARCH_CALL, "tools.search", {"query": query, "limit": limit})

    async def describe(self, name: str) -> Any:
        """The typed signature text of tool ``name`` (its TypedDicts and its method)."""
        if not isinstance(name, str):
            raise TypeError(f"tools.describe() takes a str tool name, got {type(name).__name__}")
        return await self._discover(DESCRIBE_CALL, "tools.describe", {"name": name})

    async def _discover(self, call: str, shown: str, args: dict[str, Any]) -> Any:
        try:
            return await self._run.call(call, args)
        except ToolCallError as exc:  # named as the program called it
            raise ToolCallError(shown, exc.message, exc.code) from None

    def __getattr__(self, name: str) -> _Binding | _Namespace:
        try:
            return self._binding(name)
        except KeyError:
            namespace = self._namespace(name)
        if namespace is None:
            raise AttributeError(self._missing(name))
        return namespace

    def __getitem__(self, name: str) -> _Binding:
        try:
            return self._binding(name)
        except KeyError:
            raise KeyError(self._missing(name)) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._has(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._listed())

    def __len__(self) -> int:
        return self._names.count(NAME_SEPARATOR) - 1 if self._names else 0

    def __dir__(self) -> list[str]:
        shown: set[str] = set()
        for name in self._listed():
            split = namespace_of(name)
            if name.isidentifier():
                shown.add(name)
            elif split is not None:
                shown.add(split[0])
        return sorted(shown)

    def __repr__(self) -> str:
        return f"<tools: {', '.join(self._listed())}>"


# --------------------------------------------------------------------------- output


class LogWriter(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` of the program: complete lines become log frames.

    A partial line longer than :data:`MAX_PARTIAL_CHARS` goes as a line of its
    own; a newline written right after it ends that line (``print`` writes
    its text, then the newline), it does not add an empty one.
    """

    def __init__(self, run: ProgramRun) -> None:
        super().__init__()
        self._run = run
        self._partial: list[str] = []
        self._partial_chars = 0
        # A long partial line went out, and no newline has ended it yet.
        self._sent_open_line = False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if type(text) is not str:
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        size = len(text)
        if self._sent_open_line and text:
            self._sent_open_line = False
            if text[0] == "\n":
                text = text[1:]  # it ends the line already sent
        if "\n" in text:
            head, _, tail = text.rpartition("\n")
            if self._partial:
                head = "".join(self._partial) + head
                self._partial.clear()
                self._partial_chars = 0
            self._run.log(head)
            if tail:
                self._partial.append(tail)
                self._partial_chars = len(tail)
        elif text:
            self._partial.append(text)
            self._partial_chars += len(text)
            if self._partial_chars > MAX_PARTIAL_CHARS:
                self.drain()
                self._sent_open_line = True
        return size

    def drain(self) -> None:
        """Send a pending partial line as a line of its own."""
        if self._partial:
            text = "".join(self._partial)
            self._partial.clear()
            self._partial_chars = 0
            self._run.log(text)
