"""The CPython subprocess backend: its wire protocol, worker pool and hygiene."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

import runtime
from runtime import (
    Limits,
    RunOutcome,
    RuntimeClosedError,
    RuntimeUnavailableError,
    SubprocessRuntime,
    ToolAnswer,
    WorkerStartError,
    get_runtime,
)
from runtime._host._pool import Worker, take_greeting
from runtime._host._session import OpenRuns, drive_run
from runtime._worker._bootstrap import WorkerSettings, compile_for_worker, compile_program
from runtime._worker._imports import DEFAULT_ALLOWED_MODULES
from runtime._worker._prewarm import prewarm, warm_up
from runtime._worker._protocol import FrameDecoder, NotJsonError, ProtocolError, check_json
from runtime.testing import ManualCancel, ToolBox

from .conftest import MeetingToolBox, children_of, collected_spares

pytestmark = pytest.mark.anyio

READY = {"type": "ready", "layers": [["rlimits", True, "fake"]]}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def bare() -> AsyncIterator[SubprocessRuntime]:
    """OS layers off and ``os``/``sys``/``signal`` importable: to misbehave on purpose."""
    async with SubprocessRuntime(
        layers=(), allowed_modules=["asyncio", "json", "os", "signal", "stat", "sys"]
    ) as backend:
        yield backend


# --------------------------------------------------------------------------- protocol units


def test_frame_decoder_splits_and_bounds() -> None:
    decoder = FrameDecoder(max_bytes=10)
    data = b"".join(struct.pack(">I", len(p)) + p for p in (b"abc", b"", b"0123456789"))
    assert decoder.feed(data[:5]) == []
    assert decoder.feed(data[5:]) == [b"abc", b"", b"0123456789"]
    with pytest.raises(ProtocolError, match="exceeds"):
        decoder.feed(struct.pack(">I", 11))


def test_check_json_paths() -> None:
    check_json({"a": [1, 2.5, "x", None, True, {"b": []}]})
    for value, path in (
        ({"a": [1, (2,)]}, "$['a'][1]"),
        ([float("inf")], "$[0]"),
        ({1: 2}, "$"),
        ([2**64], "$[0]"),
    ):
        with pytest.raises(NotJsonError) as info:
            check_json(value)
        assert info.value.path == path
    nested: list[Any] = []
    nested.append(nested)
    with pytest.raises(NotJsonError, match="nesting"):
        check_json(nested)


_NO_RESULT = object()


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("return", _NO_RESULT),
        ("x = 1", _NO_RESULT),
        ("if True:\n    return\nreturn 1", _NO_RESULT),
        (
            "for i in [1]:\n    while True:\n        with memoryview(b''):\n            return",
            _NO_RESULT,
        ),
        ("try:\n    raise ValueError\nexcept ValueError:\n    return", _NO_RESULT),
        ("try:\n    pass\nfinally:\n    return", _NO_RESULT),
        ("for i in []:\n    pass\nelse:\n    return", _NO_RESULT),
        ("match 1:\n    case 1:\n        return", _NO_RESULT),
        ("return None", None),
        ("def f():\n    return\nreturn f()", None),
        ("class C:\n    def m(self):\n        return\nreturn C().m()", None),
        ("f = lambda: None\nreturn f()", None),
        ("x = 'return'\nreturn x", "return"),
    ],
)
def test_bare_return_means_no_result_at_the_top_level_only(code: str, expected: object) -> None:
    # Programs without "yield" take a statement-only walk: the same rewrite.
    namespace: dict[str, Any] = {"__ptc_nothing__": _NO_RESULT}
    exec(compile_program(code), namespace)
    coroutine = namespace["<module>"]()
    with pytest.raises(StopIteration) as stopped:
        coroutine.send(None)
    assert stopped.value.value is expected or stopped.value.value == expected


@pytest.mark.parametrize("restricted", [False, True])
def test_the_prewarm_answers_its_own_calls_and_sends_nothing(restricted: bool) -> None:
    # A spare walks a run's path, tool calls included, before it says "ready":
    # nothing of that may reach the host, and the output streams come back.
    ours, host = socket.socketpair()
    loop = asyncio.new_event_loop()
    stdout = sys.stdout
    loop.call_later(10, loop.stop)  # a prewarm waiting for the host fails, not hangs
    try:
        prewarm(ours, loop, WorkerSettings(allowed_modules=frozenset(), restricted=restricted))
        assert sys.stdout is stdout
        host.setblocking(False)
        with pytest.raises(BlockingIOError):
            host.recv(1)
    finally:
        loop.close()
        ours.close()
        host.close()


def test_the_zygotes_warm_up_leaves_nothing_open_and_no_loop_set() -> None:
    # warm_up runs the prewarm program in the zygote before it forks: whatever it
    # opened (loops, their selectors and self-pipes, the channel) is closed again,
    # or every worker would inherit it.
    before = sorted(os.listdir("/proc/self/fd"))
    warm_up(WorkerSettings(allowed_modules=frozenset(), restricted=False), rounds=2)
    assert sorted(os.listdir("/proc/self/fd")) == before
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
    assert asyncio.get_event_loop_policy()._local._loop is None  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- greetings


def _frame(frame: dict[str, Any]) -> bytes:
    payload = orjson.dumps(frame)
    return struct.pack(">I", len(payload)) + payload


def _greeting_pair(data: bytes) -> tuple[socket.socket, socket.socket]:
    host, worker = socket.socketpair()
    host.setblocking(False)
    if data:
        worker.sendall(data)
    return host, worker


@pytest.mark.parametrize(
    "frame",
    [READY, {"type": "error", "kind": "sandbox", "message": "no user namespaces"}],
)
def test_a_whole_greeting_is_taken_and_nothing_after_it(frame: dict[str, Any]) -> None:
    after = _frame({"type": "done", "result": 1})
    host, worker = _greeting_pair(_frame(frame) + after)
    with host, worker:
        assert take_greeting(host) == frame
        assert host.recv(1 << 16) == after


@pytest.mark.parametrize(
    "data",
    [
        b"",  # nothing yet
        b"\x00\x00",  # part of a header
        _frame(READY)[:-3],  # part of a frame
        struct.pack(">I", 5) + b"nope!",  # not JSON
        _frame({"type": "ready"}),  # malformed
        _frame({"type": "log", "text": "hello"}),  # not a greeting
    ],
)
def test_anything_else_is_left_for_the_run_to_read(data: bytes) -> None:
    host, worker = _greeting_pair(data)
    with host, worker:
        assert take_greeting(host) is None
        if data:
            assert host.recv(1 << 16) == data


async def test_a_spare_greeted_between_runs_is_run_without_its_greeting(
    bare: SubprocessRuntime,
) -> None:
    # The pool takes a spare's "ready" once it came (after each run, or while
    # one starts); the run given that spare then has no frame to read first.
    pool = bare._pool
    worker = await pool.acquire(bare._default_key)
    if worker.greeting is None:
        await anyio.wait_readable(worker.sock)  # its "ready" came
    pool._spares.appendleft(worker)  # a spare again, the next to go
    pool.greet()
    assert worker.greeting is not None and worker.greeting["type"] == "ready"
    outcome = await bare.run("return 1", tool_names=[], call_tool=ToolBox())
    assert outcome.result == 1, outcome
    assert worker not in pool._spares  # (it was the one run)


# --------------------------------------------------------------------------- hostile worker


class FakeWorker:
    """The worker side of a channel, written by the test instead of a process."""

    def __init__(self) -> None:
        host, self.peer = socket.socketpair()
        status_r, self.status_w = os.pipe()
        os.set_blocking(status_r, False)
        self.worker = Worker(os.getpid(), host, status_r)
        self.worker._exited = True  # never signal the test process

    def send(self, *frames: Any) -> None:
        for frame in frames:
            payload = frame if isinstance(frame, bytes) else orjson.dumps(frame)
            self.peer.sendall(struct.pack(">I", len(payload)) + payload)

    def exit(self, status: int, cpu: float = 0.0) -> None:
        os.write(self.status_w, b"%d %.3f 0" % (status, cpu))
        os.close(self.status_w)
        self.status_w = -1
        self.peer.close()

    def close(self) -> None:
        self.worker.close()
        if self.status_w >= 0:
            os.close(self.status_w)
        self.peer.close()


@pytest.fixture
def fake() -> Iterator[FakeWorker]:
    worker = FakeWorker()
    yield worker
    worker.close()


async def drive(fake: FakeWorker, limits: Limits | None = None, **kw: Any) -> RunOutcome:
    return await drive_run(
        fake.worker,
        code="return 1",
        tool_names=kw.pop("tool_names", ["echo"]),
        call_tool=kw.pop("call_tool", ToolBox()),
        limits=limits or Limits(timeout=5),
        cancel=kw.pop("cancel", None),
        runs=kw.pop("runs", None),
    )


@pytest.mark.parametrize(
    "frames",
    [
        [b"not json"],
        [b"[1, 2]"],
        [READY, {"type": "nope"}],
        [READY, {"type": "done", "result": 1, "extra": 2}],
        [READY, {"type": "call", "id": 2, "name": "echo", "args": {}}],
        [
            READY,
            {"type": "call", "id": 1, "name": "echo", "args": {}},
            {"type": "call", "id": 1, "name": "echo", "args": {}},
        ],
        [READY, {"type": "call", "id": 1, "name": "rm -rf", "args": {}}],
        [READY, {"type": "call", "id": "1", "name": "echo", "args": {}}],
        [READY, {"type": "log", "text": 5}],
        [READY, {"type": "error", "kind": "cancelled", "message": "x"}],
        [READY, {"type": "error", "kind": "sandbox", "message": "late"}],
        [READY, READY],
        [{"type": "done"}],
        [{"type": "ready", "layers": "all"}],
        [{**READY, "prewarmed": "yes"}],
        [{**READY, "prewarmed": True, "extra": 1}],
    ],
)
async def test_hostile_frames_end_as_protocol(fake: FakeWorker, frames: list[Any]) -> None:
    fake.send(*frames)
    outcome = await drive(fake)
    assert outcome.kind == "protocol", outcome


async def test_oversized_frame_is_refused_before_reading_it(fake: FakeWorker) -> None:
    fake.send(READY)
    fake.peer.sendall(struct.pack(">I", 2**31))
    outcome = await drive(fake, Limits(timeout=5, max_message_bytes=1024))
    assert outcome.kind == "protocol"
    assert "exceeds" in outcome.message


async def test_host_enforces_output_limit(fake: FakeWorker) -> None:
    fake.send(READY, *[{"type": "log", "text": "x" * 100}] * 50)
    outcome = await drive(fake, Limits(timeout=5, max_output_bytes=1000))
    assert outcome.kind == "output_limit"
    assert len(outcome.logs) < 11


async def test_host_enforces_tool_call_limit(fake: FakeWorker) -> None:
    tools = ToolBox()
    calls = [{"type": "call", "id": i, "name": "echo", "args": {}} for i in range(1, 5)]
    fake.send(READY, *calls)
    outcome = await drive(fake, Limits(timeout=5, max_tool_calls=2), call_tool=tools)
    assert outcome.kind == "tool_call_limit"
    assert outcome.tool_calls == 2


async def test_a_worker_that_stops_reading_cannot_hold_the_run_past_its_deadline(
    fake: FakeWorker,
) -> None:
    # The worker asks for a big answer, says it is done and never reads: the
    # answer's write blocks, with no call being answered any more. The outcome
    # is the worker's, once the run's deadline ends the wait for that write.
    async def call_tool(name: str, args: Any) -> ToolAnswer:
        if args["n"] == 1:  # answered by the run's own task; the next is a runner's
            fake.send({"type": "call", "id": 2, "name": "echo", "args": {"n": 2}})
            return ToolAnswer.success("small")
        fake.send({"type": "done", "result": 1})
        return ToolAnswer.success("x" * (8 << 20))

    fake.send(READY, {"type": "call", "id": 1, "name": "echo", "args": {"n": 1}})
    started = time.perf_counter()
    limits = Limits(timeout=0.5, max_message_bytes=16 << 20)
    with anyio.fail_after(10):
        outcome = await drive(fake, limits, call_tool=call_tool)
    assert outcome.result == 1, outcome
    assert outcome.tool_calls == 2
    assert time.perf_counter() - started < 5


async def test_host_enforces_wall_clock(fake: FakeWorker) -> None:
    fake.send(READY)
    started = time.perf_counter()
    outcome = await drive(fake, Limits(timeout=0.2))
    assert outcome.kind == "timeout"
    assert outcome.message == "the run exceeded its wall-clock limit of 0.2 s"
    assert time.perf_counter() - started < 2


async def test_the_wall_clock_covers_a_hanging_tool(fake: FakeWorker) -> None:
    tools = ToolBox()
    fake.send(READY, {"type": "call", "id": 1, "name": "hang", "args": {}})
    outcome = await drive(fake, Limits(timeout=0.2), call_tool=tools, tool_names=["hang"])
    assert outcome.kind == "timeout"
    assert tools.cancelled == 1 and tools.in_flight == 0  # settled before the run returned


async def test_a_cancel_signal_ends_the_run(fake: FakeWorker) -> None:
    tools = ToolBox()
    signal_ = ManualCancel()

    async def hang(name: str, args: Any) -> ToolAnswer:
        signal_.fire()
        return await tools(name, args)

    fake.send(READY, {"type": "call", "id": 1, "name": "hang", "args": {}})
    outcome = await drive(
        fake, Limits(timeout=30), call_tool=hang, tool_names=["hang"], cancel=signal_
    )
    assert outcome.kind == "cancelled"
    assert tools.cancelled == 1
    assert signal_.listener_count == 0


async def test_closing_the_runtime_ends_the_runs_it_holds(fake: FakeWorker) -> None:
    # The runtime closes (in another task) while a run waits on its worker:
    # the run ends at once, as crashed, and leaves the runtime's open runs.
    fake.send(READY)
    runs = OpenRuns()

    async def close_soon() -> None:
        await anyio.sleep(0.05)
        assert len(runs) == 1
        runs.close()

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        group.start_soon(close_soon)
        outcome = await drive(fake, Limits(timeout=30), runs=runs)
    assert outcome.kind == "crashed"
    assert outcome.message == "the runtime was closed during the run"
    assert len(runs) == 0
    assert time.perf_counter() - started < 5


async def test_flooding_worker_still_times_out(fake: FakeWorker) -> None:
    fake.send(READY)

    def flood() -> None:
        frame = orjson.dumps({"type": "log", "text": "y"})
        chunk = (struct.pack(">I", len(frame)) + frame) * 2000
        try:
            while True:
                fake.peer.sendall(chunk)
        except OSError:
            return

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, flood)
        outcome = await drive(fake, Limits(timeout=0.5, max_output_bytes=2**40))
        fake.peer.shutdown(socket.SHUT_RDWR)
    assert outcome.kind == "timeout"


async def test_answers_reach_the_worker(fake: FakeWorker) -> None:
    fake.send(READY, {"type": "call", "id": 1, "name": "echo", "args": {"a": 1}})

    async def worker_side() -> None:
        await anyio.to_thread.run_sync(read_run_and_answer)

    def read_run_and_answer() -> None:
        decoder = FrameDecoder(1 << 20)
        payloads: list[bytes] = []
        while len(payloads) < 3:
            payloads += decoder.feed(fake.peer.recv(65536))
        run, names, answer = payloads[0], payloads[1], orjson.loads(payloads[2])
        assert orjson.loads(run)["type"] == "run"
        assert orjson.loads(run)["tools"] is None and names == b"\necho\n"  # (apart)
        assert answer == {"type": "answer", "id": 1, "ok": True, "value": {"a": 1}}
        fake.send({"type": "done", "result": answer["value"]})

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker_side)
        outcome = await drive(fake)
    assert outcome.ok, outcome
    assert outcome.result == {"a": 1}


async def test_sandbox_refusal_before_ready(fake: FakeWorker) -> None:
    fake.send({"type": "error", "kind": "sandbox", "message": "sandbox: no seccomp"})
    outcome = await drive(fake)
    assert outcome.kind == "sandbox"
    assert "seccomp" in outcome.message


@pytest.mark.parametrize(
    ("status", "cpu", "kind", "fragment"),
    [
        (signal.SIGSEGV, 0.0, "crashed", "SIGSEGV"),
        (signal.SIGXCPU, 2.0, "timeout", "CPU"),
        (signal.SIGKILL, 2.0, "timeout", "CPU"),
        (signal.SIGKILL, 0.1, "crashed", "SIGKILL"),
        (signal.SIGSYS, 0.0, "crashed", "forbidden system call"),
        (3 << 8, 0.0, "crashed", "code 3"),  # an exit code decides no kind
        (7 << 8, 0.0, "crashed", "code 7"),
    ],
)
async def test_exit_without_final_frame(
    fake: FakeWorker, status: int, cpu: float, kind: str, fragment: str
) -> None:
    fake.send(READY, {"type": "log", "text": "last words"})
    fake.exit(status, cpu)
    outcome = await drive(fake, Limits(timeout=5, cpu_seconds=2))
    assert outcome.kind == kind, outcome
    assert fragment in outcome.message
    assert outcome.logs == ["last words"]


# --------------------------------------------------------------------------- real workers


async def test_stderr_is_captured(bare: SubprocessRuntime) -> None:
    outcome = await bare.run(
        "import sys\nsys.stderr.write('err line\\n')\nprint('out line')",
        tool_names=[],
        call_tool=ToolBox(),
    )
    assert outcome.ok, outcome.message
    assert outcome.logs == ["err line", "out line"]


async def test_worker_killed_by_signal_is_crashed(bare: SubprocessRuntime) -> None:
    outcome = await bare.run(
        "import os, signal\nprint('bye')\nos.kill(os.getpid(), signal.SIGSEGV)",
        tool_names=[],
        call_tool=ToolBox(),
    )
    assert outcome.kind == "crashed", outcome
    assert "SIGSEGV" in outcome.message
    assert outcome.logs == ["bye"]


async def test_worker_exit_is_crashed(bare: SubprocessRuntime) -> None:
    outcome = await bare.run("import os\nos._exit(7)", tool_names=[], call_tool=ToolBox())
    assert outcome.kind == "crashed"
    assert "code 7" in outcome.message


async def test_worker_writing_garbage_on_the_channel_is_killed(bare: SubprocessRuntime) -> None:
    code = """
