"""The Pyodide backend: each run in a fresh CPython-on-WebAssembly instance inside Deno.

- ``_runtime``: :class:`PyodideRuntime`, the backend (host side).
- ``_deno``: one Deno process, its command line, limits and exit status.
- ``_assets``: where Deno, the pinned assets and the snapshot live.
- ``_install``: ``ptc runtime install pyodide``.
- ``worker/``: what runs inside Deno (``worker.js``, ``bootstrap.py``).
"""

from ._runtime import PyodideRuntime as PyodideRuntime

__all__ = ["PyodideRuntime"]
