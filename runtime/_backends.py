"""Backends by name: ``get_runtime("subprocess")``, ``get_runtime("pyodide")``."""

from __future__ import annotations

import importlib
from typing import Any, Literal

from ._base import Runtime
from ._exceptions import RuntimeUnavailableError

__all__ = ["RUNTIME_NAMES", "get_runtime"]

RUNTIME_NAMES = ("pyodide", "subprocess")
_PYODIDE_HINT = "pip install 'ptc-runner[pyodide]' && ptc runtime install pyodide"


def get_runtime(
    name: str, *, isolation: Literal["strict", "best-effort"] = "strict", **options: Any
) -> Runtime:
    """Return a new, not yet started runtime of backend ``name``.

    ``isolation`` is ``"strict"`` (fail closed: no run without every protective
    layer) unless ``"best-effort"`` is chosen explicitly, which only the
    ``subprocess`` backend offers (its OS layers depend on the kernel; the
    Pyodide worker's do not). Other ``options`` go to the backend's constructor.

    Raises:
        RuntimeUnavailableError: ``name`` is unknown or its backend is not installed.
        ValueError: ``isolation`` is not a mode ``name`` offers.
    """
    if isolation not in ("strict", "best-effort"):
        raise ValueError(f"isolation must be 'strict' or 'best-effort', got {isolation!r}")
    if name == "subprocess":
        from ._subprocess import SubprocessRuntime

        return SubprocessRuntime(isolation=isolation, **options)
    if name == "pyodide":
        if isolation != "strict":
            raise ValueError(
                "isolation='best-effort' is for the subprocess runtime: the Pyodide worker's "
                "layers (Deno's permissions, WebAssembly) do not depend on the kernel"
            )
        try:
            module = importlib.import_module("runtime._pyodide._runtime")
            backend = module.PyodideRuntime
        except (ImportError, AttributeError):
            raise RuntimeUnavailableError(name, _PYODIDE_HINT) from None
        runtime: Runtime = backend(**options)
        return runtime
    raise RuntimeUnavailableError(name, f"known runtimes are {', '.join(RUNTIME_NAMES)}")
