"""The ``run_code`` executor: bridge, rolling-pool scheduler, modes, events and the CLI.

Mount :class:`CodeExecutor` as an agent's tool executor: ``describe(scope)`` gives
the model input (the ``run_code`` schema and the ``tools:sdk`` section),
``execute(batch)`` runs the model's calls, ``run_code(code)`` runs one program.

Every name loads on first use (module ``__getattr__``), so ``ptc``'s command
line imports only what the command it runs needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._budget import DEFAULT_OUTPUT_BUDGET as DEFAULT_OUTPUT_BUDGET
    from ._budget import OutputSpill as OutputSpill
    from ._budget import SpillHook as SpillHook
    from ._discovery import Discovery as Discovery
    from ._discovery import SdkMode as SdkMode
    from ._events import DispatchLogHook as DispatchLogHook
    from ._events import EventSink as EventSink
    from ._events import PtcDispatchLog as PtcDispatchLog
    from ._events import ToolCallEvent as ToolCallEvent
    from ._events import ToolResultEvent as ToolResultEvent
    from ._exceptions import CODE_RUN_FAILED as CODE_RUN_FAILED
    from ._exceptions import DUPLICATE_CALL_ID as DUPLICATE_CALL_ID
    from ._exceptions import EXECUTOR_BUSY as EXECUTOR_BUSY
    from ._exceptions import MALFORMED_CALL as MALFORMED_CALL
    from ._exceptions import CodeRunFailedError as CodeRunFailedError
    from ._exceptions import ExecutorBusyError as ExecutorBusyError
    from ._exceptions import ExecutorConfigError as ExecutorConfigError
    from ._executor import CODE_ONLY_RULE as CODE_ONLY_RULE
    from ._executor import RUN_CODE as RUN_CODE
    from ._executor import BatchResult as BatchResult
    from ._executor import CallResult as CallResult
    from ._executor import CodeExecutor as CodeExecutor
    from ._executor import ModelCall as ModelCall
    from ._live import LiveLogs as LiveLogs
    from ._render import format_json as format_json
    from ._render import render_run_result as render_run_result
    from ._serve import SDK_RESOURCE as SDK_RESOURCE
    from ._serve import CodeModeServer as CodeModeServer
    from ._serve import serve_http as serve_http
    from ._serve import serve_stdio as serve_stdio

__all__ = [
    "CODE_ONLY_RULE",
    "CODE_RUN_FAILED",
    "DEFAULT_OUTPUT_BUDGET",
    "DUPLICATE_CALL_ID",
    "EXECUTOR_BUSY",
    "MALFORMED_CALL",
    "RUN_CODE",
    "SDK_RESOURCE",
    "BatchResult",
    "CallResult",
    "CodeExecutor",
    "CodeModeServer",
    "CodeRunFailedError",
    "Discovery",
    "DispatchLogHook",
    "EventSink",
    "ExecutorBusyError",
    "ExecutorConfigError",
    "LiveLogs",
    "ModelCall",
    "OutputSpill",
    "PtcDispatchLog",
    "SdkMode",
    "SpillHook",
    "ToolCallEvent",
    "ToolResultEvent",
    "format_json",
    "render_run_result",
    "serve_http",
    "serve_stdio",
]

#: Public name -> the submodule that defines it, imported on first access.
_LAZY = {
    "DEFAULT_OUTPUT_BUDGET": "._budget",
    "OutputSpill": "._budget",
    "SpillHook": "._budget",
    "Discovery": "._discovery",
    "SdkMode": "._discovery",
    "DispatchLogHook": "._events",
    "EventSink": "._events",
    "PtcDispatchLog": "._events",
    "ToolCallEvent": "._events",
    "ToolResultEvent": "._events",
    "CODE_RUN_FAILED": "._exceptions",
    "DUPLICATE_CALL_ID": "._exceptions",
    "EXECUTOR_BUSY": "._exceptions",
    "MALFORMED_CALL": "._exceptions",
    "CodeRunFailedError": "._exceptions",
    "ExecutorBusyError": "._exceptions",
    "ExecutorConfigError": "._exceptions",
    "CODE_ONLY_RULE": "._executor",
    "RUN_CODE": "._executor",
    "BatchResult": "._executor",
    "CallResult": "._executor",
    "CodeExecutor": "._executor",
    "ModelCall": "._executor",
    "LiveLogs": "._live",
    "format_json": "._render",
    "render_run_result": "._render",
    "SDK_RESOURCE": "._serve",
    "CodeModeServer": "._serve",
    "serve_http": "._serve",
    "serve_stdio": "._serve",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its submodule on first access."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later accesses skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
