"""What the conformance checks drive a backend with: a ``call_tool`` and a cancel signal.

:class:`ToolBox` is a ``call_tool`` with a few well-known tools that records
what happened; :class:`ManualCancel` is a minimal :class:`~runtime.CancelSignal`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from .._base import ToolAnswer

__all__ = ["TOOL_NAMES", "ManualCancel", "ToolBox"]

#: The tools :class:`ToolBox` answers; ``my-tool`` is only reachable by subscript.
TOOL_NAMES = ("echo", "sleep", "fail", "explode", "hang", "my-tool")


class ManualCancel:
    """A one-shot cancel signal fired by :meth:`fire` (from the event loop thread)."""

    def __init__(self) -> None:
        self._aborted = False
        self._listeners: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def aborted(self) -> bool:
        return self._aborted

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        if self._aborted:
            listener()
            return lambda: None
        key = self._next
        self._next += 1
        self._listeners[key] = listener

        def dispose() -> None:
            self._listeners.pop(key, None)

        return dispose

    @property
    def listener_count(self) -> int:
        return len(self._listeners)

    def fire(self) -> None:
        if self._aborted:
            return
        self._aborted = True
        listeners = list(self._listeners.values())
        self._listeners.clear()
        for listener in listeners:
            listener()


class ToolBox:
    """A ``call_tool`` for tests.

    Tools: ``echo`` answers its arguments; ``sleep`` sleeps ``args["seconds"]``
    (default 0.05) then answers them; ``fail`` answers a failure with
    ``args["message"]``; ``explode`` raises ``RuntimeError``; ``hang`` sleeps
    forever; ``my-tool`` answers ``"mine"``. It records every call, how many
    are in flight, and how many were cancelled.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.cancelled = 0
        self.started = anyio.Event()

    async def __call__(self, name: str, args: Any) -> ToolAnswer:
        self.calls.append((name, args))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.started.set()
        try:
            return await self._answer(name, args)
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1

    async def _answer(self, name: str, args: Any) -> ToolAnswer:
        if name == "echo":
            return ToolAnswer.success(args)
        if name == "sleep":
            seconds = args.get("seconds", 0.05) if isinstance(args, dict) else 0.05
            await anyio.sleep(seconds)
            return ToolAnswer.success(args)
        if name == "fail":
            message = args.get("message", "failed") if isinstance(args, dict) else "failed"
            return ToolAnswer.failure(str(message))
        if name == "explode":
            raise RuntimeError("the tool exploded")
        if name == "hang":
            await anyio.sleep_forever()
        if name == "my-tool":
            return ToolAnswer.success("mine")
        return ToolAnswer.failure(f"unknown tool {name!r}")