import os, stat
for fd in range(3, 64):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, b"\\x00\\x00\\x00\\x05hello")
    except OSError:
        pass
import asyncio
await asyncio.sleep(30)
"""
    started = time.perf_counter()
    outcome = await bare.run(code, tool_names=[], call_tool=ToolBox())
    assert outcome.kind == "protocol", outcome
    assert time.perf_counter() - started < 10


async def test_zygote_crash_is_survived(bare: SubprocessRuntime) -> None:
    await bare.start()
    pid = bare._pool.zygote_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await anyio.sleep(0.1)
    outcome = await bare.run("return 'alive'", tool_names=[], call_tool=ToolBox())
    assert outcome.result == "alive"
    assert bare._pool.zygote_pid != pid


async def _settle(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Poll ``condition`` (process state has no event to wait on) until it holds."""
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.02)
    await anyio.sleep(0.05)


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


async def test_no_leaks_and_clean_shutdown() -> None:
    backend = SubprocessRuntime(layers=(), spares=1)
    try:
        await backend.start()
        spares_before = await collected_spares(backend._pool)
        before = _open_fds()
        for index in range(20):
            outcome = await backend.run(f"return {index}", tool_names=[], call_tool=ToolBox())
            assert outcome.result == index
        await backend.run(
            "while True:\n    pass", tool_names=[], call_tool=ToolBox(), limits=Limits(timeout=0.2)
        )
        zygote = backend._pool.zygote_pid
        assert zygote is not None
        tmp = backend._pool._zygote.tmp if backend._pool._zygote else None
        assert tmp is not None
        # Only the spares are left: one, or two if the runs came back to back
        # (see WorkerPool). Each holds a process, a work directory, its channel
        # and its status pipe.
        spares = await collected_spares(backend._pool)
        assert spares_before == 1 and spares in (1, 2)
        await _settle(lambda: len(children_of(zygote)) == spares and len(os.listdir(tmp)) == spares)
        assert len(_open_fds()) == len(before) + 2 * (spares - spares_before)
        await backend.aclose()
        await backend.aclose()
        assert not _exists(tmp)
        assert not _exists(f"/proc/{zygote}")
        with pytest.raises(RuntimeClosedError):
            await backend.run("return 1", tool_names=[], call_tool=ToolBox())
    finally:
        await backend.aclose()  # (a failed check above leaves nothing to the next test)


