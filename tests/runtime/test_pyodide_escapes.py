"""Escapes specific to the Pyodide runtime: each must fail safely.

The program can reach every JS object of its realm (``import js``,
``pyodide.ffi``, ``pyodide_js``). These tests try every host capability
through them — files, commands, environment, network, FFI, system
information, ``Deno.exit``, ``Deno.permissions.request``, code generation,
forged frames — and the memory and CPU bombs, and check both what the program
saw and, where it matters, the host side. The capability tests run twice:
as shipped (the lockdown has removed ``Deno`` and the rest before the
program runs) and with ``lockdown=False``, which proves that Deno's
permissions hold by themselves. ``test_pyodide_isolation.py`` has the
lockdown's own tests.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import Limits, RunOutcome
from runtime.testing import TOOL_NAMES, ToolBox

pytestmark = [pytest.mark.anyio, pytest.mark.pyodide]

MiB = 1024 * 1024

# A helper every probing program starts with: ``attempt`` records what each
# action did instead of letting the first failure end the program.
PRELUDE = """
import js
from pyodide.ffi import to_js

def obj(**fields):
    return to_js(fields, dict_converter=js.Object.fromEntries)

def attempt(action):
    try:
        return "ALLOWED: " + str(action())[:200]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]

async def attempt_async(action):
    try:
        return "ALLOWED: " + str(await action())[:200]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def open_runtime(*, spares: int = 1, lockdown: bool = True) -> AsyncIterator[Any]:
    """A started :class:`PyodideRuntime`; skipped where it is not installed (not in CI)."""
    from runtime._pyodide._assets import PyodideNotInstalledError
    from runtime._pyodide._runtime import PyodideRuntime

    try:
        runtime = PyodideRuntime(spares=spares, lockdown=lockdown)
    except PyodideNotInstalledError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    async with runtime:
        await runtime.start()
        yield runtime


@pytest.fixture(scope="module")
async def pyodide() -> AsyncIterator[Any]:
    """The runtime as shipped."""
    async with open_runtime() as runtime:
        yield runtime


@pytest.fixture(scope="module")
async def unlocked() -> AsyncIterator[Any]:
    """Without the lockdown: Deno's permissions are the only wall inside the process."""
    async with open_runtime(lockdown=False) as runtime:
        yield runtime


@pytest.fixture(params=["pyodide", "unlocked"])
def both(request: pytest.FixtureRequest) -> Any:
    """Each of the two above."""
    return request.getfixturevalue(request.param)


async def probe(runtime: Any, body: str, *, limits: Limits | None = None) -> RunOutcome:
    return await runtime.run(  # type: ignore[no-any-return]
        PRELUDE + body,
        tool_names=TOOL_NAMES,
        call_tool=ToolBox(),
        limits=limits or Limits(timeout=30),
    )


def denied(runtime: Any, outcome: RunOutcome, *needles: str) -> dict[str, str]:
    """The program's ``{action: what happened}``, each checked to be a refusal.

    Under the lockdown an API may also be absent altogether (``AttributeError``).
    """
    assert outcome.ok, outcome.message
    if runtime.lockdown:
        needles = (*needles, "AttributeError")
    results: dict[str, str] = outcome.result
    for action, what in results.items():
        assert not what.startswith("ALLOWED"), f"{action}: {what}"
        assert any(needle in what for needle in needles), f"{action}: {what}"
    return results


def exists(path: Path) -> bool:
    return path.exists()


@pytest.fixture
def secret_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "secret.txt"
    path.write_text("TOP-SECRET-4711")
    yield path


# --------------------------------------------------------------------------- files


async def test_reading_host_files_is_denied(both: Any, secret_file: Path) -> None:
    outcome = await probe(
        both,
        f"""
path = {str(secret_file)!r}
return {{
    "deno_read": attempt(lambda: js.Deno.readTextFileSync(path)),
    "deno_read_async": await attempt_async(lambda: js.Deno.readTextFile(path)),
    "deno_open": attempt(lambda: js.Deno.openSync(path)),
    "deno_stat": attempt(lambda: js.Deno.statSync(path)),
    "deno_readdir": attempt(lambda: list(js.Deno.readDirSync("/"))),
    "etc_passwd": attempt(lambda: js.Deno.readTextFileSync("/etc/passwd")),
    "proc_environ": attempt(lambda: js.Deno.readFileSync("/proc/self/environ")),
}}
""",
    )
    denied(both, outcome, "NotCapable", "PermissionDenied")
    assert "TOP-SECRET" not in repr(outcome)


