"""Testing a :class:`~runtime.Runtime` backend, and testing code that uses one.

- :func:`check_runtime` runs the conformance suite, the checks every backend
  must pass, against a runtime of yours; :func:`runtime_checks` lists them
  (as :class:`RuntimeCheck`) for a test suite that runs them one by one.
  Neither needs pytest.
- :class:`InProcessRuntime` is a fake backend for fast tests of what drives a
  runtime (like httpx's ``MockTransport``). Security warning: it is NOT a
  sandbox; the program runs in the host process. Never give it untrusted code.
- :class:`ToolBox` (a ``call_tool`` with well-known tools, which records what
  happened; :data:`TOOL_NAMES`) and :class:`ManualCancel` (a cancel signal)
  are what the checks drive a backend with.

Example::

    from runtime.testing import check_runtime

    async def test_my_backend_conforms() -> None:
        await check_runtime(lambda: MyRuntime())
"""

from ._testing._checks import RuntimeCheck as RuntimeCheck
from ._testing._conformance import check_runtime as check_runtime
from ._testing._conformance import runtime_checks as runtime_checks
from ._testing._in_process import InProcessRuntime as InProcessRuntime
from ._testing._tools import TOOL_NAMES as TOOL_NAMES
from ._testing._tools import ManualCancel as ManualCancel
from ._testing._tools import ToolBox as ToolBox

__all__ = [
    "TOOL_NAMES",
    "InProcessRuntime",
    "ManualCancel",
    "RuntimeCheck",
    "ToolBox",
    "check_runtime",
    "runtime_checks",
]
