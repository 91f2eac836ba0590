"""Helpers the Pyodide test modules share: a runtime, a spy on its workers, its tidying thread."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import pytest


@contextlib.asynccontextmanager
async def open_runtime(*, start: bool = False, **options: Any) -> AsyncIterator[Any]:
    """A :class:`PyodideRuntime` (started, with ``start``); skipped where it is not installed (not in CI)."""
    from runtime._pyodide._assets import PyodideNotInstalledError
    from runtime._pyodide._runtime import PyodideRuntime

    try:
        runtime = PyodideRuntime(**options)
    except PyodideNotInstalledError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    async with runtime:
        if start:
            await runtime.start()
        yield runtime


def spy_on_workers(runtime: Any) -> list[Any]:
    """The workers ``runtime`` hands runs to from now on (the program cannot name its own)."""
    served: list[Any] = []
    acquire = runtime._acquire

    def spy(profile: Any) -> Any:
        served.append(acquire(profile))
        return served[-1]

    runtime._acquire = spy
    return served


async def tidied(runtime: Any) -> None:
    """Wait for the thread a run's end started to remove homes and start spares."""
    if runtime._tidier is not None:
        await anyio.to_thread.run_sync(runtime._tidier.join)
