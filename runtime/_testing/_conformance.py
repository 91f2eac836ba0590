"""The conformance suite every :class:`~runtime.Runtime` backend must pass.

trio's ``check_one_way_stream`` idea: the checks are a published function, so
a backend written outside this project proves itself with the same suite as
ours (:func:`check_runtime`), and a test suite can run them one by one
(:func:`runtime_checks`). The checks need no pytest.

Each check drives the runtime through :meth:`Runtime.run` with a
:class:`ToolBox` (or a ``call_tool`` of its own) and asserts what every
backend promises: results and logs, failures in the program's own line
numbers, lossless JSON, the ``tools`` object, tool calls that overlap and
settle, the limits with their outcome kinds, cancellation, ``on_log``, and
calls answered in the caller's ``call_group``.
Checks marked ``needs_isolation`` ask what only a sandbox gives (a fresh
process per run, CPU and memory limits, stopping a program that never
yields); a fake backend skips them (``isolated=False``).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

import anyio

from .._base import Runtime
from . import _checks_call_group, _checks_limits, _checks_program
from ._checks import RuntimeCheck

__all__ = ["check_runtime", "runtime_checks"]

_CHECKS = (*_checks_program.CHECKS, *_checks_limits.CHECKS, *_checks_call_group.CHECKS)
_HERE = os.path.dirname(os.path.abspath(__file__))


def runtime_checks(*, isolated: bool = True) -> list[RuntimeCheck]:
    """The conformance checks, in order; without those that need isolation unless ``isolated``."""
    return [check for check in _CHECKS if isolated or not check.needs_isolation]


async def check_runtime(
    factory: Callable[[], Runtime], *, isolated: bool = True, check_timeout: float = 120.0
) -> None:
    """Run every conformance check against one runtime made by ``factory``.

    The runtime is used as an async context manager for the whole suite (the
    checks run one after another on it, as a caller's runs would). A check
    that fails, raises, or takes longer than ``check_timeout`` seconds is a failure;
    every check runs.

    Args:
        factory: makes the runtime under test (``lambda: MyRuntime(...)``).
        isolated: ``False`` for a backend without a sandbox (an in-process
            fake): the checks that need one are skipped.
        check_timeout: seconds each check may take.

    Raises:
        AssertionError: naming each failing check and why (the first
            failure is its ``__cause__``).

    Example::

        async def test_my_backend_conforms() -> None:
            await check_runtime(lambda: MyRuntime())
    """
    checks = runtime_checks(isolated=isolated)
    failures: list[tuple[str, BaseException]] = []
    async with factory() as runtime:
        for check in checks:
            deadline: anyio.CancelScope | None = None
            try:
                with anyio.fail_after(check_timeout) as deadline:
                    await check(runtime)
            # A program's SystemExit that escaped the backend fails the check,
            # not the test run.
            except (Exception, SystemExit) as exc:
                if (
                    isinstance(exc, TimeoutError)
                    and deadline is not None
                    and deadline.cancel_called
                ):
                    late = TimeoutError(f"took longer than {check_timeout:g} s")
                    late.__cause__ = exc
                    exc = late
                failures.append((check.name, exc))
    if failures:
        lines = [f"{len(failures)} of {len(checks)} runtime checks failed:"]
        lines.extend(f"  {name}: {_describe(failure)}" for name, failure in failures)
        raise AssertionError("\n".join(lines)) from failures[0][1]


def _describe(failure: BaseException) -> str:
    """What failed, and the line of the check that found it (its asserts carry no message)."""
    text = f"{type(failure).__name__}: {failure}".strip().rstrip(":")
    frames = [
        frame
        for frame in traceback.extract_tb(failure.__traceback__)
        if os.path.dirname(frame.filename) == _HERE
    ]
    if frames:
        where = frames[-1]
        text += f" (at {os.path.basename(where.filename)}:{where.lineno}: {where.line})"
    return text.replace("\n", "\n    ")