async def test_python_file_api_sees_only_the_wasm_filesystem(both: Any, secret_file: Path) -> None:
    outcome = await probe(
        both,
        f"""
import os, pyodide_js
path = {str(secret_file)!r}
return {{
    "open": attempt(lambda: open(path).read()),
    "mount_node_fs": attempt(lambda: pyodide_js.mountNodeFS("/host", os.path.dirname(path))),
    "read_mounted": attempt(lambda: open("/host/secret.txt").read()),
    "etc": attempt(lambda: open("/etc/passwd").read()),
}}
""",
    )
    denied(both, outcome, "FileNotFoundError", "NotCapable", "does not exist", "Error")
    assert "TOP-SECRET" not in repr(outcome)


async def test_writing_files_is_denied(both: Any, tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    outcome = await probe(
        both,
        f"""
path = {str(target)!r}
return {{
    "write": attempt(lambda: js.Deno.writeTextFileSync(path, "x")),
    "create": attempt(lambda: js.Deno.createSync(path)),
    "mkdir": attempt(lambda: js.Deno.mkdirSync(path + ".d")),
    "open_write": attempt(lambda: js.Deno.openSync(path, obj(write=True, create=True))),
    "remove": attempt(lambda: js.Deno.removeSync({str(tmp_path)!r}, obj(recursive=True))),
}}
""",
    )
    denied(both, outcome, "NotCapable", "PermissionDenied")
    assert not exists(target)
    assert exists(tmp_path)


# --------------------------------------------------------------------------- processes


async def test_running_commands_is_denied(both: Any, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    outcome = await probe(
        both,
        f"""
command = lambda: js.Deno.Command.new("/bin/sh", obj(args=["-c", "touch {marker}"]))
return {{
    "command_sync": attempt(lambda: command().outputSync()),
    "command_spawn": attempt(lambda: command().spawn()),
    "kill_host": attempt(lambda: js.Deno.kill({os.getpid()}, "SIGKILL")),
    "kill_init": attempt(lambda: js.Deno.kill(1, "SIGTERM")),
}}
""",
    )
    denied(both, outcome, "NotCapable", "PermissionDenied")
    assert not exists(marker)


async def test_environment_and_system_information_are_denied(both: Any) -> None:
    outcome = await probe(
        both,
        """
return {
    "env_get": attempt(lambda: js.Deno.env.get("HOME")),
    "env_all": attempt(lambda: js.Deno.env.toObject()),
    "env_set": attempt(lambda: js.Deno.env.set("X", "1")),
    "process_env": attempt(lambda: js.process.env.PATH),
    "hostname": attempt(lambda: js.Deno.hostname()),
    "os_release": attempt(lambda: js.Deno.osRelease()),
    "memory_info": attempt(lambda: js.Deno.systemMemoryInfo()),
    "interfaces": attempt(lambda: js.Deno.networkInterfaces()),
    "uid": attempt(lambda: js.Deno.uid()),
}
""",
    )
    denied(both, outcome, "NotCapable", "PermissionDenied")


async def test_ffi_is_denied(both: Any) -> None:
    outcome = await probe(
        both,
        """
return {"dlopen": attempt(lambda: js.Deno.dlopen("libc.so.6", js.Object.new()))}
""",
    )
    # Denied by permission, or absent altogether without --unstable-ffi.
    denied(both, outcome, "NotCapable", "PermissionDenied", "TypeError", "AttributeError")


# --------------------------------------------------------------------------- network


@pytest.mark.parametrize("lockdown", [True, False], ids=["pyodide", "unlocked"])
async def test_network_is_denied_and_nothing_connects(lockdown: bool) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        async with open_runtime(spares=0, lockdown=lockdown) as runtime:
            outcome = await probe(
                runtime,
                f"""
return {{
    "fetch": await attempt_async(lambda: js.fetch("http://127.0.0.1:{port}/")),
    "connect": await attempt_async(
        lambda: js.Deno.connect(obj(hostname="127.0.0.1", port={port}))
    ),
    "listen": attempt(lambda: js.Deno.listen(obj(port=0))),
    "websocket": attempt(lambda: js.WebSocket.new("ws://127.0.0.1:{port}/")),
    "resolve": await attempt_async(lambda: js.Deno.resolveDns("localhost", "A")),
}}
""",
            )
        results = outcome.result
        # A WebSocket is created lazily and fails asynchronously; what matters
        # is that nothing ever connected.
        results.pop("websocket", None)
        denied(
            runtime, RunOutcome(result=results, has_result=True), "NotCapable", "PermissionDenied"
        )
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


# --------------------------------------------------------------------------- permissions


async def test_permission_requests_are_refused(both: Any) -> None:
    outcome = await probe(
        both,
        """
if not hasattr(js, "Deno"):
    return "no Deno to ask"
states = {}
for name in ("read", "write", "net", "env", "run", "ffi", "sys"):
    states[name] = js.Deno.permissions.requestSync(obj(name=name)).state
after = attempt(lambda: js.Deno.readTextFileSync("/etc/hostname"))
return {"states": states, "after": after}
""",
    )
    assert outcome.ok, outcome.message
    if both.lockdown:
        assert outcome.result == "no Deno to ask"
        return
    assert set(outcome.result["states"].values()) == {"denied"}
    assert "NotCapable" in outcome.result["after"]


async def test_code_generation_from_strings_is_disabled(both: Any) -> None:
    outcome = await probe(
        both,
        """
import pyodide.code
return {
    "eval": attempt(lambda: js.eval("globalThis")),
    "function": attempt(lambda: js.Function.new("return globalThis")()),
    "run_js": attempt(lambda: pyodide.code.run_js("1 + 1")),
}
""",
    )
    denied(both, outcome, "EvalError")


async def test_javascript_in_a_web_worker_has_no_more_permissions(both: Any) -> None:
    # Without the lockdown, a data: URL module runs arbitrary JS (code
    # generation from strings is off, module loading is not): it must meet
    # the same denials. With it, there is no Worker to start.
    outcome = await probe(
        both,
        """
import asyncio
source = (
    "data:text/javascript,try { self.postMessage(String(Deno.readTextFileSync('/etc/passwd'))) }"
    " catch (error) { self.postMessage('refused: ' + error) }"
)

async def start():
    worker = js.Worker.new(source, obj(type="module"))
    messages = []
    worker.onmessage = lambda event: messages.append(str(event.data))
    for _ in range(200):
        if messages:
            break
        await asyncio.sleep(0.05)
    worker.terminate()
    if not messages:
        raise TimeoutError("no answer")
    if messages[0].startswith("refused: "):
        raise PermissionError(messages[0])
    return messages[0]

return {"worker": await attempt_async(start)}
""",
    )
    denied(both, outcome, "NotCapable")


async def test_a_web_worker_cannot_ask_for_more_permissions(both: Any) -> None:
    outcome = await probe(
        both,
        """
options = obj(type="module", deno=obj(permissions=obj(read=True, run=True, net=True)))
worker = js.Worker.new("data:text/javascript,Deno.exit(3)", options)
return "created"
""",
    )
    assert not outcome.ok, outcome
    assert outcome.result is None


async def test_deno_exit_ends_the_run_as_crashed(both: Any) -> None:
    outcome = await probe(both, "print('bye')\njs.Deno.exit(0)\nreturn 'not reached'")
    if both.lockdown:  # unreachable: an exception of the program's
        assert outcome.kind == "exception", outcome
        assert "AttributeError: Deno" in outcome.message
    else:
        assert outcome.kind == "crashed", outcome
    assert outcome.logs == ["bye"]


async def test_console_output_does_not_corrupt_the_channel(both: Any) -> None:
    outcome = await probe(
        both, "js.console.log('\\x00\\x00\\x00\\x05junk')\njs.console.error('x')\nreturn 7"
    )
    assert outcome.ok, outcome.message
    assert outcome.result == 7


# --------------------------------------------------------------------------- forged frames


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(None, "exceeds the limit", id="huge-length"),
        pytest.param(b"not json", "not JSON", id="not-json"),
        pytest.param(b"[1, 2]", "not an object", id="not-an-object"),
        pytest.param(b'{"type": "shell"}', "unknown type", id="unknown-type"),
        pytest.param(
            b'{"type": "call", "id": 1, "name": "rm-rf", "args": {}}',
            "unknown tool",
            id="unknown-tool",
        ),
        pytest.param(
            b'{"type": "call", "id": 7, "name": "echo", "args": {}}',
            "out of order",
            id="call-id-out-of-order",
        ),
        pytest.param(
            b'{"type": "error", "kind": "ok", "message": ""}', "malformed", id="bad-error-kind"
        ),
        pytest.param(b'{"type": "ready", "layers": []}', "unexpected", id="ready"),
    ],
)
async def test_forged_frames_end_the_run_as_protocol(
    both: Any, body: bytes | None, expected: str
) -> None:
    if both.lockdown:
        # No Deno.stdout: the program finds the worker's own frame writer
        # (worker.js frames whatever text it is given) and forges through it,
        # through every run object the heap holds (not only the first found).
        text = repr(body.decode()) if body is not None else '"x" * (run.max_message + 1)'
        send = f"""
import gc, sys
boot = sys.modules["_ptc_bootstrap"]
runs = [item for item in gc.get_objects() if isinstance(item, boot._PyodideRun)]
assert runs
for run in runs:
    run._send({text})
"""
    else:
        raw = f"frame({body!r})" if body is not None else "b'\\xff\\xff\\xff\\xff'"
        send = f"""
def frame(body):
    return len(body).to_bytes(4, "big") + body
js.Deno.stdout.writeSync(to_js({raw}))
"""
    outcome = await probe(
        both,
        send
        + """
import asyncio
await asyncio.sleep(5)
return "the host did not notice"
""",
    )
    assert outcome.kind == "protocol", outcome
    assert expected in outcome.message


