"""Errors of the executor.

ToolError (registry)
└── CodeRunFailedError     CODE_RUN_FAILED: the program failed (data, not a crash)

ValueError
└── ExecutorConfigError    a bad executor setting (raised to the caller)
"""

from __future__ import annotations

from collections.abc import Sequence

from registry import ToolError

__all__ = ["CODE_RUN_FAILED", "CodeRunFailedError", "ExecutorConfigError"]

CODE_RUN_FAILED = "CODE_RUN_FAILED"


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


class ExecutorConfigError(ValueError):
    """An executor setting is invalid."""
