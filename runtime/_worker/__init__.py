"""Code that runs in the worker: the zygote, and the sandboxed process it forks per run.

Standard library, orjson and (for ``restricted=True``) RestrictedPython only: it
is loaded before the sandbox closes, and never imports host code.

- ``_zygote``: the fork server, one warm interpreter that forks a worker per run.
- ``_bootstrap``: the worker's half of a run, over its channel.
- ``_program``: what a program sees (``tools``, ``ToolCallError``, ``print``),
  shared with the Pyodide worker, which loads this file by path.
- ``_protocol``: the wire frames, which the host imports too.
- ``_imports``: the import allow-list; ``_restricted``: RestrictedPython.
"""
