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
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

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
# Answerer tasks kept idle for the next calls; beyond this, one that finishes
# leaves at once instead of costing a wake-up when the run ends.
_MAX_IDLE_ANSWERERS = 8


async def drive_run(
    worker: Worker,
    *,
    code: str,
    tool_names: Sequence[str],
    call_tool: CallTool,
    limits: Limits,
    cancel: CancelSignal | None,
    compile_program: Callable[[str], bytes | None] | None = None,
) -> RunOutcome:
    """Run ``code`` on ``worker`` and return its outcome; the caller kills the worker.

    ``compile_program``, when given, compiles ``code`` for the worker here (its
    bytes follow the run frame; ``None`` leaves compiling, and reporting why it
    fails, to the worker).
    """
    session = _Session(worker, tool_names, call_tool, limits)
    return await session.run(code, cancel, compile_program)


class _Session:
    __slots__ = (
        "answerers_done",
        "busy_answerers",
        "call_tool",
        "calls",
        "calls_group",
        "channel",
        "exit_stack",
        "idle_answerers",
        "limits",
        "logs",
        "output",
        "queued_calls",
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
        # Calls go to idle answerer tasks (a queue plus one wake-up event per
        # idle task); a new task is only started when none is idle. Starting a
        # task, or a stream hand-off, costs more event-loop turns than this.
        self.queued_calls: deque[tuple[int, str, Any]] = deque()
        self.idle_answerers: list[anyio.Event] = []
        self.busy_answerers = 0
        self.answerers_done = False
        self.calls_group: anyio.abc.TaskGroup | None = None
        self.exit_stack = contextlib.AsyncExitStack()

    def failure(self, kind: FailureKind, message: str) -> RunOutcome:
        return RunOutcome(kind=kind, message=message, logs=self.logs, tool_calls=self.calls)

    async def run(
        self,
        code: str,
        cancel: CancelSignal | None,
        compile_program: Callable[[str], bytes | None] | None,
    ) -> RunOutcome:
        fields: dict[str, Any] = {
            "type": "run",
            "code": code,
            "tools": sorted(self.tool_names),
            "max_output_bytes": self.limits.max_output_bytes,
            "max_tool_calls": self.limits.max_tool_calls,
            "max_message_bytes": self.limits.max_message_bytes,
        }
        if compile_program is not None:
            fields["compiled"] = True
        run_frame = encode_frame(fields)
        outcome: RunOutcome | None = None
        signalled = False
        with anyio.CancelScope(deadline=anyio.current_time() + self.limits.timeout) as scope:

            def on_cancel() -> None:
                nonlocal signalled
                signalled = True
                scope.cancel()

            dispose = cancel.add_listener(on_cancel) if cancel is not None else None
            try:
                # The answerers' task group is only entered (on this stack) at the
                # first tool call: a run without calls does not pay for one.
                async with contextlib.AsyncExitStack() as self.exit_stack:
                    try:
                        outcome = await self.converse(run_frame, code, compile_program)
                    except ProtocolError as exc:
                        outcome = self.failure("protocol", f"the worker broke the protocol: {exc}")
                    calls = self.calls_group
                    if calls is not None:
                        # The outcome is decided: idle answerers leave, calls still
                        # in flight are abandoned. (Cancelling costs a task repr in
                        # anyio: only when needed.)
                        self.answerers_done = True
                        while self.idle_answerers:
                            self.idle_answerers.pop().set()
                        if self.busy_answerers:
                            calls.cancel_scope.cancel()
            finally:
                if dispose is not None:
                    dispose()
        if outcome is not None:
            return outcome
        if signalled:
            return self.failure("cancelled", "the run was cancelled")
        return self.failure(
            "timeout", f"the run exceeded its wall-clock limit of {self.limits.timeout:g} s"
        )

    async def converse(
        self,
        run_frame: bytes,
        code: str,
        compile_program: Callable[[str], bytes | None] | None,
    ) -> RunOutcome:
        channel = self.channel
        calls = self.calls_group
        # Pipelined: the worker reads it after "ready". If the worker is already
        # gone, what it wrote before is still read below.
        with contextlib.suppress(ChannelClosed):
            await channel.send(run_frame)
            if compile_program is not None:
                compiled = compile_program(code) or b""
                await channel.send(HEADER.pack(len(compiled)) + compiled)
        payload = await channel.receive()
        if payload is None:
            return await self.lost()
        frame: dict[str, Any] = parse_worker_frame(payload)  # type: ignore[assignment]
        if frame["type"] == "error" and frame["kind"] == "sandbox":
            return self.failure("sandbox", frame["message"])
        if frame["type"] != "ready":
            raise ProtocolError(f"expected 'ready', got {frame['type']!r}")
        limits = self.limits
        names = self.tool_names
        while True:
            payload = await channel.receive()
            if payload is None:
                return await self.lost()
            frame = parse_worker_frame(payload)  # type: ignore[assignment]
            kind = frame["type"]
            if kind == "log":
                text = frame["text"]
                self.output += len(text) + 1
                if self.output > limits.max_output_bytes:
                    return self.output_limit()
                self.logs.extend(text.split("\n"))
            elif kind == "call":
                call_id = frame["id"]
                if call_id != self.calls + 1:
                    raise ProtocolError(f"call id {call_id} out of order")
                name = frame["name"]
                if name not in names:
                    raise ProtocolError(f"call to unknown tool {name[:80]!r}")
                self.calls = call_id
                if call_id > limits.max_tool_calls:
                    self.calls = limits.max_tool_calls
                    return self.failure(
                        "tool_call_limit",
                        f"the program made more than {limits.max_tool_calls} tool calls",
                    )
                self.busy_answerers += 1
                if self.idle_answerers:
                    self.queued_calls.append((call_id, name, frame["args"]))
                    self.idle_answerers.pop().set()
                else:
                    if calls is None:
                        calls = self.calls_group = await self.exit_stack.enter_async_context(
                            anyio.create_task_group()
                        )
                    calls.start_soon(self.answerer, call_id, name, frame["args"], name="ptc-call")
                if not channel.buffered:
                    # Let the answerer run first: waiting for the socket again
                    # then happens while the worker reads the answer.
                    await anyio.lowlevel.checkpoint()
            elif kind == "done":
                self.output += len(payload)
                if self.output > limits.max_output_bytes:
                    return self.output_limit()
                if "result" in frame:
                    return RunOutcome(
                        logs=self.logs,
                        result=frame["result"],
                        has_result=True,
                        tool_calls=self.calls,
                    )
                return RunOutcome(logs=self.logs, tool_calls=self.calls)
            elif kind == "error":
                if frame["kind"] == "sandbox":
                    raise ProtocolError("a sandbox error after 'ready'")
                self.output += len(payload)
                if self.output > limits.max_output_bytes and frame["kind"] != "output_limit":
                    return self.output_limit()
                return self.failure(frame["kind"], frame["message"])
            else:
                raise ProtocolError(f"unexpected {kind!r} frame")

    def output_limit(self) -> RunOutcome:
        return self.failure(
            "output_limit",
            f"the program's output exceeded {self.limits.max_output_bytes} bytes",
        )

    async def answerer(self, call_id: int, name: str, args: Any) -> None:
        """Answer one call, then stay around for the next ones."""
        await self.answer(call_id, name, args)
        while True:
            if self.queued_calls:
                await self.answer(*self.queued_calls.popleft())
                continue
            if self.answerers_done or len(self.idle_answerers) >= _MAX_IDLE_ANSWERERS:
                return
            wake_up = anyio.Event()
            self.idle_answerers.append(wake_up)
            await wake_up.wait()

    async def answer(self, call_id: int, name: str, args: Any) -> None:
        try:
            await self.answer_one(call_id, name, args)
        finally:
            self.busy_answerers -= 1

    async def answer_one(self, call_id: int, name: str, args: Any) -> None:
        try:
            answer = await self.call_tool(name, args)
            if not isinstance(answer, ToolAnswer):
                answer = ToolAnswer.failure(
                    f"internal error: call_tool returned {type(answer).__name__}"
                )
        except Exception as exc:  # a tool's failure is data for the program
            answer = ToolAnswer.failure(f"{type(exc).__name__}: {exc}")
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
            await self.channel.send(data, batch=self.busy_answerers > 1)

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