async def test_the_work_directory_goes_with_its_worker_whatever_the_program_left_in_it() -> None:
    # An empty one is removed with one rmdir; one the program left a file in,
    # whole (no file can hold a byte, RLIMIT_FSIZE is 0, but one can be made).
    async with SubprocessRuntime(spares=0) as backend:
        tmp = None
        for code, expected in [
            ("return 1", 1),
            (
                "open('/tmp/note.txt', 'w').close()\n"
                "with open('/tmp/note.txt') as f:\n    return ['made', f.read()]",
                ["made", ""],
            ),
        ]:
            outcome = await backend.run(code, tool_names=[], call_tool=ToolBox())
            assert outcome.ok and outcome.result == expected, outcome
            zygote = backend._pool._zygote
            assert zygote is not None
            tmp = zygote.tmp
            await _settle(lambda: os.listdir(tmp) == [])  # noqa: B023
        assert tmp is not None


def _namespaces_of(pid: int) -> dict[str, str]:
    kinds = ("user", "mnt", "net", "ipc", "uts", "pid")
    return {kind: os.readlink(f"/proc/{pid}/ns/{kind}") for kind in kinds}


def _interfaces_of(pid: int) -> tuple[list[str], str]:
    """The network interfaces ``pid`` sees, and its local routing table (empty: loopback down)."""
    with open(f"/proc/{pid}/net/dev") as dev:
        names = [line.split(":")[0].strip() for line in dev.readlines()[2:]]
    with open(f"/proc/{pid}/net/fib_trie") as trie:
        return names, trie.read()


