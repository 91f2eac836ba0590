"""Backends by name: ``get_runtime("subprocess")``, ``get_runtime("pyodide")``."""

from __future__ import annotations

import importlib
from typing import Any

from ._base import Runtime
from ._exceptions import RuntimeUnavailableError

__all__ = ["RUNTIME_NAMES", "get_runtime"]

RUNTIME_NAMES = ("pyodide", "subprocess")
_PYODIDE_HINT = "pip install 'ptc-runner[pyodide]' && ptc runtime install pyodide"


def get_runtime(name: str, **options: Any) -> Runtime:
    """Return a new, not yet started runtime of backend ``name``.

    ``options`` go to the backend's constructor.

    Raises:
        RuntimeUnavailableError: ``name`` is unknown or its backend is not installed.
    """
    if name == "subprocess":
        from ._subprocess import SubprocessRuntime

        return SubprocessRuntime(**options)
    if name == "pyodide":
        try:
            module = importlib.import_module("runtime._pyodide")
            backend = module.PyodideRuntime
        except (ImportError, AttributeError):
            raise RuntimeUnavailableError(name, _PYODIDE_HINT) from None
        runtime: Runtime = backend(**options)
        return runtime
    raise RuntimeUnavailableError(name, f"known runtimes are {', '.join(RUNTIME_NAMES)}")
