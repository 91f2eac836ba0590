"""Nothing carries over between Pyodide runs, and the host decides how a run ended.

Web storage, the Cache API and the rest of Deno's JS surface need no Deno
permission, so Deno's permissions cannot be the wall for them. Two walls are
tested here, each on its own: the lockdown (``worker.js`` leaves the program's
realm only the language and a few harmless web APIs) and each worker's
throwaway home (its ``DENO_DIR``, removed with it). Runs with
``lockdown=False`` show the second wall holds by itself.

Then the outcome: whatever a program writes to Deno's stderr and whatever exit
code it makes Deno end with, the kind and the message are the host's own; the
stderr shows as captured output, marked and bounded.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import Limits, RunOutcome
from runtime.testing import TOOL_NAMES, ToolBox

from .pyodide_workers import open_runtime, spy_on_workers, tidied

pytestmark = [pytest.mark.anyio, pytest.mark.pyodide]

MiB = 1024 * 1024

PRELUDE = """
import inspect
import js
from pyodide.ffi import to_js

def obj(**fields):
    return to_js(fields, dict_converter=js.Object.fromEntries)

async def attempt(action):
    try:
        value = action()
        if inspect.isawaitable(value):
            value = await value
        return "ALLOWED: " + str(value)[:200]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def locked() -> AsyncIterator[Any]:
    async with open_runtime(start=True) as runtime:
        yield runtime


