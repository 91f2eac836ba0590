"""What :mod:`runtime.testing` publishes: the conformance suite and its helpers.

Host code: the in-process fake runtime (no sandbox), the checks every backend
must pass, and the ``call_tool`` and cancel signal they drive a backend with.
"""