async def test_a_torn_frame_header_ends_the_run(unlocked: Any) -> None:
    outcome = await probe(
        unlocked,
        """
js.Deno.stdout.writeSync(to_js(b"\\x00\\x00"))
await tools.echo({})
return "the host did not notice"
""",
        limits=Limits(timeout=5),
    )
    assert not outcome.ok
    assert outcome.kind in ("protocol", "timeout"), outcome


# --------------------------------------------------------------------------- bombs


async def test_python_memory_bomb(pyodide: Any) -> None:
    outcome = await probe(
        pyodide,
        "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))",
        limits=Limits(timeout=60, memory_bytes=256 * MiB),
    )
    assert outcome.kind == "memory", outcome


async def test_single_huge_allocation(pyodide: Any) -> None:
    outcome = await probe(
        pyodide,
        "data = bytearray(1024 * 1024 * 1024)\nreturn len(data)",
        limits=Limits(timeout=60, memory_bytes=256 * MiB),
    )
    # Refused at once, the memory never used: the host has no evidence of the
    # limit, only the program's MemoryError (as for the CPython worker).
    assert outcome.kind in ("memory", "exception"), outcome
    assert outcome.kind == "memory" or outcome.message.endswith("MemoryError"), outcome


async def test_javascript_heap_bomb(pyodide: Any) -> None:
    outcome = await probe(
        pyodide,
        "arrays = js.Array.new()\nwhile True:\n    arrays.push(js.Array.new(1000000).fill(1.5))",
        limits=Limits(timeout=60, memory_bytes=256 * MiB, max_message_bytes=MiB),
    )
    # V8's out-of-memory crash (SIGTRAP) decides, not what it printed.
    assert outcome.kind == "memory", outcome
    assert "Fatal" not in outcome.message