@pytest.fixture(scope="module", params=["locked", "unlocked"])
async def either(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The runtime as shipped, and one without the lockdown (the home is the only wall)."""
    async with open_runtime(start=True, lockdown=request.param == "locked") as runtime:
        yield runtime


async def run(runtime: Any, body: str, **limits: Any) -> RunOutcome:
    return await runtime.run(  # type: ignore[no-any-return]
        PRELUDE + body,
        tool_names=TOOL_NAMES,
        call_tool=ToolBox(),
        limits=Limits(**{"timeout": 30, **limits}),
    )


async def home_removed(runtime: Any, worker: Any) -> None:
    """Assert ``worker``'s home is gone once it exited and the runtime next collected.

    A runtime keeps no task of its own: a killed worker's home is removed by
    the thread the next run's end starts (or by ``aclose``), once the worker
    has exited.
    """
    with anyio.fail_after(10):
        while worker.alive:  # noqa: ASYNC110 - Deno's teardown takes tens of ms
            await anyio.sleep(0.01)
    await tidied(runtime)
    assert worker.home.exists()  # nothing removed it behind the runtime's back
    outcome = await run(runtime, "return 1")
    assert outcome.ok, outcome.message
    await tidied(runtime)
    assert not worker.home.exists()


def tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size, but Deno's shared module caches.

    Those hold V8's code and Deno's analysis of the modules Deno loads (the
    worker's own, keyed by their source): shared by design, and no program can
    add to them.
    """
    files = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.name.startswith(("v8_code_cache", "dep_analysis_cache")):
            files[str(path.relative_to(root))] = path.stat().st_size
    return files


# --------------------------------------------------------------------------- storage

PLANT = """
async def local():
    js.localStorage.setItem("ptc-planted", "planted")
    return js.localStorage.getItem("ptc-planted")

async def session():
    js.sessionStorage.setItem("ptc-planted", "planted")
    return js.sessionStorage.getItem("ptc-planted")

async def cache():
    store = await js.caches.open("ptc")
    await store.put("https://ptc.invalid/planted", js.Response.new("planted"))
    return await (await store.match("https://ptc.invalid/planted")).text()

async def indexed():
    return js.indexedDB.open("ptc")

async def kv():
    db = await js.Deno.openKv()
    await db.set(to_js(["ptc"]), "planted")
    return (await db.get(to_js(["ptc"]))).value

return {
    "localStorage": await attempt(local),
    "sessionStorage": await attempt(session),
    "caches": await attempt(cache),
    "indexedDB": await attempt(indexed),
    "openKv": await attempt(kv),
}
"""

READ = """
async def cache():
    store = await js.caches.open("ptc")
    found = await store.match("https://ptc.invalid/planted")
    return "nothing" if found is None else await found.text()

async def kv():
    db = await js.Deno.openKv()
    return (await db.get(to_js(["ptc"]))).value

return {
    "localStorage": await attempt(lambda: js.localStorage.getItem("ptc-planted")),
    "sessionStorage": await attempt(lambda: js.sessionStorage.getItem("ptc-planted")),
    "caches": await attempt(cache),
    "indexedDB": await attempt(lambda: js.indexedDB.open("ptc")),
    "openKv": await attempt(kv),
}
"""


async def test_no_storage_api_carries_a_value_to_a_later_run(either: Any) -> None:
    served = spy_on_workers(either)
    planted = await run(either, PLANT)
    read = await run(either, READ)
    assert planted.ok and read.ok, (planted, read)
    assert served[0] is not served[1]  # two processes, one after the other
    if either.lockdown:
        # Not there at all: nothing to store in.
        assert all(what.startswith("AttributeError") for what in planted.result.values())
    else:
        # There (the home is the wall): a value is stored, for this run only.
        assert planted.result["localStorage"] == "ALLOWED: planted"
        assert planted.result["caches"] == "ALLOWED: planted"
    assert not any("planted" in what for what in read.result.values()), read.result


async def test_filling_storage_leaves_the_host_disk_as_it_was(either: Any) -> None:
    deno_dir = either.install.deno_dir
    before = tree(deno_dir)
    served = spy_on_workers(either)
    outcome = await run(
        either,
        """
chunk = "x" * (1024 * 1024)
stored = {"localStorage": 0, "caches": 0}
errors = []
try:
    for index in range(50):
        js.localStorage.setItem(f"fill-{index}", chunk)
        stored["localStorage"] += 1
except Exception as exc:
    errors.append(f"{type(exc).__name__}: {exc}"[:200])
try:
    store = await js.caches.open("fill")
    for index in range(50):
        await store.put(f"https://ptc.invalid/{index}", js.Response.new(chunk))
        stored["caches"] += 1
except Exception as exc:
    errors.append(f"{type(exc).__name__}: {exc}"[:200])
return {"stored": stored, "errors": errors}
""",
        memory_bytes=512 * MiB,
    )
    assert outcome.ok, outcome.message
    (worker,) = served
    await home_removed(either, worker)  # its DENO_DIR and working directory went with it
    assert not worker.alive
    assert tree(deno_dir) == before
    if either.lockdown:
        assert outcome.result["stored"] == {"localStorage": 0, "caches": 0}


# --------------------------------------------------------------------------- workers, eval


async def test_nothing_runs_javascript_built_from_strings(locked: Any) -> None:
    outcome = await run(
        locked,
        """
import asyncio
ran = []

async def worker(url):
    worker = js.Worker.new(url, obj(type="module"))
    worker.onmessage = lambda event: ran.append(str(event.data))
    for _ in range(100):
        if ran:
            return "RAN: " + ran[0]
        await asyncio.sleep(0.02)
    worker.terminate()
    return "no answer"

source = "self.postMessage('ran')"
blob = lambda: js.URL.createObjectURL(js.Blob.new(to_js([source]), obj(type="text/javascript")))
return {
    "data_worker": await attempt(lambda: worker("data:text/javascript," + source)),
    "blob_url": await attempt(blob),
    "shared_worker": await attempt(lambda: js.SharedWorker.new("data:text/javascript," + source)),
    "eval": await attempt(lambda: js.eval("1 + 1")),
    "function": await attempt(lambda: js.Function.new("return 1")()),
    "node_vm": await attempt(
        lambda: js.process.getBuiltinModule("vm").runInThisContext("1 + 1")
    ),
    "deno_core": await attempt(lambda: js.Deno[js.Deno.internal].core.evalContext("1 + 1")),
    "broadcast": await attempt(lambda: js.BroadcastChannel.new("ptc")),
    "command": await attempt(lambda: js.Deno.Command.new("/bin/true")),
    "dlopen": await attempt(lambda: js.Deno.dlopen("libc.so.6", js.Object.new())),
    "websocket": await attempt(lambda: js.WebSocket.new("ws://127.0.0.1:9/")),
    "fetch": await attempt(lambda: js.fetch("data:text/plain,x")),
    "navigator": await attempt(lambda: js.navigator.userAgent),
    "prompt": await attempt(lambda: js.prompt("frame?")),
}
""",
    )
    assert outcome.ok, outcome.message
    for action, what in outcome.result.items():
        assert what.startswith(("AttributeError", "JsException: EvalError")), f"{action}: {what}"


# --------------------------------------------------------------------------- host information


# Walks the objects the program can reach from ``js`` and ``pyodide_js``
# (breadth first, getters included; the first WALK_LIMIT of them, which takes
# in everything within a few steps of either) and reports strings holding a needle.
WALK_LIMIT = 20000
WALK = """
from collections import deque
from pyodide.ffi import JsProxy

needles = NEEDLES
found = []
seen = js.WeakSet.new()
queue = deque([("js", js, 0), ("pyodide_js", __import__("pyodide_js"), 0)])
visited = 0

def check(path, value):
    if any(needle in value for needle in needles):
        found.append(path + " = " + value[:200])

while queue and visited < LIMIT:
    path, value, depth = queue.popleft()
    if seen.has(value):
        continue
    seen.add(value)
    visited += 1
    if js.ArrayBuffer.isView(value) or (js.Array.isArray(value) and value.length > 2000):
        continue
    if js.WebAssembly.Global.prototype.isPrototypeOf(value):
        continue  # Module.GOT makes ~9,000 of these, each holding a number
    if js.Error.prototype.isPrototypeOf(value):
        stack = js.Reflect.get(value, "stack")
        if isinstance(stack, str):
            check(path + ".stack", stack)
    try:
        keys = list(js.Reflect.ownKeys(value))
    except Exception:
        continue
    for key in keys:
        name = str(key)
        if name == "novalue":  # a sentinel of Pyodide's that breaks on inspection
            continue
        try:
            descriptor = js.Reflect.getOwnPropertyDescriptor(value, key)
            if js.Reflect.has(descriptor, "value"):
                items = [descriptor.value]
            else:
                items = [descriptor.get, descriptor.set, js.Reflect.get(value, key)]
        except Exception:  # a getter refused this receiver, or conversion failed
            continue
        for item in items:
            if isinstance(item, str):
                check(path + "." + name, item)
            elif isinstance(item, JsProxy) and js.Object(item) == item:
                # Functions deep down (Pyodide's ~6,500 wasm exports) hold
                # nothing but their name and length.
                if depth < 2 or not callable(item):
                    queue.append((path + "." + name, item, depth + 1))
    prototype = js.Reflect.getPrototypeOf(value)
    if isinstance(prototype, JsProxy):
        queue.append((path + ".__proto__", prototype, depth + 1))
return {"found": found[:20], "visited": visited, "left": len(queue)}
""".replace("LIMIT", str(WALK_LIMIT))


async def test_host_paths_are_nowhere_the_program_can_look(either: Any) -> None:
    from runtime._pyodide._assets import SHARED_MODULES, WORKER_DIR
    from runtime._pyodide._deno import HOME_PREFIX

    install = either.install
    needles = [
        str(install.deno),
        str(WORKER_DIR),
        *map(str, SHARED_MODULES),
        str(install.assets),
        str(install.deno_dir.parent),
        HOME_PREFIX,
        os.getcwd(),
    ]
    outcome = await run(either, WALK.replace("NEEDLES", repr(needles)), timeout=60)
    assert outcome.ok, outcome.message
    if either.lockdown:
        assert outcome.result["found"] == []
        assert outcome.result["left"] == 0  # the walk got everywhere
    else:  # the same walk finds them through Deno's API (Deno.mainModule and the like)
        assert outcome.result["found"] != []


async def test_no_host_facts_and_no_way_to_end_the_process(locked: Any) -> None:
    outcome = await run(
        locked,
        """
import os, sys

def set_prepare_stack_trace():
    js.Error.prepareStackTrace = js.Object.new
    return js.Error.new("again").stack

return {
    "exec_path": await attempt(lambda: js.Deno.execPath()),
    "main_module": await attempt(lambda: js.Deno.mainModule),
    "cwd": await attempt(lambda: js.Deno.cwd()),
    "args": await attempt(lambda: js.Deno.args),
    "pid": await attempt(lambda: js.Deno.pid),
    "exit": await attempt(lambda: js.Deno.exit(3)),
    "process_exit": await attempt(lambda: js.process.exit(3)),
    "process_abort": await attempt(lambda: js.process.abort()),
    "process_argv": await attempt(lambda: js.process.argv),
    "close": await attempt(lambda: js.close()),
    "location": await attempt(lambda: js.location.href),
    "stack_trace_hook": await attempt(set_prepare_stack_trace),
    "stack": js.Error.new("here").stack,
    "python_cwd": os.getcwd(),
    "python_argv": sys.argv,
}
""",
    )
    assert outcome.ok, outcome.message
    result = outcome.result
    assert result.pop("stack") == "Error: here"  # no frames, so no file names
    assert result.pop("python_cwd") == "/home/pyodide"
    assert result.pop("python_argv") == [""]
    assert result.pop("stack_trace_hook").startswith("JsException: TypeError")  # read only
    for fact, what in result.items():
        assert what.startswith("AttributeError"), f"{fact}: {what}"


# --------------------------------------------------------------------------- the host's verdict

FORGED = (
    "# Fatal JavaScript out of memory: Reached heap limit\n"
    "Out of memory: the host has decided\n"
    "HOST-WORDS the run passed every check\n"
)


async def test_stderr_cannot_forge_a_memory_kill_nor_speak_for_the_host(locked: Any) -> None:
    outcome = await run(
        locked,
        f"""
import asyncio
from pyodide.ffi import create_once_callable
for line in {FORGED!r}.splitlines():
    js.console.error(line)

def crash():
    raise RuntimeError("out of memory")

js.setTimeout(create_once_callable(crash), 0)  # uncaught in JS: Deno exits
await asyncio.sleep(10)
return "not reached"
""",
    )
    assert outcome.kind == "crashed", outcome
    assert "HOST-WORDS" not in outcome.message
    assert "memory" not in outcome.message
    assert "[stderr] HOST-WORDS the run passed every check" in outcome.logs
    assert all(
        line.startswith("[stderr] ")
        for line in outcome.logs[
            outcome.logs.index("[stderr] # Fatal JavaScript out of memory: Reached heap limit") :
        ]
    )


@pytest.fixture(scope="module")
async def unlocked() -> AsyncIterator[Any]:
    async with open_runtime(start=True, lockdown=False) as runtime:
        yield runtime


@pytest.mark.parametrize("code", [0, 1, 3, 4, 5, 70, 134, 137])
async def test_deno_exit_codes_decide_nothing(unlocked: Any, code: int) -> None:
    # Without the lockdown the program reaches Deno.exit and Deno's stderr.
    outcome = await run(
        unlocked,
        f"""
js.Deno.stderr.writeSync(js.TextEncoder.new().encode({FORGED!r}))
js.Deno.exit({code})
""",
    )
    assert outcome.kind == "crashed", outcome
    assert "HOST-WORDS" not in outcome.message
    assert "memory" not in outcome.message
    assert f"code {code}" in outcome.message
    assert "[stderr] HOST-WORDS the run passed every check" in outcome.logs


async def test_the_stderr_shown_is_bounded_by_the_output_limit(locked: Any) -> None:
    outcome = await run(
        locked,
        """
import asyncio
from pyodide.ffi import create_once_callable
print("before")
for index in range(2000):
    js.console.error(f"line {index} " + "x" * 500)

def crash():
    raise RuntimeError("boom")

js.setTimeout(create_once_callable(crash), 0)
await asyncio.sleep(10)
""",
        max_output_bytes=1500,
    )
    assert outcome.kind == "crashed", outcome
    assert "x" * 100 not in outcome.message
    shown = [line for line in outcome.logs if line.startswith("[stderr] ")]
    assert shown  # the tail, marked
    assert sum(len(line.encode()) + 1 for line in outcome.logs) <= 1500
