"""The subprocess runtime's speed, side by side with a plain ``python -c`` subprocess.

Run by hand: ``python tests/benchmarks/bench_runtime.py [--layers on|off] [--rounds N]``.
Prints medians:

(a) hand-off to result for ``return 1`` with a warm pool (target < 1 ms), and
    the same back to back (the pool refilling while runs go on);
(b) the same with a cold zygote (a new runtime, its first run);
(c) one tool-call round trip inside a run (target < 150 µs);
(d) 10,000 sequential tool calls in one run, as calls/s;
(e) 100 concurrent tool calls that each sleep 50 ms (target < 60 ms wall);
and, for scale, ``python -c pass`` and ``python -I -S -c pass`` as subprocesses,
one asyncio loop turn, a raw two-process ping-pong through anyio (back to back,
and after a 50 ms pause as (a) pauses), (a) done the least a fork server can
do (a bare fork server: no sandbox, no checks, no limits), and (e) run by 100
in-process tasks with no worker on this machine (the floors the figures above
stand on).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import marshal
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio
import anyio.lowlevel
import orjson

from runtime import Limits, SubprocessRuntime, ToolAnswer


async def _echo(name: str, args: Any) -> ToolAnswer:
    return ToolAnswer.success(args)


async def _sleepy(name: str, args: Any) -> ToolAnswer:
    await anyio.sleep(0.05)
    return ToolAnswer.success(args)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"


async def bench_warm(rt: SubprocessRuntime, rounds: int, pause: float) -> float:
    samples = []
    for _ in range(rounds):
        await anyio.sleep(pause)  # let the pool refill: each run takes a ready spare
        started = time.perf_counter()
        outcome = await rt.run("return 1", tool_names=[], call_tool=_echo)
        samples.append(time.perf_counter() - started)
        assert outcome.result == 1, outcome
    return statistics.median(samples)


async def bench_cold(layers: Any, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        async with SubprocessRuntime(layers=layers) as rt:
            outcome = await rt.run("return 1", tool_names=[], call_tool=_echo)
            samples.append(time.perf_counter() - started)
        assert outcome.result == 1, outcome
    return statistics.median(samples)


async def bench_round_trip(rt: SubprocessRuntime, calls: int) -> tuple[float, float]:
    stamps: list[float] = []

    async def stamp(name: str, args: Any) -> ToolAnswer:
        stamps.append(time.perf_counter())
        return ToolAnswer.success(1)

    code = f"n = 0\nfor i in range({calls}):\n    n += await tools.t()\nreturn n"
    started = time.perf_counter()
    outcome = await rt.run(code, tool_names=["t"], call_tool=stamp)
    elapsed = time.perf_counter() - started
    assert outcome.result == calls, outcome
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return statistics.median(gaps), calls / elapsed


async def bench_concurrent(rt: SubprocessRuntime, rounds: int) -> float:
    code = (
        "import asyncio\n"
        "r = await asyncio.gather(*[tools.s({'i': i}) for i in range(100)])\n"
        "return len(r)"
    )
    samples = []
    for _ in range(rounds):
        await anyio.sleep(0.05)
        started = time.perf_counter()
        outcome = await rt.run(code, tool_names=["s"], call_tool=_sleepy)
        samples.append(time.perf_counter() - started)
        assert outcome.result == 100, outcome
    return statistics.median(samples)


async def bench_sleep_floor(rounds: int) -> float:
    """(e) without a worker: 100 tasks of this process that each sleep 50 ms."""
    samples = []
    for _ in range(rounds):
        await anyio.sleep(0.05)
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(100):
                group.start_soon(anyio.sleep, 0.05)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def bench_floor() -> tuple[float, float, float]:
    """This machine's floor: one event-loop turn, one process ping-pong through anyio
    back to back, and the same after a 50 ms pause (as (a) pauses: a woken peer)."""
    turns = 20_000
    started = time.perf_counter()
    for _ in range(turns):
        await anyio.lowlevel.checkpoint()
    turn = (time.perf_counter() - started) / turns
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # a blocking echo peer
        ours.close()
        while data := theirs.recv(256):
            theirs.sendall(data)
        os._exit(0)
    theirs.close()
    ours.setblocking(False)

    async def ping() -> float:
        started = time.perf_counter()
        ours.send(b"x" * 40)
        while True:
            try:
                ours.recv(256)
                break
            except BlockingIOError:
                await anyio.wait_readable(ours)
        return time.perf_counter() - started

    back_to_back = [await ping() for _ in range(2_000)]
    paused = []
    for _ in range(40):
        await anyio.sleep(0.05)
        paused.append(await ping())
    ours.close()
    os.waitpid(pid, 0)  # noqa: ASYNC222 - the peer exits as soon as it sees EOF
    return turn, statistics.median(back_to_back), statistics.median(paused)


def _bare_worker(sock: socket.socket) -> None:
    """A forked worker doing only what any worker must: take the program, run it, reply."""
    loop = asyncio.new_event_loop()
    namespace: dict[str, Any] = {}
    exec(compile("async def main():\n    return 0\n", "<warm-up>", "exec"), namespace)
    loop.run_until_complete(namespace["main"]())
    sock.sendall(b"ready")
    frame = orjson.loads(sock.recv(1 << 16))
    namespace = {"__builtins__": __builtins__}
    exec(marshal.loads(bytes.fromhex(frame["code"])), namespace)
    value = loop.run_until_complete(namespace["main"]())
    sock.sendall(orjson.dumps({"type": "done", "result": value}))
    sock.recv(1)
    os._exit(0)


def _bare_fork_server(control: socket.socket) -> None:
    """Fork one bare worker per request; send the host its end of a socket pair."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # no zombies
    while control.recv(16):
        ours, theirs = socket.socketpair()
        if os.fork() == 0:
            control.close()
            ours.close()
            _bare_worker(theirs)
        theirs.close()
        socket.send_fds(control, [b"w"], [ours.fileno()])
        ours.close()
    os._exit(0)


