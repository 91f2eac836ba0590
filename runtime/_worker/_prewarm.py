"""The prewarm: a run's own code path, walked before any program waits for it.

A fresh worker takes a copy-on-write fault for every page of the zygote it
writes, and the interpreter specialises the code it runs as it runs it. So a
spare runs a small program of ours (:data:`_PREWARM_CODE`, whose tool calls it
answers itself) before it says "ready" (:func:`prewarm`, called by
``_zygote`` before ``_bootstrap.serve``), and the zygote runs the same program
before it forks at all (:func:`warm_up`): each worker then inherits the code
specialised and only faults in the pages a run touches.
"""

from __future__ import annotations

import asyncio
import functools
import linecache
import marshal
import socket
import sys

import orjson

from ._bootstrap import WorkerSettings, _ChannelRun, _compile_source, new_worker_loop
from ._program import PROGRAM_FILENAME, pack_names, run_frame
from ._protocol import HEADER, FrameDecoder, encode_frame

__all__ = ["prewarm", "warm_up"]


# No imports: the allow-list may be anything. The calls go one by one, then
# many at once (sent in one batch). Run in the zygote (``warm_up``) enough times
# for the interpreter to specialise the code they run through; once per worker.
_PREWARM_CODE = """\
values = [i * 2 for i in range(3)]
for i in range(3):
    await tools.prewarm({"i": i})
pending = [tools.prewarm({"i": i}) for i in range(4)]
answers = [await call for call in pending]
return {"n": len(values) + len(answers), "ok": [str(v) for v in values]}
"""
_PREWARM_CALLS = 7


class _PrewarmRun(_ChannelRun):
    """A run whose frames go nowhere: its tool calls are answered (echoed) here."""

    def send_bytes(self, data: bytes) -> None:
        answers = [
            encode_frame({"type": "answer", "id": frame["id"], "ok": True, "value": frame["args"]})
            for frame in map(orjson.loads, FrameDecoder(len(data)).feed(data))
            if frame["type"] == "call"
        ]
        if answers:
            self.loop.call_soon(self.received, b"".join(answers))


@functools.cache
def _prewarm_start(restricted: bool) -> bytes:
    """The prewarm run's start, as the host would send it (compiled, names apart).

    Made once, by the zygote's :func:`warm_up`: every worker inherits it
    rather than compiling the program again (0.3-0.6 ms each).
    """
    frame = run_frame(
        _PREWARM_CODE,
        None,  # in a frame of their own, as the host sends them
        max_output_bytes=1 << 20,
        max_tool_calls=_PREWARM_CALLS,
        max_message_bytes=1 << 20,
        compiled=True,
    )
    names = pack_names(["prewarm"]).encode()
    compiled = marshal.dumps(_compile_source(_PREWARM_CODE, restricted=restricted))
    return (
        encode_frame(frame)
        + HEADER.pack(len(names))
        + names
        + HEADER.pack(len(compiled))
        + compiled
    )


def prewarm(sock: socket.socket, loop: asyncio.AbstractEventLoop, settings: WorkerSettings) -> None:
    """Walk a run's own code path once, while the worker is a spare.

    No frames are sent and there is no import guard. A fork's copy-on-write
    faults (and the interpreter's first-call work on each function) then happen
    before a program waits, not while it does: from the frames a run starts
    with to the bytes of its final frame.
    """
    run = _PrewarmRun(sock, loop, settings)
    run.final = False
    stdout, stderr = sys.stdout, sys.stderr
    try:
        run.received(_prewarm_start(settings.restricted))
        if run.setup_error is not None:
            raise run.setup_error
        loop.run_forever()  # until the program's task is done
        task = run.task
        value = task.result() if task is not None else None
        run.flush()
        orjson.loads(run.result_frame(value)[4:])
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        linecache.cache.pop(PROGRAM_FILENAME, None)


def warm_up(settings: WorkerSettings, rounds: int = 8) -> None:
    """Run the prewarm program in this process, on loops of its own: the zygote's, before it forks.

    The interpreter specialises the code a run goes through as it runs it,
    writing into the code objects, and fills its caches: done here, once,
    every worker inherits the result instead of redoing it on freshly copied
    pages. A worker's own prewarm then only has to fault in the pages a run
    touches, which a short program does as well as a long one: 7 calls, not
    36. Together, on a 2-core VM: about 15 % more runs/s
    (``bench_throughput.py``, back to back 156-166 -> 181-194), the same
    hand-off (0.80-0.84 ms); about 2 ms more of the zygote's boot. The loops
    and sockets used here are closed again.
    """
    ours, theirs = socket.socketpair()
    try:
        for _ in range(rounds):
            loop, _replies = new_worker_loop()
            asyncio.set_event_loop(loop)
            try:
                prewarm(ours, loop, settings)
            finally:
                asyncio.set_event_loop(None)
                loop.close()
    finally:
        ours.close()
        theirs.close()
