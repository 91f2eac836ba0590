"""Test helpers for code that uses ``ptc``: kept for compatibility.

The in-process fake runtime lives in :mod:`runtime.testing` (with the
conformance suite it passes); import it from there. Security warning:
:class:`InProcessRuntime` is NOT a sandbox (the program runs in the host
process); never give it untrusted code.
"""

from runtime.testing import InProcessRuntime as InProcessRuntime

__all__ = ["InProcessRuntime"]
