"""Errors the runtime raises for infrastructure and usage failures.

A failure of the *program* is never raised: it is a :class:`RunOutcome` kind.

::

    Exception
     └── RuntimeBackendError
          ├── RuntimeUnavailableError   get_runtime(name) cannot provide the backend
          └── WorkerStartError          the worker pool (zygote) cannot start or keeps dying
"""

from __future__ import annotations

__all__ = ["RuntimeBackendError", "RuntimeUnavailableError", "WorkerStartError"]


class RuntimeBackendError(Exception):
    """Base of every error the runtime package raises."""


class RuntimeUnavailableError(RuntimeBackendError):
    """A runtime backend is unknown or not installed.

    Attributes:
        name: the backend that was asked for.
        hint: how to make it available.
    """

    def __init__(self, name: str, hint: str) -> None:
        self.name = name
        self.hint = hint
        super().__init__(f"runtime {name!r} is not available: {hint}")


class WorkerStartError(RuntimeBackendError):
    """The worker infrastructure failed (not the program)."""
