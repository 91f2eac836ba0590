"""Every error of the runtime package, in one tree.

A failure of the *program* is never raised: it is a :class:`RunOutcome` kind.
What raises is a failure of our infrastructure or a misuse by the caller::

    Exception
     ├── RuntimeBackendError                   raised to the caller of the runtime
     │    ├── RuntimeUnavailableError          get_runtime(name) cannot provide the backend
     │    │    └── PyodideNotInstalledError    a piece of the Pyodide install is missing
     │    ├── RuntimeClosedError               a run asked of a runtime that was closed
     │    ├── WorkerStartError                 the worker pool (zygote) cannot start or keeps dying
     │    └── InstallError (also RuntimeError) install_pyodide(): which step failed and why
     ├── ChannelClosed                         host: the worker's end of a run channel is gone
     ├── ProtocolError                         host and worker: a peer broke the wire protocol
     ├── SandboxError                          sandbox: a layer cannot be applied (strict mode)
     │                                         or the worker's state is unusable
     └── OSError
          ├── SeccompUnavailableError          sandbox: the seccomp filter cannot be built or installed
          └── LandlockUnavailableError         sandbox: Landlock is unsupported or refused

    Defined in runtime/_worker/_program.py instead (see below):
     ├── ToolCallError                         what a program catches when a tool call fails
     └── ValueError
          └── NotJsonError                     worker: a value to send is not lossless JSON

The errors below ``RuntimeBackendError`` reach the caller; the others are
translated before they do: a ``ProtocolError`` or ``ChannelClosed`` ends the
run (``crashed``) and retires the worker, a sandbox error becomes the worker's
``sandbox`` error frame or the zygote's refusal to start (``WorkerStartError``).

Who imports this module: every room of ``runtime`` — the host, the zygote and
worker (``runtime/_worker/``) and the sandbox set-up (``runtime/_sandbox/``).
That is why it imports nothing at all: the zygote loads it without running
``runtime/__init__`` (which pulls in the host). The two errors a Pyodide worker
needs as well live in ``_program.py``, the one file the Pyodide worker loads
(by path, so it cannot import this package).
"""

from __future__ import annotations

__all__ = [
    "PYODIDE_EXTRA",
    "PYODIDE_INSTALL_COMMAND",
    "ChannelClosed",
    "InstallError",
    "LandlockUnavailableError",
    "ProtocolError",
    "PyodideNotInstalledError",
    "RuntimeBackendError",
    "RuntimeClosedError",
    "RuntimeUnavailableError",
    "SandboxError",
    "SeccompUnavailableError",
    "WorkerStartError",
]

#: How the Pyodide backend's Python side (with Deno) is installed.
PYODIDE_EXTRA = "pip install 'ptc-runner[pyodide]'"
#: How its assets (Pyodide itself, the loaders, the memory snapshot) are installed.
PYODIDE_INSTALL_COMMAND = "ptc runtime install pyodide"


class RuntimeBackendError(Exception):
    """Base of every error the runtime raises to its caller."""


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


class PyodideNotInstalledError(RuntimeUnavailableError):
    """A piece of the Pyodide runtime is missing; the message says how to install it.

    Attributes:
        missing: what was not found.
    """

    def __init__(self, missing: str) -> None:
        self.missing = missing
        super().__init__(
            "pyodide",
            f"{missing}; install Deno with `{PYODIDE_EXTRA}`, then run `{PYODIDE_INSTALL_COMMAND}`",
        )


class RuntimeClosedError(RuntimeBackendError):
    """A run was asked of a runtime after :meth:`~runtime.Runtime.aclose`.

    Attributes:
        name: the backend's registry name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"the {name or 'runtime'} runtime is closed")


class WorkerStartError(RuntimeBackendError):
    """The worker infrastructure failed (not the program)."""


class InstallError(RuntimeBackendError, RuntimeError):
    """Installing a runtime failed; the message says which step and why.

    Attributes:
        step: what the installer was doing ("verifying the tarball", ...).
        reason: why it failed.
    """

    def __init__(self, step: str, reason: str) -> None:
        self.step = step
        self.reason = reason
        super().__init__(f"installing the Pyodide runtime failed while {step}: {reason}")


class ChannelClosed(Exception):
    """The worker's end of the channel is gone."""


class ProtocolError(Exception):
    """A peer broke the wire protocol."""


class SandboxError(Exception):
    """A layer could not be applied in strict mode, or the worker's state is unusable."""


class SeccompUnavailableError(OSError):
    """The filter could not be built or installed on this machine."""


class LandlockUnavailableError(OSError):
    """Landlock is not supported or refused on this machine."""