async def test_array_buffer_bomb(pyodide: Any) -> None:
    # Backing stores live outside the V8 heap limit: RLIMIT_DATA and the RSS
    # watchdog have to catch these.
    outcome = await probe(
        pyodide,
        "buffers = []\n"
        "while True:\n"
        "    buffer = js.Uint8Array.new(128 * 1024 * 1024)\n"
        "    buffer.fill(1)\n"
        "    buffers.append(buffer)",
        limits=Limits(timeout=60, memory_bytes=256 * MiB),
    )
    assert outcome.kind == "memory", outcome


async def test_cpu_bomb_hits_the_wall_clock(pyodide: Any) -> None:
    outcome = await probe(pyodide, "while True:\n    pass", limits=Limits(timeout=1))
    assert outcome.kind == "timeout", outcome


async def test_cpu_bomb_hits_the_cpu_limit(pyodide: Any) -> None:
    outcome = await probe(
        pyodide, "while True:\n    pass", limits=Limits(timeout=30, cpu_seconds=1)
    )
    assert outcome.kind == "timeout", outcome
    assert "CPU" in outcome.message


async def test_runaway_recursion_is_an_exception(pyodide: Any) -> None:
    outcome = await probe(pyodide, "def f(n):\n    return f(n + 1)\nf(0)")
    assert outcome.kind == "exception", outcome
    assert "RecursionError" in outcome.message


# --------------------------------------------------------------------------- isolation


async def test_no_state_survives_between_runs(both: Any) -> None:
    first = await probe(
        both,
        """
import builtins, sys
js.globalThis.leaked = "from run one"
builtins.LEAKED = "from run one"
open("/tmp/leak.txt", "w").write("from run one")
sys.modules["leaky"] = builtins
return js.performance.timeOrigin
""",
    )
    second = await probe(
        both,
        """
import builtins, os, sys
return {
    "js": str(getattr(js.globalThis, "leaked", None)),
    "builtins": getattr(builtins, "LEAKED", None),
    "file": os.path.exists("/tmp/leak.txt"),
    "module": "leaky" in sys.modules,
    "started": js.performance.timeOrigin,
}
""",
    )
    assert first.ok and second.ok, (first, second)
    assert second.result["js"] in ("None", "undefined")
    assert second.result["builtins"] is None
    assert second.result["file"] is False
    assert second.result["module"] is False
    assert second.result["started"] != first.result  # another process
