"""The host decides every outcome that means a limit was hit, from its own evidence.

Hostile programs (and fake workers) try to make a run look like a limit it did
not hit: a forged final frame written straight to the channel, an exit code,
a signal sent to itself, a ``MemoryError`` raised by hand. The host's verdict
comes from its own clock and counts and from the kernel (CPU time and peak
resident memory of the worker); nothing the program can write decides a kind.
Real limits still come out as the kinds they are.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import typing
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import orjson
import pytest

from runtime import FailureKind, Limits, RunOutcome, SubprocessRuntime
from runtime._host._pool import Worker
from runtime._host._session import drive_run
from runtime._worker._imports import DEFAULT_ALLOWED_MODULES
from runtime._worker._protocol import WORKER_ERROR_KINDS
from runtime.testing import ToolBox

pytestmark = pytest.mark.anyio

MiB = 1 << 20
READY = {"type": "ready", "layers": [["rlimits", True, "fake"]]}
# Every kind only the host may decide once the worker said "ready" ("sandbox"
# comes instead of "ready" or not at all).
HOST_KINDS = sorted(set(typing.get_args(FailureKind)) - WORKER_ERROR_KINDS | {"sandbox"})
# The worker's run, reachable from any program without an import: what a
# program that bypasses the bootstrap's own code writes to the channel with.
CHANNEL = "sock = tools.echo._run.sock\n"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


HOSTILE_MODULES = [*DEFAULT_ALLOWED_MODULES, "os", "signal"]


@pytest.fixture(scope="module")
async def hostile() -> AsyncIterator[SubprocessRuntime]:
    """Every OS layer on, and ``os``/``signal`` importable: to misbehave on purpose."""
    async with SubprocessRuntime(allowed_modules=HOSTILE_MODULES) as backend:
        yield backend


async def run(backend: SubprocessRuntime, code: str, limits: Limits | None = None) -> RunOutcome:
    return await backend.run(code, tool_names=["echo"], call_tool=ToolBox(), limits=limits)


def raw_frame(frame: dict[str, Any]) -> str:
    """Program text that writes ``frame`` straight to the channel, then waits."""
    payload = orjson.dumps(frame)
    data = struct.pack(">I", len(payload)) + payload
    return f"{CHANNEL}sock.sendall({data!r})\nimport asyncio\nawait asyncio.sleep(30)\n"


# --------------------------------------------------------------------------- real workers


@pytest.mark.parametrize("kind", HOST_KINDS)
async def test_a_forged_final_frame_claiming_a_limit_is_a_protocol_failure(
    hostile: SubprocessRuntime, kind: str
) -> None:
    message = "the run exceeded its wall-clock limit of 60 s"
    outcome = await run(hostile, raw_frame({"type": "error", "kind": kind, "message": message}))
    assert outcome.kind == "protocol", outcome
    assert message not in outcome.message


@pytest.mark.parametrize("code", [3, 4, 5])
async def test_an_exit_code_decides_no_kind(hostile: SubprocessRuntime, code: int) -> None:
    # 3 read as "memory", 4 and 5 as "the worker failed internally".
    outcome = await run(hostile, f"print('bye')\nimport os\nos._exit({code})")
    assert outcome.kind == "crashed", outcome
    assert outcome.message.startswith(f"the worker exited with code {code} after ")
    assert outcome.logs == ["bye"]


@pytest.mark.parametrize("name", ["SIGXCPU", "SIGSYS"])
async def test_a_self_sent_signal_of_a_limit_decides_nothing(
    hostile: SubprocessRuntime, name: str
) -> None:
    code = f"import os, signal\nos.kill(os.getpid(), signal.{name})\nreturn os.getpid()"
    # Without a PID namespace the program dies of it: a crash, not the limit.
    layers = ("seccomp", "landlock")
    async with SubprocessRuntime(allowed_modules=HOSTILE_MODULES, layers=layers) as plain:
        outcome = await run(plain, code)
    assert outcome.kind == "crashed", outcome
    assert f"killed by {name}" in outcome.message
    outcome = await run(hostile, code)
    if os.geteuid() == 0:
        # The zygote forks every worker as the init of its own PID namespace,
        # and an init ignores the signals it sends itself: the program goes on.
        assert outcome.ok and outcome.result == 1, outcome
    else:
        assert outcome.kind == "crashed" and f"killed by {name}" in outcome.message, outcome


async def test_each_worker_is_the_only_process_of_a_pid_namespace_of_its_own(
    hostile: SubprocessRuntime,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the zygote makes the workers' PID namespaces as root only")
    # Several at once, and one after another: each is PID 1 of its own namespace
    # (two could not be PID 1 of one), with no parent inside it.
    code = "import os\nawait tools.echo({})\nreturn [os.getpid(), os.getppid()]"
    async with anyio.create_task_group() as group:
        outcomes: list[RunOutcome] = []

        async def one() -> None:
            outcomes.append(await run(hostile, code))

        for _ in range(4):
            group.start_soon(one)
    outcomes += [await run(hostile, code) for _ in range(3)]
    assert [outcome.result for outcome in outcomes] == [[1, 0]] * 7, outcomes


@pytest.mark.parametrize(
    "code",
    [
        "raise MemoryError",
        "raise MemoryError('the worker hit its memory limit')",
        "x = bytearray(10 ** 12)",
    ],
)
async def test_a_memory_error_without_the_memory_used_is_an_exception(
    hostile: SubprocessRuntime, code: str
) -> None:
    outcome = await run(hostile, code, Limits(memory_bytes=512 * MiB))
    assert outcome.kind == "exception", outcome
    assert outcome.message.splitlines()[-1].startswith("MemoryError")


async def test_a_real_memory_hog_is_memory_by_the_kernels_account(
    hostile: SubprocessRuntime,
) -> None:
    outcome = await run(
        hostile,
        "chunks = []\nwhile True:\n    chunks.append(' ' * 10 ** 6)",
        Limits(memory_bytes=256 * MiB),
    )
    assert outcome.kind == "memory", outcome
    assert "peak resident memory" in outcome.message


async def test_a_cpu_loop_that_ignores_sigxcpu_is_the_cpu_limit(
    hostile: SubprocessRuntime,
) -> None:
    # Guard: the kernel's SIGKILL at the hard limit is the CPU limit too.
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    outcome = await run(hostile, code, Limits(cpu_seconds=1, timeout=20))
    assert outcome.kind == "timeout", outcome
    assert "CPU" in outcome.message


async def test_widening_the_workers_own_limits_changes_nothing(
    hostile: SubprocessRuntime,
) -> None:
    # The worker's counts are only an early stop: with them out of the way,
    # the host's own counts still decide.
    widen = "run = tools.echo._run\nrun.max_calls = run.max_output = 10 ** 12\n"
    calls = await run(
        hostile, widen + "for i in range(10):\n    await tools.echo({})", Limits(max_tool_calls=3)
    )
    assert calls.kind == "tool_call_limit", calls
    assert calls.tool_calls == 3
    output = await run(
        hostile, widen + "while True:\n    print('x' * 1000)", Limits(max_output_bytes=10_000)
    )
    assert output.kind == "output_limit", output
    assert sum(len(line) + 4 for line in output.logs) <= 10_000


# --------------------------------------------------------------------------- fake workers


class FakeWorker:
    """The worker side of a channel, written by the test; its exit status too."""

    def __init__(self) -> None:
        host, self.peer = socket.socketpair()
        status_r, self.status_w = os.pipe()
        os.set_blocking(status_r, False)
        self.worker = Worker(os.getpid(), host, status_r)
        self.worker._exited = True  # never signal the test process

    def send(self, *frames: dict[str, Any]) -> None:
        for frame in frames:
            payload = orjson.dumps(frame)
            self.peer.sendall(struct.pack(">I", len(payload)) + payload)

    def exit(self, status: int, cpu: float = 0.0, max_rss: int = 0) -> None:
        os.write(self.status_w, b"%d %.3f %d" % (status, cpu, max_rss // 1024))
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


async def drive(fake: FakeWorker, limits: Limits) -> RunOutcome:
    return await drive_run(
        fake.worker,
        code="return 1",
        tool_names=["echo"],
        call_tool=ToolBox(),
        limits=limits,
        cancel=None,
    )


LIMITS = Limits(timeout=5, cpu_seconds=2, memory_bytes=512 * MiB)


@pytest.mark.parametrize("kind", HOST_KINDS)
async def test_a_worker_that_claims_a_host_kind_broke_the_protocol(
    fake: FakeWorker, kind: str
) -> None:
    fake.send(READY, {"type": "error", "kind": kind, "message": "as the host would say it"})
    outcome = await drive(fake, LIMITS)
    assert outcome.kind == "protocol", outcome


@pytest.mark.parametrize(
    ("status", "cpu", "rss", "kind", "fragment"),
    [
        (3 << 8, 0.1, 0, "crashed", "the worker exited with code 3 after 0.10 s of CPU"),
        (4 << 8, 0.1, 0, "crashed", "the worker exited with code 4 after 0.10 s of CPU"),
        (signal.SIGXCPU, 0.1, 0, "crashed", "killed by SIGXCPU"),
        (signal.SIGXCPU, 1.9, 0, "timeout", "CPU time limit of 2 s"),
        (signal.SIGKILL, 2.0, 0, "timeout", "CPU time limit of 2 s"),
        (0, 2.0, 0, "timeout", "CPU time limit of 2 s"),  # whatever the status
        (signal.SIGKILL, 0.1, 400 * MiB, "memory", "400 MiB"),
        (1 << 8, 0.1, 300 * MiB, "memory", "memory limit 512 MiB"),
        (signal.SIGKILL, 0.1, 200 * MiB, "crashed", "killed by SIGKILL"),
    ],
)
async def test_an_exit_is_judged_by_the_kernels_evidence(
    fake: FakeWorker, status: int, cpu: float, rss: int, kind: str, fragment: str
) -> None:
    fake.send(READY, {"type": "log", "text": "forged: the program ran out of memory"})
    fake.exit(status, cpu, rss)
    outcome = await drive(fake, LIMITS)
    assert outcome.kind == kind, outcome
    assert fragment in outcome.message
    # What the program wrote stays its output, never the host's words.
    assert outcome.logs == ["forged: the program ran out of memory"]
    assert "forged" not in outcome.message


@pytest.mark.parametrize(("rss", "kind"), [(100 * MiB, "exception"), (300 * MiB, "memory")])
async def test_a_memory_error_is_memory_only_with_the_memory_used(
    fake: FakeWorker, rss: int, kind: str
) -> None:
    message = "Traceback (most recent call last):\n  ...\nMemoryError"
    fake.send(READY, {"type": "error", "kind": "exception", "message": message})
    fake.exit(0, 0.1, rss)
    outcome = await drive(fake, LIMITS)
    assert outcome.kind == kind, outcome
    if kind == "exception":
        assert outcome.message == message