async def bench_bare_handoff(rounds: int) -> float:
    """(a) by a bare fork server: a fresh forked worker per run, after a 50 ms pause."""
    code = compile("async def main():\n    return 1\n", "<program>", "exec")
    frame = orjson.dumps({"type": "run", "code": marshal.dumps(code).hex()})
    control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = os.fork()
    if server == 0:
        control.close()
        _bare_fork_server(theirs)
    theirs.close()
    samples = []
    for _ in range(rounds):
        control.send(b"fork")
        _, fds, _, _ = socket.recv_fds(control, 16, 1)
        with socket.socket(fileno=fds[0]) as sock:
            sock.setblocking(False)
            await anyio.wait_readable(sock)
            sock.recv(16)  # "ready"
            await anyio.sleep(0.05)
            started = time.perf_counter()
            sock.send(frame)
            while True:
                try:
                    reply = sock.recv(1 << 16)
                    break
                except BlockingIOError:
                    await anyio.wait_readable(sock)
            samples.append(time.perf_counter() - started)
            assert orjson.loads(reply)["result"] == 1
    control.close()
    os.waitpid(server, 0)  # noqa: ASYNC222 - it exits as soon as it sees EOF
    return statistics.median(samples)


def bench_plain_python(args: list[str], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, env={})
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def main(layers_on: bool, rounds: int) -> None:
    layers = None if layers_on else ()
    print(f"layers: {'on' if layers_on else 'off'}; {os.cpu_count()} CPUs; load {os.getloadavg()}")
    turn, ping_pong, paused_ping_pong = await bench_floor()
    sleep_floor = await bench_sleep_floor(rounds)
    bare_handoff = await bench_bare_handoff(rounds * 2)
    plain = bench_plain_python(["-c", "pass"], rounds)
    isolated = bench_plain_python(["-I", "-S", "-c", "pass"], rounds)
    async with SubprocessRuntime(layers=layers, limits=Limits(timeout=120)) as rt:
        await rt.start()
        await anyio.sleep(0.5)
        warm = await bench_warm(rt, rounds * 5, pause=0.05)
        back_to_back = await bench_warm(rt, rounds * 5, pause=0)
        round_trip, _ = await bench_round_trip(rt, 2_000)
        _, calls_per_second = await bench_round_trip(rt, 10_000)
        concurrent = await bench_concurrent(rt, rounds)
    cold = await bench_cold(layers, max(3, rounds // 2))
    print(f"(a) warm pool, 'return 1'              {_ms(warm)}   (target < 1 ms)")
    print(f"    back to back, 'return 1'           {_ms(back_to_back)}")
    print(f"(b) cold zygote, first 'return 1'      {_ms(cold)}")
    print(f"(c) one tool-call round trip           {_ms(round_trip)}   (target < 0.150 ms)")
    print(f"(d) 10,000 sequential tool calls       {calls_per_second:8.0f} calls/s")
    print(f"(e) 100 concurrent 50 ms tool calls    {_ms(concurrent)}   (target < 60 ms)")
    print(f"    python -c pass (subprocess)        {_ms(plain)}")
    print(f"    python -I -S -c pass (subprocess)  {_ms(isolated)}")
    print(f"    floor: one event-loop turn         {_ms(turn)}")
    print(f"    floor: raw process ping-pong       {_ms(ping_pong)}")
    print(f"    floor: the same after a 50 ms pause {_ms(paused_ping_pong)}")
    print(f"    floor: (a) by a bare fork server   {_ms(bare_handoff)}")
    print(f"    floor: (e) in-process, no worker   {_ms(sleep_floor)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", choices=["on", "off"], default="on")
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    anyio.run(main, options.layers == "on", options.rounds)
