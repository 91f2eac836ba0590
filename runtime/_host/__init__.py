"""Host side of the subprocess and Pyodide backends: code that runs in the caller's process.

- ``_pool``: the zygote process, its spare workers and each worker's handle.
- ``_session``: one run, driven over the worker's channel to a single outcome.
- ``_channel``: bounded frame I/O on a worker's non-blocking socket.
- ``_runners``: the tasks that answer a run's tool calls.

Nothing in the sandboxed worker imports this package.
"""