@pytest.mark.parametrize(
    ("options", "shared"),
    [
        ({}, ("user", "net")),
        ({"isolation": "best-effort"}, ("user", "net")),
        # Workers that may open sockets get a network namespace of their own.
        ({"layers": ("namespaces", "landlock")}, ("user",)),
    ],
    ids=["strict", "best-effort", "seccomp off"],
)
async def test_workers_join_the_template_and_get_the_other_namespaces_fresh(
    options: dict[str, Any], shared: tuple[str, ...]
) -> None:
    # The zygote's template: one user namespace, one read-only root and one empty
    # network, made once; each worker joins the first, copies the second, joins the
    # third only if its seccomp filter denies it sockets, and makes the rest anew.
    async with SubprocessRuntime(spares=2, **options) as backend:
        outcome = await backend.run("return 1", tool_names=[], call_tool=ToolBox())
        assert outcome.result == 1
        zygote = backend._pool.zygote_pid
        assert zygote is not None and backend._pool._zygote is not None
        tmp = backend._pool._zygote.tmp
        await _settle(lambda: len(children_of(zygote)) == 2)  # the spares; no holder left
        spares = children_of(zygote)
        first, second = (_namespaces_of(pid) for pid in spares)
        host = _namespaces_of(os.getpid())
        assert _namespaces_of(zygote) == host  # the zygote itself stays where it was
        for kind in ("user", "mnt", "net", "ipc", "uts", "pid"):
            if kind in shared:
                assert first[kind] == second[kind] != host[kind], kind
            else:
                assert len({first[kind], second[kind], host[kind]}) == 3, kind
        # Shared or not, a worker's network has no interface but a loopback that is down.
        for pid in spares:
            interfaces, local_routes = _interfaces_of(pid)
            assert interfaces == ["lo"]
            assert "127.0.0.1" not in local_routes, local_routes
        # Their workdirs are tmpfs of their own: nothing of theirs on the host.
        assert os.listdir(tmp) == []


