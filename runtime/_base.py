"""The abstract worker backend and the values that cross its interface.

A :class:`Runtime` runs one untrusted program per :meth:`Runtime.run` call and
returns one :class:`RunOutcome`. The program is the body of an ``async def``;
its ``tools`` object offers one binding per name in ``tool_names``; each
binding call is answered by the caller-supplied ``call_tool``. So are the
object's own ``tools.search(query, limit=10)`` and ``tools.describe(name)``:
``call_tool`` receives them as ``SEARCH_CALL`` ``{"query", "limit"}`` and
``DESCRIBE_CALL`` ``{"name"}``, names no tool can have; a caller that offers no
discovery answers them with a failure.

Security warning: the program is hostile. A backend must never let it reach
host objects, files, network, environment or processes, and must enforce every
:class:`Limits` field on the host side as well as in the worker. It fails
closed: without a protective layer it refuses to run (outcome ``sandbox``)
unless the caller chose ``best-effort`` explicitly, and every outcome says what
isolation the run had (:class:`Isolation`).
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, Self, TypeAlias, TypeVar

import anyio
from anyio.abc import TaskGroup

from ._exceptions import RuntimeClosedError
from ._worker._program import NAME_SEPARATOR

__all__ = [
    "NO_ISOLATION",
    "CallTool",
    "CancelSignal",
    "FailureKind",
    "Isolation",
    "IsolationMode",
    "Limits",
    "RunOutcome",
    "Runtime",
    "ToolAnswer",
    "ToolNames",
    "check_tool_names",
]

T = TypeVar("T")

FailureKind: TypeAlias = Literal[
    "syntax",
    "exception",
    "timeout",
    "memory",
    "output_limit",
    "tool_call_limit",
    "crashed",
    "cancelled",
    "protocol",
    "sandbox",
]

#: How a backend treats a protective layer it cannot have: ``strict`` refuses to
#: run (the outcome is ``sandbox``), ``best-effort`` runs with the layers there
#: are (chosen explicitly), ``none`` means no isolation at all (a test fake).
IsolationMode: TypeAlias = Literal["strict", "best-effort", "none"]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Isolation:
    """The isolation one run had, for the caller to log or check.

    Attributes:
        mode: ``"strict"`` (the default of every backend: a run starts only with
            every layer the machine must provide), ``"best-effort"`` (an explicit
            opt-in: the run went ahead without the layers in ``missing``) or
            ``"none"`` (no isolation: an in-process fake, or a backend that
            does not report it).
        runtime: the backend's registry name (``"subprocess"``, ``"pyodide"``).
        missing: layers this machine could not provide (only ever non-empty
            in ``best-effort`` mode); ``ptc doctor`` says why.
        off: layers switched off by configuration (``layers=`` of the backend).
    """

    mode: IsolationMode
    runtime: str = ""
    missing: tuple[str, ...] = ()
    off: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``mode``, ``runtime``, ``missing``, ``off``) for logs and events."""
        return {
            "mode": self.mode,
            "runtime": self.runtime,
            "missing": list(self.missing),
            "off": list(self.off),
        }


