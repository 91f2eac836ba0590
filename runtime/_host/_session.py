"""Host side of one run: drive a worker's channel to a single :class:`RunOutcome`.

Every frame from the worker is hostile input: it is size-bounded by the
decoder, schema- and depth-checked by ``parse_worker_frame`` before anything
else touches it, and checked against the run's state (call ids in order, known
tool names, limits). Any violation ends the run as ``protocol``; the caller
then kills the worker.

The host decides every kind that means a limit was hit, from its own
evidence only: ``timeout`` from its own clock or the kernel's account of the
worker's CPU time, ``output_limit`` and ``tool_call_limit`` from its own count
of the frames it read (``_wire.log_cost``), ``memory`` from the kernel's
account of the worker's peak resident memory. A worker reports only what the
program did (``syntax``, ``exception``); its exit code and any signal it
could have sent itself decide nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from types import CoroutineType
from typing import Any, Final, cast

import anyio
import anyio.abc
import anyio.lowlevel
import orjson

from .._base import (
    CallTool,
    CancelSignal,
    FailureKind,
    Limits,
    RunOutcome,
    ToolAnswer,
    ToolNames,
    check_tool_names,
)
from .._worker._program import (
    DISCOVERY_CALLS,
    is_memory_error,
    pack_names,
    run_frame,
)
from .._worker._protocol import (
    HEADER,
    REPLY_SPIN,
    REPLY_SPIN_SKIP,
    ProtocolError,
    encode_frame,
    parse_worker_frame,
)
from .._worker._wire import log_cost
from ._channel import ChannelClosed, FrameChannel
from ._pool import ExitStatus, Worker
from ._runners import RUNNERS_KEPT, CallRunners, InContext

__all__ = ["OpenRuns", "drive_run", "tell_lines"]

logger = logging.getLogger("runtime")

# After the channel closed without a final frame: how long the zygote gets to
# report the exit status before the worker is killed (and then reported).
_STATUS_GRACE = 1.0
# A worker ran out of memory only if the kernel saw it use at least this share
# of its memory limit. The limit caps the address space (or the wasm memory);
# a program that used its memory up holds most of it resident, less its last
# failed request, while one that asked for the impossible at once, or raised
# MemoryError itself, holds little.
_MEMORY_EVIDENCE = 0.5
# The kernel stops a worker at its CPU limit (rounded up to whole seconds), as
# it counts CPU time: in ticks, which can run ahead of the precise time rusage
# reports (7% seen on a VM with steal time). A worker that ended having used
# this share of its limit used it up.
_CPU_EVIDENCE = 0.9

_clock = time.perf_counter


async def drive_run(
    worker: Worker,
    *,
    code: str,
    tool_names: Collection[str],
    call_tool: CallTool,
    limits: Limits,
    cancel: CancelSignal | None,
    compile_program: Callable[[str], bytes | None] | None = None,
    while_waiting: Callable[[], None] | None = None,
    runs: OpenRuns | None = None,
    memory_baseline: int = 0,
    on_log: Callable[[str], None] | None = None,
    call_group: anyio.abc.TaskGroup | None = None,
    shield_calls: bool = False,
) -> RunOutcome:
    """Run ``code`` on ``worker`` and return its outcome; the caller kills the worker.

    ``compile_program``, when given, compiles ``code`` for the worker here (its
    bytes follow the run frame; ``None`` leaves compiling, and reporting why it
    fails, to the worker). ``while_waiting``, when given, is called once the
    program is on its way: housekeeping that then overlaps the worker's start.
    ``runs``, when given, holds the run while it goes on, so that closing the
    runtime ends it (:meth:`OpenRuns.close`).
    ``memory_baseline`` is the worker's resident memory before the program
    (Deno's own, for the Pyodide worker): not the program's when the kernel's
    account of its peak is weighed against the memory limit.
    ``on_log``, when given, is called with each line of output as its frame
    is read (see ``Runtime.run``). ``call_group``, ``shield_calls``: see ``Runtime.run``.
    """
    names = check_tool_names(tool_names)
    apart = worker.names_apart
    fields = run_frame(
        code,
        # Encoded once per set of names (the same ToolNames come back run after run).
        None if apart else names.derived("run-frame-tools", _encoded_names),
        max_output_bytes=limits.max_output_bytes,
        max_tool_calls=limits.max_tool_calls,
        max_message_bytes=limits.max_message_bytes,
        compiled=compile_program is not None,
    )
    compiled = b""
    if compile_program is not None:
        program = compile_program(code) or b""
        compiled = HEADER.pack(len(program)) + program
    names_frame = names.derived("names-frame", _names_frame) if apart else b""
    data = b"".join((encode_frame(fields), names_frame, compiled))
    worker.start_bytes = len(data)
    # The program goes out in one write (one wake-up of the worker) before
    # anything else: the rest overlaps the worker's start. What the socket does
    # not take now is written once the run's limits apply. (If the worker is
    # already gone, what it wrote before is still read.)
    sock = worker.sock
    if sock.gettimeout() != 0.0:
        sock.setblocking(False)
    try:
        sent = sock.send(data)
    except BlockingIOError:
        sent = 0
    except OSError:
        sent = len(data)
    session = _Session(
        worker, names, call_tool, limits, memory_baseline, on_log, call_group, shield_calls
    )
    return await session.run(
        memoryview(data)[sent:] if sent < len(data) else None, cancel, while_waiting, runs
    )


def _encoded_names(names: ToolNames) -> orjson.Fragment:
    return orjson.Fragment(orjson.dumps(pack_names(names.in_order())))


def _names_frame(names: ToolNames) -> bytes:
    packed = pack_names(names.in_order()).encode()
    return HEADER.pack(len(packed)) + packed


def tell_lines(
    on_log: Callable[[str], None],
    context: contextvars.Context,
    lines: Sequence[str],
    *,
    failed: bool,
) -> bool:
    """Pass ``lines`` to ``on_log`` in a copy of ``context``; whether it has ever raised.

    What it raises is logged with its traceback the first time in a run
    (``failed`` false), at debug level after that: a callback broken for good
    must not flood the log with a traceback per line.
    """
    run_context = context.copy()
    for line in lines:
        try:
            run_context.run(on_log, line)
        except Exception:
            if failed:
                logger.debug("on_log raised again", exc_info=True)
            else:
                failed = True
                logger.exception("on_log raised (the run goes on)")
    return failed


class OpenRuns:
    """The runs of one runtime going on now, for the runtime to end when it closes."""

    __slots__ = ("_sessions",)

    def __init__(self) -> None:
        self._sessions: set[_Session] = set()

    def __len__(self) -> int:
        return len(self._sessions)

    def add(self, session: _Session) -> None:
        self._sessions.add(session)

    def discard(self, session: _Session) -> None:
        self._sessions.discard(session)

    def close(self) -> None:
        """End every run going on as ``crashed``: the runtime closes under it."""
        for session in list(self._sessions):
            session.end(session.failure("crashed", "the runtime was closed during the run"))


# A job of a run for a runner: ``None`` to read the channel, or a call to
# answer. ``_STOP`` is what reading returns once the outcome is decided.
_Call = tuple[int, str, Any]
_STOP: Final = (0, "", None)


class _Session:
    """One run's frames, calls and outcome.

    The run is a cancel scope with its deadline and a task group of its own:
    ending the run from outside (its deadline, the cancel signal, the runtime
    closing) cancels the scope; every task of the run is in the group, so when
    :meth:`run` returns every call it started has settled.

    With a call group (the caller's, which outlives the run), the runners are
    tasks of that group instead, each job in a cancel scope of its own: as the
    run ends it cancels them and waits only for those reading or writing the
    channel, not for a call being answered (``call_tool`` decides what
    cancellation means to it; a call it shields goes on in the group, and
    its answer is dropped). With ``shield_calls`` it cancels only the jobs
    reading or writing: a call being answered goes on all the same. The run's
    own task then answers no call itself.

    One task at a time reads the channel: the run's own task first, then
    runner tasks of the group (see ``_runners``). The task that reads a call
    answers it itself, once it has passed the reading to a runner: the answer
    leaves without a task switch. Only calls read in a burst (more frames
    already buffered) are passed to runners, so that they all start before the
    first of them is answered. Either way calls start (``call_tool`` is called)
    in the order the program made them, in a copy of the run's caller's context.
    """

    __slots__ = (
        "answers_skip",
        "busy",
        "call_group",
        "call_tool",
        "calls",
        "channel",
        "closing",
        "context",
        "decided",
        "error",
        "group",
        "jobs",
        "jobs_gone",
        "limits",
        "log_failed",
        "logs",
        "memory_baseline",
        "on_log",
        "outcome",
        "output",
        "queued",
        "runners",
        "scope",
        "shield_calls",
        "tool_names",
        "worker",
    )

    def __init__(
        self,
        worker: Worker,
        tool_names: frozenset[str],
        call_tool: CallTool,
        limits: Limits,
        memory_baseline: int = 0,
        on_log: Callable[[str], None] | None = None,
        call_group: anyio.abc.TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> None:
        self.worker = worker
        self.call_group = call_group
        self.shield_calls = shield_calls
        self.on_log = on_log
        self.log_failed = False
        self.memory_baseline = memory_baseline
        self.tool_names = tool_names
        self.call_tool = call_tool
        self.limits = limits
        # A worker whose greeting was read ahead has sent nothing else yet.
        self.channel = FrameChannel(
            worker.sock, limits.max_message_bytes, drained=worker.greeting is not None
        )
        self.logs: list[str] = []
        self.output = 0
        self.calls = 0
        self.busy = 0  # calls being answered
        self.answers_skip = 0  # readers left that do not let answers go first
        self.queued = 0  # calls handed over to a task that has yet to start them
        # The context of the run's caller (whose task makes the session): each
        # call runs in a copy.
        self.context = contextvars.copy_context()
        self.scope: anyio.CancelScope | None = None  # the run's, with its deadline
        self.group: anyio.abc.TaskGroup | None = None  # the run's tasks
        self.runners: CallRunners | None = None
        # With a call group: the run's jobs there (each in a cancel scope of its
        # own, cancelled as the run ends), and who waits for the last of them
        # that touches the channel to leave.
        self.jobs: dict[anyio.CancelScope, bool] = {}  # -> it may touch the channel
        self.jobs_gone: anyio.Event | None = None
        self.closing = False  # no new job starts, no outcome is decided
        self.decided: anyio.Event | None = None  # set with the outcome
        self.error: BaseException | None = None  # what escaped a job: raised from run()
        self.outcome: RunOutcome | None = None

    def failure(self, kind: FailureKind, message: str) -> RunOutcome:
        return RunOutcome(kind=kind, message=message, logs=self.logs, tool_calls=self.calls)

    async def run(
        self,
        unsent: memoryview | None,
        cancel: CancelSignal | None,
        while_waiting: Callable[[], None] | None,
        runs: OpenRuns | None,
    ) -> RunOutcome:
        """Converse with the worker, to which the program went out (but ``unsent``)."""
        if unsent is not None:
            with contextlib.suppress(ChannelClosed):
                self.channel.send_nowait(unsent)
        if while_waiting is not None:
            while_waiting()
        with anyio.move_on_after(self.limits.timeout) as self.scope:
            dispose = cancel.add_listener(self.cancelled) if cancel is not None else None
            if runs is not None:
                runs.add(self)
            try:
                async with anyio.create_task_group() as self.group:
                    if self.call_group is None:
                        self.runners = CallRunners(self.group, keep=RUNNERS_KEPT)
                    else:
                        # Shielded from the group's owner: a job is ended by its run.
                        self.runners = CallRunners(self.call_group, keep=RUNNERS_KEPT, shield=True)
                    try:
                        await self.converse()
                    finally:
                        self.closing = True
                        self.runners.close()  # parked runners leave
                        if self.call_group is not None:
                            await self.end_jobs()
                        elif self.busy:  # calls in flight are abandoned
                            self.group.cancel_scope.cancel()
            finally:
                if runs is not None:
                    runs.discard(self)
                if dispose is not None:
                    dispose()
        if self.error is not None:
            raise self.error
        if self.outcome is not None:
            return self.outcome
        return self.failure(
            "timeout", f"the run exceeded its wall-clock limit of {self.limits.timeout:g} s"
        )

    def cancelled(self) -> None:
        self.end(self.failure("cancelled", "the run was cancelled"))

    def end(self, outcome: RunOutcome) -> None:
        """End the run from outside its tasks: ``outcome``, unless the worker's came first."""
        self.decide(outcome)
        if self.scope is not None:
            self.scope.cancel()

    async def converse(self) -> None:
        channel = self.channel
        try:
            # The rest of a program too big for the socket's buffer (the worker
            # reads it after "ready").
            with contextlib.suppress(ChannelClosed):
                await channel.flush()
            frame = self.worker.greeting
            if frame is None:  # not read ahead: read (and check) it now
                payload = await channel.receive()
                if payload is None:
                    self.decide(await self.lost())
                    return
                # Kept on the worker: the runtime reports the layers it names.
                frame = self.worker.greeting = cast("dict[str, Any]", parse_worker_frame(payload))
            if frame["type"] == "error" and frame["kind"] == "sandbox":
                self.decide(self.failure("sandbox", frame["message"]))
                return
            if frame["type"] != "ready":
                raise ProtocolError(f"expected 'ready', got {frame['type']!r}")
        except ProtocolError as exc:
            self.decide(self.failure("protocol", f"the worker broke the protocol: {exc}"))
            return
        call = await self.read()
        if call is not _STOP:
            if self.call_group is None:
                await self.answer(*call)
            else:  # answered in the call group, which the run need not wait for
                self.queued += 1
                self.hand_over(call)
        if self.outcome is None:
            # Until a runner reads the final frame (or the run ends otherwise).
            self.decided = anyio.Event()
            await self.decided.wait()

    async def run_job(self, call: _Call | None, runner: anyio.CancelScope) -> None:
        """A runner's job: read on and answer the call read, or answer ``call``.

        It reads on when ``call`` is ``None``. ``runner`` is the cancel scope
        of the runner running it.
        """
        if self.closing or self.outcome is not None:
            return  # too late to start
        if self.call_group is None:
            await self.job(call, None)
            return
        # A runner of the call group: the job is the run's to end, by
        # cancelling the runner's scope (the runner leaves with it).
        self.jobs[runner] = True
        try:
            await self.job(call, runner)
        finally:
            del self.jobs[runner]
            if self.jobs_gone is not None and not any(self.jobs.values()):
                self.jobs_gone.set()

    async def end_jobs(self) -> None:
        """Cancel the run's jobs in the call group; wait for those that may touch the channel.

        A job answering a call does not hold the run: the call goes on in the
        call group if it shields itself (or with ``shield_calls``, where it is
        not cancelled), and its answer is dropped.
        """
        for scope, touching in self.jobs.items():
            if touching or not self.shield_calls:
                scope.cancel()
        if any(self.jobs.values()):
            self.jobs_gone = anyio.Event()
            with anyio.CancelScope(shield=True):
                await self.jobs_gone.wait()

    async def job(self, call: _Call | None, scope: anyio.CancelScope | None) -> None:
        try:
            if call is None:
                if self.busy:
                    await self.answers_first()
                call = await self.read()
                if call is _STOP:
                    return
            else:
                self.queued -= 1  # a call handed over, starting now
            await self.answer(*call, scope)
        except Exception as exc:
            # Not a call's failure (those are answers): raised from run().
            if self.error is None:
                self.error = exc
            self.decide(self.failure("crashed", f"internal error: {type(exc).__name__}: {exc}"))

    async def answers_first(self) -> None:
        """Before reading on, let the calls being answered answer first, for a moment.

        A reader that starts while a call's answer is still on its way (a
        ``call_tool`` that waits, as the executor's does) finds nothing to read
        and sleeps in the kernel just before the answer goes out; one that
        starts after it polls for the worker's next frame (``FrameChannel``),
        which a quick tool's next call then finds without a wake-up. For
        bench_overhead.py (a)'s program through the executor (timestamps on the
        host): 132 -> 111 us from a call read to its answer sent, 68 -> 41 us
        from there to the next call read. Other tasks run between the turns it
        waits. Bounded by
        :data:`REPLY_SPIN`; after a wait that came to nothing (a slow tool),
        the next :data:`REPLY_SPIN_SKIP` readers do without.
        """
        if self.answers_skip:
            self.answers_skip -= 1
            return
        end = _clock() + REPLY_SPIN
        while self.busy and self.outcome is None:
            if _clock() >= end:
                self.answers_skip = REPLY_SPIN_SKIP
                return
            await anyio.lowlevel.checkpoint()

    async def read(self) -> _Call:
        """Read frames until the outcome is decided (then ``_STOP``) or a call.

        A call is returned for this task to answer, once another task reads on.
        """
        channel = self.channel
        limits = self.limits
        names = self.tool_names
        try:
            while True:
                if self.outcome is not None:
                    return _STOP  # (frames still buffered are of no use now)
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
                    if name not in names and name not in DISCOVERY_CALLS:
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
                        self.hand_over(call)
                        continue
                    self.hand_over(None)
                    return call
                if kind == "log":
                    text = frame["text"]
                    newlines = text.count("\n")
                    self.output += log_cost(len(payload), newlines)
                    if self.output > limits.max_output_bytes:
                        outcome = self.output_limit()
                        break
                    if newlines:
                        lines = text.split("\n")
                        self.logs.extend(lines)
                        if self.on_log is not None:
                            self.tell(lines)
                    else:
                        self.logs.append(text)
                        if self.on_log is not None:
                            self.tell((text,))
                elif kind == "overflow":  # counted, never shown
                    self.output += len(payload)
                    if self.output > limits.max_output_bytes:
                        outcome = self.output_limit()
                        break
                elif kind == "done":
                    self.output += len(payload)
                    self.worker.finished = True
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
                    error_kind = frame["kind"]
                    if error_kind == "sandbox":
                        raise ProtocolError("a sandbox error after 'ready'")
                    self.worker.finished = True
                    self.output += len(payload)
                    message = frame["message"]
                    if self.output > limits.max_output_bytes:
                        outcome = self.output_limit()
                    elif error_kind == "exception" and is_memory_error(message):
                        outcome = await self.memory_error(message)
                    else:
                        outcome = self.failure(error_kind, message)
                    break
                else:
                    raise ProtocolError(f"unexpected {kind!r} frame")
        except ProtocolError as exc:
            outcome = self.failure("protocol", f"the worker broke the protocol: {exc}")
        self.decide(outcome)
        return _STOP

    def tell(self, lines: Sequence[str]) -> None:
        """Pass ``lines`` to ``on_log``, in a copy of the run's caller's context.

        (The task reading may be a runner shared with other runs.) What the
        callback raises is contained: logged with its traceback the first time
        in a run, at debug level after that (a callback broken for good must
        not flood the log with a traceback per line).
        """
        assert self.on_log is not None
        self.log_failed = tell_lines(self.on_log, self.context, lines, failed=self.log_failed)

    def hand_over(self, call: _Call | None) -> None:
        """Give ``call`` (``None``: the reading) to a runner of the run."""
        assert self.runners is not None
        self.runners.submit(functools.partial(self.run_job, call))

    def decide(self, outcome: RunOutcome) -> None:
        """Settle the run's outcome; calls in flight are abandoned."""
        if self.outcome is not None or self.closing:
            return
        self.outcome = outcome
        if self.busy and self.call_group is None and self.group is not None:
            self.group.cancel_scope.cancel()
        elif self.decided is not None:
            self.decided.set()

    def output_limit(self) -> RunOutcome:
        return self.failure(
            "output_limit",
            f"the program's output exceeded {self.limits.max_output_bytes} bytes",
        )

    async def answer(
        self, call_id: int, name: str, args: Any, job: anyio.CancelScope | None = None
    ) -> None:
        """Answer one call through ``call_tool``; ``job``: the scope of a job in the call group."""
        if job is not None:
            self.jobs[job] = False  # while the call runs, the run's end does not wait for it
        try:
            # In a copy of the caller's context, as in a task the caller started
            # (the task answering may be a runner shared with other runs).
            context = self.context.copy()
            coro = context.run(self.call_tool, name, args)
            if type(coro) is not CoroutineType:  # some other awaitable: awaited in a coroutine
                coro = _await(coro)
            try:
                signal = context.run(coro.send, None)
            except StopIteration as done:  # answered without waiting
                answer = done.value
            else:
                answer = await InContext(coro, context, signal)
            if not isinstance(answer, ToolAnswer):
                answer = ToolAnswer.failure(
                    f"internal error: call_tool returned {type(answer).__name__}"
                )
        except Exception as exc:  # a tool's failure is data for the program
            answer = ToolAnswer.failure(f"{type(exc).__name__}: {exc}")
        finally:
            self.busy -= 1
        if job is not None:
            if self.closing:
                return  # the run is over: the answer goes nowhere
            self.jobs[job] = True
        try:
            if answer.ok:
                data = encode_frame(
                    {"type": "answer", "id": call_id, "ok": True, "value": answer.value}
                )
            else:
                failure: dict[str, Any] = {
                    "type": "answer",
                    "id": call_id,
                    "ok": False,
                    "message": str(answer.message),
                }
                if answer.code is not None:
                    failure["code"] = str(answer.code)
                data = encode_frame(failure)
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
        status = await self.exit_status()
        if status is None:
            return self.failure("crashed", "the worker was lost (its supervisor went away)")
        return self.classify_exit(status.status, status.cpu_seconds, status.max_rss_bytes)

    async def exit_status(self) -> ExitStatus | None:
        """The worker's exit status (killed if it does not end within a grace period)."""
        worker = self.worker
        status = await worker.wait_status(_STATUS_GRACE)
        if status is None:
            worker.kill()
            status = await worker.wait_status(_STATUS_GRACE)
        return status

    async def memory_error(self, message: str) -> RunOutcome:
        """The outcome of a program that failed with a ``MemoryError``.

        It is ``memory`` if the kernel saw the program use its memory up, else the
        ``exception`` the worker reported.

        The only path that waits for a finished worker's exit. The worker is let
        go (its channel shut), not killed: one that exits by itself is reaped
        by its own supervisor, whose account then includes the program's memory.
        """
        with contextlib.suppress(OSError):
            self.worker.sock.shutdown(socket.SHUT_RDWR)
        status = await self.exit_status()
        if status is not None and self.used_memory(status.max_rss_bytes):
            return self.memory_failure(status.max_rss_bytes)
        return self.failure("exception", message)

    def used_memory(self, max_rss_bytes: int) -> bool:
        used = max_rss_bytes - self.memory_baseline
        return used >= self.limits.memory_bytes * _MEMORY_EVIDENCE

    def memory_failure(self, max_rss_bytes: int) -> RunOutcome:
        before = (
            f" ({_mib(self.memory_baseline)} MiB before the run)" if self.memory_baseline else ""
        )
        return self.failure(
            "memory",
            f"the program ran out of memory: the worker's peak resident memory was "
            f"{_mib(max_rss_bytes)} MiB{before}, its memory limit "
            f"{_mib(self.limits.memory_bytes)} MiB",
        )

    def classify_exit(self, status: int, cpu_seconds: float, max_rss_bytes: int = 0) -> RunOutcome:
        """How a worker that sent no final frame ended, decided from the kernel's evidence.

        ``status`` is the raw wait status, ``cpu_seconds`` and ``max_rss_bytes``
        the worker's CPU time and peak resident memory (rusage). A limit's kind
        needs the limit reached (90% of the CPU time, half the memory resident);
        nothing the program chooses (its exit code, a signal it sends itself)
        decides one. The message says what the host knows: how the worker ended.
        """
        limits = self.limits
        if cpu_seconds >= limits.cpu_seconds * _CPU_EVIDENCE:
            return self.failure(
                "timeout", f"the program exceeded its CPU time limit of {limits.cpu_seconds:g} s"
            )
        if self.used_memory(max_rss_bytes):
            return self.memory_failure(max_rss_bytes)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            how = f"was killed by {_signal_name(-code)}{_SIGNAL_NOTES.get(-code, '')}"
        else:
            how = f"exited with code {code}"
        return self.failure("crashed", f"the worker {how} after {cpu_seconds:.2f} s of CPU")


_SIGNAL_NOTES: Final[dict[int, str]] = {
    signal.SIGSYS: " (the signal seccomp kills a forbidden system call with)",
    signal.SIGXFSZ: " (the signal of the file size limit)",
    signal.SIGXCPU: " (the signal of the CPU limit, which it had not reached)",
}


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f}"


async def _await(awaitable: Awaitable[ToolAnswer]) -> ToolAnswer:
    return await awaitable


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