async def test_each_run_draws_random_numbers_of_its_own() -> None:
    # Every worker is forked from one zygote: each must reseed the shared generator.
    async with SubprocessRuntime(spares=2) as backend:
        drawn = [
            (
                await backend.run(
                    "import random\nreturn random.getrandbits(64)",
                    tool_names=[],
                    call_tool=ToolBox(),
                )
            ).result
            for _ in range(4)
        ]
    assert all(isinstance(value, int) for value in drawn), drawn
    assert len(set(drawn)) == 4, drawn


_SEEN = "try:\n    open('mine.txt').close()\nexcept FileNotFoundError:\n    return 'absent'\nreturn 'seen'"


async def test_a_runs_workdir_is_its_own_even_while_another_runs() -> None:
    # Two runs at once: a file the first makes is not in the second's workdir.
    made = anyio.Event()
    listed = anyio.Event()

    async def call(name: str, args: Any) -> ToolAnswer:
        if name == "made":
            made.set()
            await listed.wait()
        else:
            await made.wait()
        return ToolAnswer.success(None)

    async with SubprocessRuntime(spares=2) as backend:
        results: dict[str, Any] = {}

        async def first() -> None:
            outcome = await backend.run(
                "open('mine.txt', 'w').close()\nawait tools.made({})\n" + _SEEN,
                tool_names=["made", "wait"],
                call_tool=call,
            )
            results["first"] = outcome

        async def second() -> None:
            outcome = await backend.run(
                "await tools.wait({})\n" + _SEEN,
                tool_names=["made", "wait"],
                call_tool=call,
            )
            results["second"] = outcome
            listed.set()

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            group.start_soon(second)
    assert results["second"].ok and results["second"].result == "absent", results["second"]
    assert results["first"].ok and results["first"].result == "seen", results["first"]


