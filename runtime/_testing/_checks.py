"""The parts of a conformance check: :class:`RuntimeCheck`, its registry and helpers.

The checks themselves are in ``_checks_program`` (results, failures, tools)
and ``_checks_limits`` (limits, cancellation, output, ``on_log``); each
lists its checks in ``CHECKS``, in the order they are defined (see :func:`checker`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias

from .._base import Limits, RunOutcome, Runtime
from ._tools import TOOL_NAMES, ManualCancel, ToolBox

__all__ = ["CheckFunction", "MiB", "RuntimeCheck", "checker", "request_id", "run"]

MiB = 1024 * 1024

CheckFunction: TypeAlias = Callable[[Runtime], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeCheck:
    """One named conformance check: ``await check(runtime)`` raises ``AssertionError`` on failure.

    Attributes:
        name: what the check is called (``"tool_call_limit"``).
        function: the check itself.
        needs_isolation: whether only a sandboxed backend can pass it.
    """

    name: str
    function: Callable[[Runtime], Awaitable[None]]
    needs_isolation: bool = False

    async def __call__(self, runtime: Runtime) -> None:
        await self.function(runtime)


def checker(
    checks: list[RuntimeCheck],
) -> Callable[..., Callable[[CheckFunction], CheckFunction]]:
    """A decorator factory that adds each check it decorates to ``checks``, in order.

    ``@check()`` or ``@check(isolation=True)``; the check's name is the
    function's, without its leading ``_``.
    """

    def check(*, isolation: bool = False) -> Callable[[CheckFunction], CheckFunction]:
        def register(function: CheckFunction) -> CheckFunction:
            name = function.__name__.removeprefix("_")
            checks.append(RuntimeCheck(name=name, function=function, needs_isolation=isolation))
            return function

        return register

    return check


async def run(
    runtime: Runtime,
    code: str,
    *,
    tools: ToolBox | None = None,
    limits: Limits | None = None,
    cancel: ManualCancel | None = None,
) -> RunOutcome:
    return await runtime.run(
        code,
        tool_names=TOOL_NAMES,
        call_tool=tools or ToolBox(),
        limits=limits,
        cancel=cancel,
    )


#: A context variable the checks set around a run, to see it in calls and on_log.
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")
