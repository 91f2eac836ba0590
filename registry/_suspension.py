"""Whether a tool's body can suspend: one that cannot needs no cancel scope.

A call's body runs in a cancel scope that its signal cancels, so that a body
waiting on something stops when the call is aborted. A coroutine can only be
interrupted where it suspends, and a coroutine function whose own code has no
``await``, ``async for`` or ``async with`` never does: its first step runs it to
the end. For such a body the scope (about 3 µs of a call that costs some 10)
could never deliver anything, and the pipeline leaves it out.

The answer errs towards "may suspend": anything but a plain ``async def``
function (a callable object, a ``functools.partial``, a synchronous function,
which runs in a thread) is assumed to.
"""

from __future__ import annotations

import dis
import inspect
from types import CodeType, FunctionType, MethodType
from typing import Any, Final

__all__ = ["KnownBody", "body_may_suspend", "coroutine_may_suspend"]

# The instructions through which a coroutine's frame gives control back to
# the event loop, or starts to (the set differs between versions: those this
# interpreter has).
_SUSPENDING: Final = frozenset(
    dis.opmap[name]
    for name in (
        "YIELD_VALUE",
        "SEND",
        "GET_AWAITABLE",
        "GET_AITER",
        "GET_ANEXT",
        "BEFORE_ASYNC_WITH",
        "END_ASYNC_FOR",
        "ASYNC_GEN_WRAP",
        "YIELD_FROM",
    )
    if name in dis.opmap
)


class KnownBody:
    """A definition's ``execute`` that knows whether it may suspend (``define_tool``'s)."""

    __slots__ = ("may_suspend",)

    def __init__(self, may_suspend: bool) -> None:
        self.may_suspend = may_suspend


def coroutine_may_suspend(fn: Any) -> bool:
    """``False`` only for an ``async def`` function (or method) whose code never awaits."""
    if type(fn) is MethodType:
        fn = fn.__func__
    if type(fn) is not FunctionType:
        return True
    code: CodeType = fn.__code__
    if not code.co_flags & inspect.CO_COROUTINE:
        return True
    # Word code: an opcode in every even byte (inline caches are zero words).
    return not _SUSPENDING.isdisjoint(code.co_code[::2])


def body_may_suspend(execute: Any) -> bool:
    """Whether a definition's ``execute`` may suspend once called."""
    if isinstance(execute, KnownBody):
        return execute.may_suspend
    return coroutine_may_suspend(execute)