def _mapped_files(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[5].rsplit("/", 1)[-1] for line in maps if len(line.split()) > 5}


async def test_the_zygote_maps_no_library_its_workers_have_no_use_for() -> None:
    # Each fork copies the zygote's mappings and each exit tears them down. shutil
    # (needed only for a work directory a program left files in) loads bz2 and
    # lzma; TLS is of no use without a network.
    async with SubprocessRuntime(spares=0) as backend:
        outcome = await backend.run("return 1", tool_names=[], call_tool=ToolBox())
        assert outcome.result == 1
        zygote = backend._pool.zygote_pid
        assert zygote is not None
        mapped = _mapped_files(zygote)
    assert any(name.startswith("_asyncio") for name in mapped), mapped  # (the check reads maps)
    unused = [name for name in mapped if name.startswith(("_bz2", "_lzma", "libbz2", "liblzma"))]
    unused += [name for name in mapped if name.startswith(("_ssl", "libssl"))]
    assert unused == []


async def test_no_spares_and_own_limits() -> None:
    async with SubprocessRuntime(layers=(), spares=0, limits=Limits(timeout=5)) as backend:
        assert backend.limits.timeout == 5
        outcome = await backend.run("return 2", tool_names=[], call_tool=ToolBox())
        assert outcome.result == 2


async def test_strict_runs_or_refuses() -> None:
    async with SubprocessRuntime(isolation="strict") as backend:
        outcome = await backend.run("return 3", tool_names=[], call_tool=ToolBox())
    assert outcome.result == 3 or outcome.kind == "sandbox"


async def test_restricted_mode() -> None:
    async with SubprocessRuntime(restricted=True) as backend:

        async def echo(name: str, args: Any) -> ToolAnswer:
            return ToolAnswer.success(args)

        ok = await backend.run(
            "r = await tools.echo({'a': 1})\nreturn r['a']", tool_names=["echo"], call_tool=echo
        )
        assert ok.result == 1, ok
        refused = await backend.run("return ().__class__", tool_names=[], call_tool=echo)
        assert refused.kind == "syntax"
        assert "__class__" in refused.message


async def test_host_compiled_programs_behave_like_worker_compiled_ones(
    bare: SubprocessRuntime,
) -> None:
    assert compile_for_worker("return (", restricted=False) is None
    # Over the host's size limit, the worker compiles the program itself.
    padding = "\n" * 20_000

    def unshifted(message: str) -> str:
        return re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) % 20_000}", message)

    cases = {
        "x = 1\nprint('hi')\nraise ValueError(x)": "exception",
        "return (": "syntax",
        "from __future__ import annotations\nx: undefined = 2\nreturn x": None,
    }
    for code, kind in cases.items():
        small = await bare.run(code, tool_names=[], call_tool=ToolBox())
        assert bare._pool.compiles_like_host  # the same interpreter: compiled on the host
        big = await bare.run(padding + code, tool_names=[], call_tool=ToolBox())
        assert small.kind == big.kind == kind, (small, big)
        assert (small.logs, small.result) == (big.logs, big.result)
        assert small.message == unshifted(big.message)


async def test_a_program_that_comes_again_is_compiled_once(bare: SubprocessRuntime) -> None:
    code = "counter = [0]\ncounter[0] += 1\nprint(counter)\nreturn counter[0]"
    before = bare._compile.cache_info()
    first = await bare.run(code, tool_names=[], call_tool=ToolBox())
    second = await bare.run(code, tool_names=[], call_tool=ToolBox())
    after = bare._compile.cache_info()
    # Every worker loads its own code object: nothing carries over between runs.
    assert (first.result, first.logs) == (second.result, second.logs) == (1, ["[1]"])
    assert after.misses - before.misses == 1
    assert after.hits - before.hits == 1


async def test_the_zygote_yields_the_cpu_and_a_worker_does_not(bare: SubprocessRuntime) -> None:
    # The zygote (forking, reaping) runs as SCHED_BATCH, which never preempts
    # the host when it wakes up; a worker switches back to the normal policy
    # before it reports ready, so a program runs like any other process.
    await bare.start()
    zygote = bare._pool.zygote_pid
    assert zygote is not None
    assert os.sched_getscheduler(zygote) == os.SCHED_BATCH
    outcome = await bare.run(
        "import os\nreturn os.sched_getscheduler(0)", tool_names=[], call_tool=ToolBox()
    )
    assert outcome.result == os.SCHED_OTHER, outcome


# --------------------------------------------------------------------------- public surface


