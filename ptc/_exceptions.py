"""Every error of ptc (the executor and the CLI), in one tree.

::

    ToolError (registry)
    ├── CodeRunFailedError     CODE_RUN_FAILED: the program failed (data, not a crash)
    └── ExecutorBusyError      EXECUTOR_BUSY: no run slot for the program (data: retry later)

    ValueError
    └── ExecutorConfigError    a bad executor setting (raised to the caller)

    ToolSpecError              the CLI's --tools spec cannot be loaded (one line for the user)

The runtime's errors (``RuntimeBackendError`` and below) are not wrapped:
``ptc run`` and ``ptc serve`` catch them in one place each and report them.

Codes of batch items the executor does not run (error results, never raised):
``MALFORMED_CALL`` (not a call, no string id or name, or arguments that are text
but not JSON) and
``DUPLICATE_CALL_ID`` (an earlier call of the batch has the same id).
"""

from __future__ import annotations

from collections.abc import Sequence

from registry import ToolError

__all__ = [
    "CODE_RUN_FAILED",
    "DUPLICATE_CALL_ID",
    "EXECUTOR_BUSY",
    "MALFORMED_CALL",
    "CodeRunFailedError",
    "ExecutorBusyError",
    "ExecutorConfigError",
    "ToolSpecError",
]

CODE_RUN_FAILED = "CODE_RUN_FAILED"
EXECUTOR_BUSY = "EXECUTOR_BUSY"
MALFORMED_CALL = "MALFORMED_CALL"
DUPLICATE_CALL_ID = "DUPLICATE_CALL_ID"


class CodeRunFailedError(ToolError):
    """A ``run_code`` program failed; the pipeline turns this into a failure result.

    The message is ``code run failed (<kind>): <message>`` followed, when there
    is any, by ``Captured output:`` and the captured lines.
    """

    code = CODE_RUN_FAILED

    def __init__(self, kind: str, message: str, logs: Sequence[str] = ()) -> None:
        self.kind = kind
        self.detail = message
        self.logs = list(logs)
        text = f"code run failed ({kind}): {message}"
        if self.logs:
            text += "\nCaptured output:\n" + "\n".join(self.logs)
        super().__init__(text)


class ExecutorBusyError(ToolError):
    """No run slot for a program: the queue was full, or no slot came free in time.

    The message is ``executor busy: <why>; try again later``, then the counts.
    """

    code = EXECUTOR_BUSY

    def __init__(self, why: str, *, running: int, queued: int) -> None:
        self.running = running
        self.queued = queued
        super().__init__(
            f"executor busy: {why}; try again later ({running} programs running, {queued} waiting)"
        )


class ExecutorConfigError(ValueError):
    """An executor setting is invalid."""


class ToolSpecError(Exception):
    """A tool-set spec cannot be loaded; the message is one line for the user."""