#: What an outcome says when its backend did not report its isolation: nothing is claimed.
NO_ISOLATION: Final = Isolation(mode="none")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Hard limits of one run; every field is bounded by default.

    Attributes:
        timeout: wall-clock seconds for the whole run, time in tool calls included.
        cpu_seconds: CPU seconds the worker may burn.
        memory_bytes: address-space cap of the worker process.
        max_output_bytes: cap on the combined serialized logs, result and failure
            message of the run (the outer payload), counted as UTF-8 bytes as JSON
            escapes them, plus 4 bytes per log line, plus the final frame.
        max_tool_calls: tool calls one run may make.
        max_message_bytes: largest single frame either side may send.
    """

    timeout: float = 60.0
    cpu_seconds: float = 60.0
    memory_bytes: int = 1024 * MiB
    max_output_bytes: int = 64 * MiB
    max_tool_calls: int = 10_000
    max_message_bytes: int = 64 * MiB

    def __post_init__(self) -> None:
        for name in (
            "timeout",
            "cpu_seconds",
            "memory_bytes",
            "max_output_bytes",
            "max_tool_calls",
            "max_message_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


_DEFAULT_LIMITS: Final = Limits()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAnswer:
    """The host's answer to one tool call from the program.

    A success carries the tool's JSON value; a failure carries the message (and
    the failure's stable code, if it has one) that the program receives as
    ``ToolCallError(tool_name, message, code)``.
    """

    ok: bool
    value: Any = None
    message: str = ""
    code: str | None = None

    @classmethod
    def success(cls, value: Any) -> ToolAnswer:
        return cls(ok=True, value=value)

    @classmethod
    def failure(cls, message: str, code: str | None = None) -> ToolAnswer:
        return cls(ok=False, message=message, code=code)


#: ``async (tool_name, args) -> ToolAnswer``; may be awaited many times concurrently.
CallTool: TypeAlias = Callable[[str, Any], Awaitable[ToolAnswer]]


class CancelSignal(Protocol):
    """What :meth:`Runtime.run` needs of a cancellation signal (``registry.AbortSignal`` fits)."""

    @property
    def aborted(self) -> bool: ...

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """The single outcome of one run.

    Attributes:
        logs: captured output lines (``print`` and stderr), up to the failure.
        result: the program's return value (lossless JSON) when ``has_result``.
        has_result: ``False`` when the program returned nothing (or failed).
        kind: ``None`` on success, else the failure kind.
        message: for a failure, what a model can act on (for ``exception``: type,
            message and a traceback in the program's own line numbers).
        tool_calls: how many tool calls the program made.
        isolation: the isolation the run had (its mode, and the layers it ran
            without); :data:`NO_ISOLATION` unless the backend reports it.
    """

    logs: list[str] = field(default_factory=list)
    result: Any = None
    has_result: bool = False
    kind: FailureKind | None = None
    message: str = ""
    tool_calls: int = 0
    isolation: Isolation = NO_ISOLATION

    @property
    def ok(self) -> bool:
        return self.kind is None

    @classmethod
    def failure(
        cls, kind: FailureKind, message: str, *, logs: Sequence[str] = (), tool_calls: int = 0
    ) -> RunOutcome:
        return cls(kind=kind, message=message, logs=list(logs), tool_calls=tool_calls)


_IN_ORDER = "in order"  # the key of ToolNames.in_order's value


#: How many lists of tool names a runtime remembers the check of (see ``Runtime._checked_names``).
_RECENT_NAMES: Final = 8


class ToolNames(frozenset[str]):
    """The checked tool names of a run, as :meth:`Runtime._run` receives them.

    A frozenset of strings; a backend may keep what it derives from them (their
    wire form) on the value, so that the same names, passed again, cost nothing.
    """

    __slots__ = ("_derived",)

    def __init__(self, names: Iterable[str] = ()) -> None:
        super().__init__()
        self._derived: dict[str, Any] = {}

    def in_order(self) -> list[str]:
        """The names sorted, computed once (from the caller's list, when it came sorted)."""
        return self.derived(_IN_ORDER, sorted)

    def derived(self, key: str, make: Callable[[ToolNames], T]) -> T:
        """``make(self)``, computed once per ``key`` and kept on this value."""
        try:
            return self._derived[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._derived[key] = make(self)
            return value


def check_tool_names(tool_names: Iterable[object]) -> ToolNames:
    """``tool_names`` as :class:`ToolNames`.

    Raises:
        TypeError: a tool name is not a string (a caller bug, not the program's).
        ValueError: a tool name holds a line break (the workers' separator).
    """
    if isinstance(tool_names, ToolNames):
        return tool_names
    names = ToolNames(tool_names)  # type: ignore[arg-type]
    # The distinct types first (a pass in C), each name only when one is wrong.
    if not all(issubclass(kind, str) for kind in set(map(type, names))):
        wrong = next(name for name in names if not isinstance(name, str))
        raise TypeError(f"tool names must be str, got {wrong!r}")
    if NAME_SEPARATOR in "".join(names):
        wrong = next(name for name in names if NAME_SEPARATOR in name)
        raise ValueError(f"a tool name holds no line break, got {wrong!r}")
    if isinstance(tool_names, (list, tuple)):
        # Sorting a list that comes sorted is one pass; sorting the set is not.
        ordered = sorted(tool_names)
        if len(ordered) == len(names):  # (no name twice)
            names._derived[_IN_ORDER] = ordered
    return names


class Runtime(abc.ABC):
    """An isolated worker backend, with one lifecycle (trio's ``AsyncResource``).

    Use it as an async context manager, or call :meth:`aclose` when done: the
    two are the same (entering does nothing, leaving closes). Once closed, a
    runtime refuses to run (:class:`~runtime.RuntimeClosedError`).

    A backend implements :meth:`_run` (one run, its arguments already checked
    and its limits chosen) and, if it holds resources, :meth:`_aclose`.
    """

    #: Registry name of the backend (``"subprocess"``, ``"pyodide"``).
    name: str = ""
    # (Class defaults, so that a subclass that does not call ``__init__`` works.)
    _limits: Limits = _DEFAULT_LIMITS
    _closed: bool = False
    # The last lists (or tuples) of names runs were given, as tuples, and their checks.
    _recent_names: dict[tuple[object, ...], ToolNames] | None = None
    # The same, by the identity of the list given: its names then (a copy), and their check.
    _recent_lists: dict[int, tuple[Sequence[object], ToolNames]] | None = None

    def __init__(self, *, limits: Limits | None = None) -> None:
        self._limits = limits if limits is not None else _DEFAULT_LIMITS
        self._closed = False

    @property
    def limits(self) -> Limits:
        """The default limits of a run."""
        return self._limits

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called (runs are then refused)."""
        return self._closed

    async def run(
        self,
        code: str,
        *,
        tool_names: Iterable[str],
        call_tool: CallTool,
        limits: Limits | None = None,
        cancel: CancelSignal | None = None,
        on_log: Callable[[str], None] | None = None,
        call_group: TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> RunOutcome:
        """Run ``code`` in a fresh worker and return its outcome.

        A failure of the program is an outcome, never an exception. Cancelling
        the calling task kills the worker and propagates; firing ``cancel`` kills
        the worker and returns a ``cancelled`` outcome. Every tool call started
        through ``call_tool`` has settled when this returns, unless
        ``call_group`` is given.

        ``call_group``, when given, is a task group that outlives the run, whose
        tasks call ``call_tool`` (a backend's own tasks otherwise). When the run
        ends, a call still being answered is cancelled and the run does not wait
        for it: one that shields itself from the cancellation goes on in
        ``call_group`` to its end, and its answer is dropped. For a caller that
        bounds its own wait for calls (the executor abandons a sub-call that
        does not stop within its grace) and runs each call in the task that
        reads it, with no task of its own per call.

        ``shield_calls`` (with ``call_group`` only): the run's end cancels no
        call being answered either; each runs to its end in ``call_group``
        (the caller ends its calls by its own means, as the executor does
        through their abort signal), and its answer is dropped. For a caller
        that would otherwise shield every call itself: one cancel scope less
        per call.

        ``on_log``, when given, sees the program's output as it happens: it is
        called on the event loop, synchronously, once per line the program
        printed, in order, as the host receives it (the lines
        :attr:`RunOutcome.logs` will hold; never a line past the output limit,
        never after this returns). What it raises is logged and changes
        nothing about the run.

        Raises:
            TypeError: ``code`` or a tool name is not a string.
            ValueError: ``shield_calls`` without ``call_group``.
            RuntimeClosedError: the runtime is closed.
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be str, not {type(code).__name__}")
        options: dict[str, Any] = {}
        # (Only when given: a backend's _run written before them works as before.)
        if call_group is not None:
            options["call_group"] = call_group
        if shield_calls:
            if call_group is None:
                raise ValueError("shield_calls needs a call_group, where the calls go on")
            options["shield_calls"] = True
        names = self._checked_names(tool_names)
        if self._closed:
            raise RuntimeClosedError(self.name)
        return await self._run(
            code,
            tool_names=names,
            call_tool=call_tool,
            limits=limits if limits is not None else self._limits,
            cancel=cancel,
            on_log=on_log,
            **options,
        )

    def _checked_names(self, tool_names: Iterable[str]) -> ToolNames:
        """``check_tool_names(tool_names)``, the same value again for a list of names seen lately.

        A caller that passes the same list each run (rather than keeping a
        :class:`ToolNames`) pays a comparison of that list with a copy of it
        kept from its last run: the names' references, compared in place
        without reading the names, so 5,000 names cost about as much as 10
        (``bench_overhead.py`` (b)). A new list of names seen lately costs one
        hash per name (cached by the string, but read from each one: 0.3-0.5 ms
        for 5,000 names whose memory the run has not touched); only names not
        seen among the last :data:`_RECENT_NAMES` are checked, sorted and
        encoded again.
        """
        if type(tool_names) is not list and type(tool_names) is not tuple:
            return check_tool_names(tool_names)
        lists = self._recent_lists
        if lists is None:
            lists = self._recent_lists = {}
        seen = lists.get(id(tool_names))
        if seen is not None:
            try:
                if seen[0] is tool_names or seen[0] == tool_names:
                    return seen[1]
            except Exception:  # a name that cannot be compared: checked below
                pass
        recent = self._recent_names
        if recent is None:
            recent = self._recent_names = {}
        key = tuple(tool_names)
        try:
            names = recent.get(key)
        except TypeError:  # an unhashable name: the check says what is wrong
            return check_tool_names(tool_names)
        if names is None:
            names = check_tool_names(tool_names)
            if len(recent) >= _RECENT_NAMES:
                del recent[next(iter(recent))]  # the oldest
            recent[key] = names
        # A tuple is kept itself (its identity then stays its own); a list, as a copy.
        if len(lists) >= _RECENT_NAMES:
            del lists[next(iter(lists))]  # the oldest
        lists[id(tool_names)] = (key if type(tool_names) is tuple else list(key), names)
        return names

    @abc.abstractmethod
    async def _run(
        self,
        code: str,
        *,
        tool_names: ToolNames,
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
        on_log: Callable[[str], None] | None,
        call_group: TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> RunOutcome:
        """The backend's run (see :meth:`run`), called with checked arguments."""

    async def aclose(self) -> None:
        """Close the runtime: release its workers; safe to call twice.

        The runtime is closed even if releasing fails or the caller is
        cancelled (the release runs shielded).
        """
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._aclose()

    async def _aclose(self) -> None:
        """The backend's release of its resources (called once, shielded)."""
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
