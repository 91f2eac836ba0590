"""Host side of one run: drive a worker's channel to a single :class:`RunOutcome`.

Every frame from the worker is hostile input: it is size-bounded by the
decoder, schema-checked by ``parse_worker_frame`` and checked against the
run's state (call ids in order, known tool names, limits). Any violation ends
the run as ``protocol``; the caller then kills the worker. The wall clock,
output bytes and tool-call count are enforced here whatever the worker says.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio
import anyio.abc
import anyio.lowlevel
import orjson

from ._base import CallTool, CancelSignal, FailureKind, Limits, RunOutcome, ToolAnswer
from ._bootstrap import EXIT_HOST_GONE, EXIT_INTERNAL, EXIT_MEMORY
from ._channel import ChannelClosed, FrameChannel
from ._pool import Worker
from ._protocol import HEADER, ProtocolError, encode_frame, parse_worker_frame

__all__ = ["drive_run"]

# After the channel closed without a final frame: how long the zygote gets to
# report the exit status before the worker is killed (and then reported).
_STATUS_GRACE = 1.0
# Tasks kept idle for the next calls; beyond this, one that finishes leaves
# at once instead of costing a wake-up when the run ends.
_MAX_IDLE_TASKS = 8


async def drive_run(
    worker: Worker,
    *,
    code: str,
    tool_names: Sequence[str],
    call_tool: CallTool,
    limits: Limits,
    cancel: CancelSignal | None,
    compile_program: Callable[[str], bytes | None] | None = None,
    while_waiting: Callable[[], None] | None = None,
) -> RunOutcome:
    """Run ``code`` on ``worker`` and return its outcome; the caller kills the worker.

    ``compile_program``, when given, compiles ``code`` for the worker here (its
    bytes follow the run frame; ``None`` leaves compiling, and reporting why it
    fails, to the worker). ``while_waiting``, when given, is called once the
    program is on its way: housekeeping that then overlaps the worker's start.
    """
    session = _Session(worker, tool_names, call_tool, limits)
    return await session.run(code, cancel, compile_program, while_waiting)


# What an idle task of the calls group is woken up for: ``None`` to read the
# channel, a call to answer, or ``_STOP`` once the outcome is decided.
_Call = tuple[int, str, Any]
_STOP: Final = (0, "", None)


class _Turn:
    """The wake-up of one idle task and what it is woken up for."""

    __slots__ = ("event", "job")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.job: _Call | None = _STOP


class _Session:
    """One run's frames, calls and outcome.

    One task at a time reads the channel. The task that reads a call answers
    it itself, once it has passed the reading to another task (an idle one, or
    a new one): the answer leaves without a task switch. Only calls read in a
    burst (more frames already buffered) are handed to other tasks, so that
    they all start before the first of them is answered. Either way calls
    start (``call_tool`` is called) in the order the program made them.
    """

    __slots__ = (
        "busy",
        "call_tool",
        "calls",
        "calls_group",
        "channel",
        "exit_stack",
        "idle",
        "limits",
        "logs",
        "outcome",
        "output",
        "queued",
        "tool_names",
        "worker",
    )

    def __init__(
        self, worker: Worker, tool_names: Sequence[str], call_tool: CallTool, limits: Limits
    ) -> None:
        self.worker = worker
        self.tool_names = frozenset(tool_names)
        self.call_tool = call_tool
        self.limits = limits
        self.channel = FrameChannel(worker.sock, limits.max_message_bytes)
        self.logs: list[str] = []
        self.output = 0
        self.calls = 0
        # Idle tasks of the calls group, each waiting for a job; a new task is
        # only started when none is idle (starting one costs several wake-ups).
        self.idle: list[_Turn] = []
        self.busy = 0  # calls being answered
        self.queued = 0  # calls handed over to a task that has yet to start them
        self.calls_group: anyio.abc.TaskGroup | None = None
        self.outcome: RunOutcome | None = None

    def failure(self, kind: FailureKind, message: str) -> RunOutcome:
        return RunOutcome(kind=kind, message=message, logs=self.logs, tool_calls=self.calls)

    async def run(
        self,
        code: str,
        cancel: CancelSignal | None,
        compile_program: Callable[[str], bytes | None] | None,
        while_waiting: Callable[[], None] | None,
    ) -> RunOutcome:
        fields: dict[str, Any] = {
            "type": "run",
            "code": code,
            "tools": sorted(self.tool_names),
            "max_output_bytes": self.limits.max_output_bytes,
            "max_tool_calls": self.limits.max_tool_calls,
            "max_message_bytes": self.limits.max_message_bytes,
        }
        frames = [b""]
        if compile_program is not None:
            fields["compiled"] = True
            compiled = compile_program(code) or b""
            frames.append(HEADER.pack(len(compiled)) + compiled)
        frames[0] = encode_frame(fields)
        # The program goes out in one write (one wake-up of the worker) before
        # anything else here: the rest overlaps the worker's start. (No await
        # until the limits below apply. If the worker is already gone, what it
        # wrote before is still read.)
        with contextlib.suppress(ChannelClosed):
            self.channel.send_nowait(*frames)
        if while_waiting is not None:
            while_waiting()
        signalled = False
        with anyio.CancelScope(deadline=anyio.current_time() + self.limits.timeout) as scope:

            def on_cancel() -> None:
                nonlocal signalled
                signalled = True
                scope.cancel()

            dispose = cancel.add_listener(on_cancel) if cancel is not None else None
            try:
                # The calls' task group is only entered (on this stack) at the
                # first tool call: a run without calls does not pay for one. Once
                # the outcome is decided, the group's scope is cancelled when
                # calls are still in flight (this task's own included).
                async with contextlib.AsyncExitStack() as self.exit_stack:
                    await self.converse()
            finally:
                if dispose is not None:
                    dispose()
        if self.outcome is not None:
            return self.outcome
        if signalled:
            return self.failure("cancelled", "the run was cancelled")
        return self.failure(
            "timeout", f"the run exceeded its wall-clock limit of {self.limits.timeout:g} s"
        )

    async def converse(self) -> None:
        channel = self.channel
        try:
            # The rest of a program too big for the socket's buffer (the worker
            # reads it after "ready").
            with contextlib.suppress(ChannelClosed):
                await channel.flush()
            payload = await channel.receive()
            if payload is None:
                self.decide(await self.lost())
                return
            frame: dict[str, Any] = parse_worker_frame(payload)  # type: ignore[assignment]
            if frame["type"] == "error" and frame["kind"] == "sandbox":
                self.decide(self.failure("sandbox", frame["message"]))
                return
            if frame["type"] != "ready":
                raise ProtocolError(f"expected 'ready', got {frame['type']!r}")
        except ProtocolError as exc:
            self.decide(self.failure("protocol", f"the worker broke the protocol: {exc}"))
            return
        await self.take_turns(None, stay=True)

    async def take_turns(self, job: _Call | None, *, stay: bool = False) -> None:
        """Read (``job`` is ``None``) or answer ``job``, then wait for the next job.

        Returns once the outcome is decided; without ``stay``, also when enough
        other tasks are idle.
        """
        while job is not _STOP:
            if job is None:
                job = await self.read()
                if job is _STOP:
                    return
            else:
                self.queued -= 1  # a call handed over, starting now
            await self.answer(*job)
            if self.outcome is not None or (not stay and len(self.idle) >= _MAX_IDLE_TASKS):
                return
            turn = _Turn()
            self.idle.append(turn)
            await turn.event.wait()
            job = turn.job

    async def read(self) -> _Call:
        """Read frames until the outcome is decided (then ``_STOP``) or a call.

        A call is returned for this task to answer, once another task reads on.
        """
        channel = self.channel
        limits = self.limits
        names = self.tool_names
        try:
            while True:
                payload = await channel.receive()
                if payload is None:
                    outcome = await self.lost()
                    break
                frame: dict[str, Any] = parse_worker_frame(payload)  # type: ignore[assignment]
                kind = frame["type"]
                if kind == "call":
                    call_id = frame["id"]
                    if call_id != self.calls + 1:
                        raise ProtocolError(f"call id {call_id} out of order")
                    name = frame["name"]
                    if name not in names:
                        raise ProtocolError(f"call to unknown tool {name[:80]!r}")
                    self.calls = call_id
                    if call_id > limits.max_tool_calls:
                        self.calls = limits.max_tool_calls
                        outcome = self.failure(
                            "tool_call_limit",
                            f"the program made more than {limits.max_tool_calls} tool calls",
                        )
                        break
                    self.busy += 1
                    call = (call_id, name, frame["args"])
                    if channel.buffered or self.queued:
                        # More frames are here already (a burst of calls): pass
                        # this one on and read on, so that all of them start
                        # soon. Calls start in the order they were made: after
                        # one still waiting to start, this one waits its turn.
                        self.queued += 1
                        if not self.hand_over(call):
                            await self.start_calls_group(call)
                        continue
                    if not self.hand_over(None):
                        await self.start_calls_group(None)
                    return call
                if kind == "log":
                    text = frame["text"]
                    self.output += len(text) + 1
                    if self.output > limits.max_output_bytes:
                        outcome = self.output_limit()
                        break
                    self.logs.extend(text.split("\n"))
                elif kind == "done":
                    self.worker.finished = True
                    self.output += len(payload)
                    if self.output > limits.max_output_bytes:
                        outcome = self.output_limit()
                    elif "result" in frame:
                        outcome = RunOutcome(
                            logs=self.logs,
                            result=frame["result"],
                            has_result=True,
                            tool_calls=self.calls,
                        )
                    else:
                        outcome = RunOutcome(logs=self.logs, tool_calls=self.calls)
                    break
                elif kind == "error":
                    if frame["kind"] == "sandbox":
                        raise ProtocolError("a sandbox error after 'ready'")
                    self.worker.finished = True
                    self.output += len(payload)
                    if self.output > limits.max_output_bytes and frame["kind"] != "output_limit":
                        outcome = self.output_limit()
                    else:
                        outcome = self.failure(frame["kind"], frame["message"])
                    break
                else:
                    raise ProtocolError(f"unexpected {kind!r} frame")
        except ProtocolError as exc:
            outcome = self.failure("protocol", f"the worker broke the protocol: {exc}")
        self.decide(outcome)
        return _STOP

    def hand_over(self, job: _Call | None) -> bool:
        """Give ``job`` (``None``: the reading) to an idle task, or to a new one.

        ``False`` when the calls' task group is still to be entered (the first call).
        """
        if self.idle:
            turn = self.idle.pop()
            turn.job = job
            turn.event.set()
        elif self.calls_group is not None:
            self.calls_group.start_soon(self.take_turns, job, name="ptc-call")
        else:
            return False
        return True

    async def start_calls_group(self, job: _Call | None) -> None:
        """Enter the calls' task group (on the run's stack) and give it ``job``."""
        self.calls_group = await self.exit_stack.enter_async_context(anyio.create_task_group())
        self.calls_group.start_soon(self.take_turns, job, name="ptc-call")

    def decide(self, outcome: RunOutcome) -> None:
        """Settle the run's outcome: idle tasks leave, calls in flight are abandoned."""
        if self.outcome is not None:
            return
        self.outcome = outcome
        while self.idle:
            self.idle.pop().event.set()  # their job is _STOP
        if self.busy and self.calls_group is not None:
            # (Cancelling costs a task repr in anyio: only when needed.)
            self.calls_group.cancel_scope.cancel()

    def output_limit(self) -> RunOutcome:
        return self.failure(
            "output_limit",
            f"the program's output exceeded {self.limits.max_output_bytes} bytes",
        )

    async def answer(self, call_id: int, name: str, args: Any) -> None:
        try:
            answer = await self.call_tool(name, args)
            if not isinstance(answer, ToolAnswer):
                answer = ToolAnswer.failure(
                    f"internal error: call_tool returned {type(answer).__name__}"
                )
        except Exception as exc:  # a tool's failure is data for the program
            answer = ToolAnswer.failure(f"{type(exc).__name__}: {exc}")
        finally:
            self.busy -= 1
        try:
            if answer.ok:
                data = encode_frame(
                    {"type": "answer", "id": call_id, "ok": True, "value": answer.value}
                )
            else:
                data = encode_frame(
                    {"type": "answer", "id": call_id, "ok": False, "message": str(answer.message)}
                )
        except (TypeError, orjson.JSONEncodeError) as exc:
            data = encode_frame(
                {
                    "type": "answer",
                    "id": call_id,
                    "ok": False,
                    "message": f"the answer is not JSON: {exc}",
                }
            )
        if len(data) - 4 > self.limits.max_message_bytes:
            data = encode_frame(
                {
                    "type": "answer",
                    "id": call_id,
                    "ok": False,
                    "message": f"the answer is {len(data) - 4} bytes, over the message limit "
                    f"of {self.limits.max_message_bytes}",
                }
            )
        with contextlib.suppress(ChannelClosed):  # the main loop sees the worker go
            # With other calls in flight, answers finishing in the same loop
            # turn share one write (and one wake-up of the worker).
            await self.channel.send(data, batch=self.busy > 0)

    async def lost(self) -> RunOutcome:
        """The channel closed without a final frame: find out how the worker ended."""
        worker = self.worker
        status = await worker.wait_status(_STATUS_GRACE)
        if status is None:
            worker.kill()
            status = await worker.wait_status(_STATUS_GRACE)
        if status is None:
            return self.failure("crashed", "the worker was lost (its supervisor went away)")
        return self.classify_exit(*status)

    def classify_exit(self, status: int, cpu_seconds: float) -> RunOutcome:
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            signum = -code
            cpu_limit = math.ceil(self.limits.cpu_seconds)
            # CPU accounting is tick-based: allow some slack below the limit.
            if signum == signal.SIGKILL and cpu_seconds >= cpu_limit * 0.9:
                signum = signal.SIGXCPU  # the kernel's kill at the hard CPU limit
            if signum == signal.SIGXCPU:
                return self.failure(
                    "timeout",
                    f"the program exceeded its CPU time limit of {self.limits.cpu_seconds:g} s",
                )
            name = _signal_name(signum)
            if signum == signal.SIGSYS:
                return self.failure(
                    "crashed", f"the worker made a forbidden system call and was killed ({name})"
                )
            if signum == signal.SIGXFSZ:
                return self.failure("crashed", f"the worker exceeded its file size limit ({name})")
            return self.failure(
                "crashed", f"the worker was killed by {name} after {cpu_seconds:.2f} s of CPU"
            )
        if code == EXIT_MEMORY:
            return self.failure("memory", "the program ran out of memory")
        if code in (EXIT_INTERNAL, EXIT_HOST_GONE):
            return self.failure("crashed", f"the worker failed internally (exit code {code})")
        return self.failure("crashed", f"the worker exited unexpectedly with code {code}")


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