def test_get_runtime() -> None:
    backend = get_runtime("subprocess", spares=0)
    assert isinstance(backend, SubprocessRuntime)
    assert backend.name == "subprocess"
    with pytest.raises(RuntimeUnavailableError, match="known runtimes"):
        get_runtime("jython")


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="layers"):
        SubprocessRuntime(layers=["firewall"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="spares"):
        SubprocessRuntime(spares=-1)


def test_public_names() -> None:
    # ruff's order (RUF022): constants first, then the rest
    assert runtime.__all__ == sorted(runtime.__all__, key=lambda name: (not name.isupper(), name))
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None


# --------------------------------------------------------------------------- housekeeping


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (reaped, or a zombie waiting to be)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


@pytest.fixture
async def housekept() -> AsyncIterator[SubprocessRuntime]:
    """A runtime with one spare (the same in a block or not: it has no tasks of its own)."""
    async with SubprocessRuntime(
        layers=(), spares=1, allowed_modules=["asyncio", "os", "stat"]
    ) as backend:
        yield backend


async def test_housekeeping_ends_a_finished_worker_after_its_run(
    housekept: SubprocessRuntime,
) -> None:
    await housekept.run("return 0", tool_names=[], call_tool=ToolBox())
    await _settle(lambda: housekept._pool.tidy() or len(housekept._pool._spares) == 1)
    before = _open_fds()  # with the one spare
    outcome = await housekept.run(
        "import os\nreturn os.getpid()", tool_names=[], call_tool=ToolBox()
    )
    pid = outcome.result
    assert isinstance(pid, int)
    # Ended as the run released it (there is no task of the runtime's to leave it to).
    await _settle(lambda: _gone(pid))
    # Its channel and status pipe are closed; its replacement, asked for then,
    # is collected by the next run while that run's worker starts.
    assert len(_open_fds()) <= len(before)
    await housekept.run("return 0", tool_names=[], call_tool=ToolBox())
    await _settle(lambda: housekept._pool.tidy() or len(housekept._pool._spares) == 1)
    assert len(_open_fds()) == len(before)


async def test_housekeeping_never_waits_to_kill_a_running_worker(
    housekept: SubprocessRuntime,
) -> None:
    outcome = await housekept.run(
        "import os\nprint(os.getpid())\nwhile True:\n    pass",
        tool_names=[],
        call_tool=ToolBox(),
        limits=Limits(timeout=0.3),
    )
    assert outcome.kind == "timeout", outcome
    pid = int(outcome.logs[0])  # killed by the run itself
    await _settle(lambda: _gone(pid))


async def test_housekeeping_kills_a_worker_that_forged_its_final_frame(
    housekept: SubprocessRuntime,
) -> None:
    # The program writes a "done" frame itself and keeps running: the host
    # takes the frame as the outcome, and the worker is killed all the same.
    code = """
import os, stat
frame = b'{"type":"done","result":' + str(os.getpid()).encode() + b'}'
for fd in range(3, 64):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, len(frame).to_bytes(4, "big") + frame)
    except OSError:
        pass
while True:
    pass
"""
    outcome = await housekept.run(code, tool_names=[], call_tool=ToolBox())
    pid = outcome.result
    assert isinstance(pid, int), outcome
    await _settle(lambda: _gone(pid), seconds=5)


async def test_runs_that_need_their_own_worker_while_the_pool_keeps_house(
    housekept: SubprocessRuntime,
) -> None:
    # Other limits than the default: no spare fits, the run asks the zygote and
    # waits for the reply, while the housekeeping task waits on the same socket.
    await housekept.run("return 0", tool_names=[], call_tool=ToolBox())
    limits = Limits(memory_bytes=300 << 20)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            results: list[Any] = []

            async def one(index: int) -> None:
                outcome = await housekept.run(
                    f"return {index}", tool_names=[], call_tool=ToolBox(), limits=limits
                )
                results.append(outcome.result)

            for index in range(3):
                group.start_soon(one, index)
    assert sorted(results) == [0, 1, 2]


async def test_a_spare_the_zygote_cannot_fork_fails_the_run_at_once(
    housekept: SubprocessRuntime,
) -> None:
    await housekept.run("return 0", tool_names=[], call_tool=ToolBox())
    await _settle(lambda: housekept._pool.tidy() or len(housekept._pool._spares) == 1)
    zygote = housekept._pool._zygote
    assert zygote is not None
    shutil.rmtree(zygote.tmp)  # no work directory can be made for new workers
    outcome = await housekept.run("return 1", tool_names=[], call_tool=ToolBox())
    assert outcome.result == 1  # the spare forked before
    # Its replacement fails to fork; that run's housekeeping may collect that
    # reply before the next run waits for it. Either way the run fails at once,
    # not after the minute a silent zygote is given.
    with anyio.fail_after(10), pytest.raises(WorkerStartError, match="No such file"):
        await housekept.run("return 2", tool_names=[], call_tool=ToolBox())


def _call_runner_tasks() -> set[int]:
    return {task.id for task in anyio.get_running_tasks() if task.name == "ptc-call"}


async def test_call_runners_are_parked_within_a_run_and_end_with_it(
    housekept: SubprocessRuntime,
) -> None:
    # A second burst of calls wakes the tasks parked after the first instead
    # of starting new ones (each start costs anyio several times a wake-up);
    # none of them outlives the run.
    code = (
        "import asyncio\n"
        "for _ in range(2):\n"
        "    await asyncio.gather(*[tools.sleep({'seconds': 0.02}) for _ in range(30)])\n"
        "return 1"
    )
    tools = MeetingToolBox(30)
    answered_by: list[set[int]] = [set(), set()]
    calls = 0

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        nonlocal calls
        answered_by[calls // 30].add(anyio.get_current_task().id)
        calls += 1
        return await tools(name, args)

    outcome = await housekept.run(code, tool_names=["sleep"], call_tool=call_tool)
    assert outcome.result == 1, outcome
    assert tools.max_in_flight == 30
    assert len(answered_by[0]) == 30  # the run's own task and 29 runners
    # The second burst is answered in part by tasks parked after the first
    # (how many have parked by then depends on scheduling; none is new for
    # every call of the burst).
    assert answered_by[1] & answered_by[0]
    assert not _call_runner_tasks()


async def test_closing_the_runtime_ends_a_run_in_flight() -> None:
    # The runtime's block ends (in another task) while a run waits on a call:
    # the call is cancelled, the run ends, and no runner task is left.
    tools = ToolBox()
    outcomes: list[RunOutcome] = []
    close = anyio.Event()
    hanging = anyio.Event()

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        if name == "hang":
            hanging.set()
        return await tools(name, args)

    async def own_runtime(*, task_status: anyio.abc.TaskStatus[SubprocessRuntime]) -> None:
        async with SubprocessRuntime(layers=(), spares=1) as backend:
            task_status.started(backend)
            await close.wait()

    async def one(backend: SubprocessRuntime) -> None:
        outcomes.append(
            await backend.run(
                "await tools.echo({})\nreturn await tools.hang()",
                tool_names=["echo", "hang"],
                call_tool=call_tool,
            )
        )

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            backend = await group.start(own_runtime)
            group.start_soon(one, backend)
            await hanging.wait()
            close.set()
    [outcome] = outcomes
    assert outcome.kind == "crashed", outcome
    assert outcome.message == "the runtime was closed during the run"
    assert tools.cancelled == 1
    assert tools.in_flight == 0
    assert not _call_runner_tasks()


async def test_a_program_bigger_than_the_socket_buffer_arrives_whole(
    bare: SubprocessRuntime,
) -> None:
    # Far over what one write to the worker's socket takes: the rest is
    # written while the run goes on.
    comment = "# " + "x" * (4 << 20) + "\n"
    outcome = await bare.run(comment + "return 42", tool_names=[], call_tool=ToolBox())
    assert outcome.result == 42, outcome


# --------------------------------------------------------------------------- frames the host can parse


async def test_values_with_too_many_arrays_stay_in_the_worker(bare: SubprocessRuntime) -> None:
    # More arrays and objects than one frame may hold (the host would spend
    # seconds parsing them): the program is told, and long lines are split.
    tools = ToolBox()
    code = """
try:
    await tools.echo({'a': [[]] * 1_050_000})
except ToolCallError as exc:
    print(exc.message[:39])
print('[' * 1_500_000)
return [{}] * 1_050_000
"""
    outcome = await bare.run(code, tool_names=["echo"], call_tool=tools)
    assert outcome.kind == "exception", outcome
    assert "more than 1048576 arrays and objects" in outcome.message
    assert tools.calls == []
    assert outcome.logs[0] == "arguments hold more than 1048576 arrays"
    assert "".join(outcome.logs[1:]) == "[" * 1_500_000


@pytest.mark.anyio
async def test_a_runtime_that_cannot_start_raises_its_own_error(tmp_path: Path) -> None:
    # An interpreter that exits at once: the zygote never says it is ready.
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o755)
    async with SubprocessRuntime(python=str(python)) as backend:
        with pytest.raises(WorkerStartError):
            await backend.start()
        with pytest.raises(WorkerStartError):
            await backend.run("return 1", tool_names=[], call_tool=ToolBox())


async def test_the_zygote_keeps_asyncios_tls_out_unless_the_allow_list_names_it() -> None:
    # ssl is optional to asyncio and of no use without a network: by default no
    # worker has it loaded (nor its library mapped)...
    looking = [*DEFAULT_ALLOWED_MODULES, "sys"]
    async with SubprocessRuntime(allowed_modules=looking, spares=0) as backend:
        outcome = await backend.run(
            "import sys, asyncio\nreturn [sys.modules.get('ssl') is None, 'asyncio' in sys.modules]",
            tool_names=[],
            call_tool=ToolBox(),
        )
    assert outcome.ok, outcome.message
    assert outcome.result == [True, True]
    # ...but an allow-list that names it gets it.
    async with SubprocessRuntime(allowed_modules=[*DEFAULT_ALLOWED_MODULES, "ssl"]) as backend:
        outcome = await backend.run(
            "import ssl\nreturn ssl.OPENSSL_VERSION.split()[0]", tool_names=[], call_tool=ToolBox()
        )
    assert outcome.ok, outcome.message
    assert outcome.result in ("OpenSSL", "LibreSSL")
