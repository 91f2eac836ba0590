"""Isolated workers that run a model-written program: the :class:`Runtime` backends.

``runtime`` imports nothing of ``registry``, ``sdkgen`` or ``ptc``. Every name
loads on first use (module ``__getattr__``): a subprocess run does not pay for
the Pyodide backend and its installer, nor ``ptc doctor``'s layer probes, and
``ptc run`` can spawn its zygote (``runtime._host._launch``) before it imports
the host side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backends import get_runtime as get_runtime
    from ._base import CallTool as CallTool
    from ._base import CancelSignal as CancelSignal
    from ._base import FailureKind as FailureKind
    from ._base import Isolation as Isolation
    from ._base import IsolationMode as IsolationMode
    from ._base import Limits as Limits
    from ._base import RunOutcome as RunOutcome
    from ._base import Runtime as Runtime
    from ._base import ToolAnswer as ToolAnswer
    from ._base import ToolNames as ToolNames
    from ._exceptions import InstallError as InstallError
    from ._exceptions import RuntimeBackendError as RuntimeBackendError
    from ._exceptions import RuntimeClosedError as RuntimeClosedError
    from ._exceptions import RuntimeUnavailableError as RuntimeUnavailableError
    from ._exceptions import WorkerStartError as WorkerStartError
    from ._pyodide._assets import pyodide_status as pyodide_status
    from ._pyodide._install import install_pyodide as install_pyodide
    from ._pyodide._runtime import PyodideRuntime as PyodideRuntime
    from ._sandbox._layers import LayerStatus as LayerStatus
    from ._sandbox._layers import probe_layers as probe_layers
    from ._subprocess import SubprocessRuntime as SubprocessRuntime
    from ._worker._program import DESCRIBE_CALL as DESCRIBE_CALL
    from ._worker._program import SEARCH_CALL as SEARCH_CALL

__all__ = [
    "DESCRIBE_CALL",
    "SEARCH_CALL",
    "CallTool",
    "CancelSignal",
    "FailureKind",
    "InstallError",
    "Isolation",
    "IsolationMode",
    "LayerStatus",
    "Limits",
    "PyodideRuntime",
    "RunOutcome",
    "Runtime",
    "RuntimeBackendError",
    "RuntimeClosedError",
    "RuntimeUnavailableError",
    "SubprocessRuntime",
    "ToolAnswer",
    "ToolNames",
    "WorkerStartError",
    "get_runtime",
    "install_pyodide",
    "probe_layers",
    "pyodide_status",
]

#: Public name -> the module that defines it, imported on first access.
_LAZY = {
    "get_runtime": "._backends",
    "CallTool": "._base",
    "CancelSignal": "._base",
    "FailureKind": "._base",
    "Isolation": "._base",
    "IsolationMode": "._base",
    "Limits": "._base",
    "RunOutcome": "._base",
    "Runtime": "._base",
    "ToolAnswer": "._base",
    "ToolNames": "._base",
    "InstallError": "._exceptions",
    "RuntimeBackendError": "._exceptions",
    "RuntimeClosedError": "._exceptions",
    "RuntimeUnavailableError": "._exceptions",
    "WorkerStartError": "._exceptions",
    "pyodide_status": "._pyodide._assets",
    "install_pyodide": "._pyodide._install",
    "PyodideRuntime": "._pyodide._runtime",
    "LayerStatus": "._sandbox._layers",
    "probe_layers": "._sandbox._layers",
    "SubprocessRuntime": "._subprocess",
    "DESCRIBE_CALL": "._worker._program",
    "SEARCH_CALL": "._worker._program",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first access."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later accesses skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
