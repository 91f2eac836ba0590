"""The conformance suite (``runtime.testing``) over every backend of ours.

The checks are the published ones (:func:`runtime.testing.runtime_checks`),
one test each, parametrized over backends by the ``runtime`` fixture: the
subprocess backend with its OS layers on (the default) and off, Pyodide
(marked ``pyodide``, so ``-m "not pyodide"`` leaves it out; skipped when Deno
or its assets are missing), and the in-process fake, which skips the checks
that need isolation. A new backend adds one entry to ``_BACKENDS``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from runtime import Runtime, RuntimeUnavailableError, SubprocessRuntime, get_runtime
from runtime.testing import InProcessRuntime, RuntimeCheck, runtime_checks

pytestmark = pytest.mark.anyio


def _pyodide_missing() -> str | None:
    """Why the Pyodide worker cannot run here, or None. CI must have it: never skip there."""
    from runtime._pyodide._assets import PyodideNotInstalledError, locate_pyodide

    try:
        locate_pyodide()
    except PyodideNotInstalledError as exc:
        if os.environ.get("CI"):
            raise
        return str(exc)
    return None


_PYODIDE_MISSING = _pyodide_missing()
# (a factory, whether the backend isolates its runs)
_BACKENDS: list[Any] = [
    pytest.param((lambda: SubprocessRuntime(), True), id="subprocess"),
    pytest.param((lambda: SubprocessRuntime(layers=()), True), id="subprocess-no-layers"),
    pytest.param(
        (lambda: get_runtime("pyodide"), True),
        id="pyodide",
        marks=[pytest.mark.pyodide]
        + ([pytest.mark.skip(reason=_PYODIDE_MISSING)] if _PYODIDE_MISSING else []),
    ),
    pytest.param((InProcessRuntime, False), id="in-process"),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=_BACKENDS)
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Runtime, bool]]:
    factory: Callable[[], Runtime]
    factory, isolated = request.param
    try:
        backend = factory()
    except RuntimeUnavailableError as exc:  # e.g. Deno or the Pyodide assets missing
        if os.environ.get("CI"):  # CI installs every backend: missing there is a failure
            raise
        pytest.skip(str(exc))
    async with backend:
        yield backend, isolated


@pytest.mark.parametrize("check", runtime_checks(), ids=lambda check: check.name)
async def test_conformance(runtime: tuple[Runtime, bool], check: RuntimeCheck) -> None:
    backend, isolated = runtime
    if check.needs_isolation and not isolated:
        pytest.skip(f"{check.name} needs a sandbox; {backend.name} has none")
    await check(backend)
