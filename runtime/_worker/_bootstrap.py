"""The in-worker half: run one untrusted program and report over the channel.

Runs inside a freshly forked, already sandboxed worker (see ``_zygote``). It
sends ``ready`` and waits, in blocking reads, for the run's start (the ``run``
frame, the tool names and the compiled program); it compiles the program as the
body of an ``async def`` (or loads the code object the host compiled for it) and
runs it as a task.
``print`` and ``sys.stderr`` become
``log`` frames; each ``tools`` binding sends a ``call`` frame and returns a
future that the channel reader resolves when the host answers, so concurrent
calls overlap. The last frame is ``done`` or ``error``; then the process exits.

Nothing here is trusted by the host: this code shares the process with the
program, so every limit it enforces is enforced on the host again. It reports
what the program did, never which limit it hit: past the output or tool-call
limit it sends the frame that passed it (for the host to count) and stops the
program without a final frame; a ``MemoryError`` is an ``exception`` like any
other (the host asks the kernel whether it was the memory limit).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import linecache
import marshal
import os
import selectors
import socket
import sys
import time
from collections.abc import Callable, Sequence
from types import CodeType
from typing import Any, NoReturn

import orjson

from ._program import (
    NOTHING,
    NOTHING_NAME,
    PROGRAM_FILENAME,
    PROGRAM_FUNCTION,
    LogWriter,
    ToolCallError,
    Tools,
    compile_program,
    memory_message,
    syntax_message,
)
from ._program import format_program_exception as _format_exception
from ._protocol import (
    HEADER,
    REPLY_SPIN,
    REPLY_SPIN_SKIP,
    FrameDecoder,
    NotJsonError,
    check_json,
    encode_frame,
)
from ._wire import MAX_FRAME_BRACKETS, log_cost, overflow_frames

__all__ = [
    "EXIT_HOST_GONE",
    "EXIT_INTERNAL",
    "EXIT_MEMORY",
    "PROGRAM_FILENAME",
    "ReplySelector",
    "ToolCallError",
    "Tools",
    "WorkerSettings",
    "compile_for_worker",
    "compile_program",
    "format_program_exception",
    "new_worker_loop",
    "serve",
    "set_cpu_policy",
]

# Exit codes, for a reader of the worker's status: the host decides nothing
# from them (the program can exit with any code it likes).
EXIT_MEMORY = 3  # the failure could not even be reported
EXIT_INTERNAL = 4
EXIT_HOST_GONE = 5
# A read asks for what the frame in progress still needs, within these bounds:
# a buffer over glibc's mmap threshold (128 KiB) costs an mmap and a munmap
# per read, several times the read itself for the small frames of a call.
_MIN_RECV = 1 << 16
_MAX_RECV = 1 << 20
# The run's start is read into a buffer a spare makes ahead (see start_room):
# at least this big, made ready ahead for at most the second bound. Its frames
# come from the host, as big as the decoder's first limit allows (the third).
_START_BYTES = 1 << 12
_MAX_START_ROOM = 1 << 20
_MAX_START_FRAME = 1 << 30
# Failure messages are for a model to read: longer ones keep their head and tail.
_MAX_MESSAGE_CHARS = 32_768
_clock = time.perf_counter

_INTERNAL_DIRS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep,
)


class WorkerSettings:
    """Zygote-wide settings every worker gets (fixed when the zygote starts)."""

    __slots__ = ("allowed_modules", "restricted")

    def __init__(self, *, allowed_modules: frozenset[str] | None, restricted: bool) -> None:
        self.allowed_modules = allowed_modules
        self.restricted = restricted


def _is_internal(filename: str) -> bool:
    return filename.startswith(_INTERNAL_DIRS)


def format_program_exception(exc: BaseException) -> str:
    """The traceback of ``exc`` in the program's own lines, runtime frames removed."""
    return _format_exception(exc, internal=_is_internal)


# --------------------------------------------------------------------------- the loop


class ReplySelector(selectors.DefaultSelector):
    """The worker loop's selector: right after a tool call went out, poll, not sleep.

    A quick tool answers within tens of microseconds. A process that sleeps in
    the kernel meanwhile lets its CPU go idle, and waking an idle CPU (a
    virtual one above all) costs more than the answer took. So for
    :data:`REPLY_SPIN` after :meth:`expect_reply`, a wait that would block
    polls instead (up to the timeout, when a timer is due sooner), giving
    the CPU to any other process that needs it (the host, when both share a
    CPU) between polls; then it blocks for the rest of the timeout. After a
    poll that came to nothing, the next :data:`REPLY_SPIN_SKIP` calls do
    without (their tool is slow). Other waits are not changed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.spin_until = 0.0
        self.skip = 0

    def expect_reply(self) -> None:
        if self.skip:
            self.skip -= 1
        else:
            self.spin_until = _clock() + REPLY_SPIN

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        if timeout is None or timeout > 0:
            clock = _clock
            started = now = clock()
            end = self.spin_until if timeout is None else min(self.spin_until, now + timeout)
            if now < end:
                poll = super().select
                while True:
                    ready: list[tuple[Any, int]] = poll(0)
                    if ready:
                        return ready
                    os.sched_yield()
                    now = clock()
                    if now >= end:
                        if end == self.spin_until:  # no answer in time
                            self.skip = REPLY_SPIN_SKIP
                        break
                if timeout is not None:
                    timeout = max(0.0, timeout - (now - started))
        return super().select(timeout)


def new_worker_loop() -> tuple[asyncio.AbstractEventLoop, ReplySelector]:
    """A worker's event loop, and its selector (which the run tells of calls sent)."""
    selector = ReplySelector()
    return asyncio.SelectorEventLoop(selector), selector


# --------------------------------------------------------------------------- the run


class _ChannelRun:
    """One program run: the channel, the pending tool calls and the limits.

    Created (with the channel's reader registered on a loop that already ran
    the prewarm program) before the worker says "ready": the run frame is
    read directly, then the loop runs the program and reads the answers.
    """

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        settings: WorkerSettings,
        replies: ReplySelector | None = None,
    ) -> None:
        self.sock = sock
        self.loop = loop
        self.settings = settings
        self.replies = replies
        # The run's start comes from the host: it is not limited.
        self.decoder = FrameDecoder(_MAX_START_FRAME)
        self.max_output = 1 << 62
        self.max_message = 1 << 30
        self.max_calls = 0
        self.output = 0
        self.calls = 0
        self.pending: dict[int, tuple[asyncio.Future[Any], str]] = {}
        self.outbox: list[bytes] = []
        self.writer = LogWriter(self)
        self.run_frame: dict[str, Any] | None = None
        self.code = ""
        self.tools: Tools | None = None
        self.namespace: dict[str, Any] = {}
        self.task: asyncio.Task[Any] | None = None
        # Whether the program's return ends the worker (not so for the prewarm run).
        self.final = True
        self.setup_error: BaseException | None = None

    # -- sending -------------------------------------------------------------------

    def send(self, frame: dict[str, Any]) -> None:
        self.flush()
        self.send_bytes(encode_frame(frame))

    def finish(self, frame: dict[str, Any]) -> NoReturn:
        """Send the final frame and leave; nothing of the program outlives this."""
        self.send(frame)
        self.leave()

    def leave(self) -> NoReturn:
        """Exit once the host has the final frame and lets go of the channel.

        The host kills the worker as soon as it reads that frame; blocking until
        then leaves the CPU to the host, where exiting at once would first spend
        it on this process's teardown (and on the zygote's reaping).
        """
        set_cpu_policy(background=True)
        try:
            self.sock.setblocking(True)
            while self.sock.recv(_MIN_RECV):
                pass
        except BaseException:  # whatever ends the wait, the worker is done
            pass
        os._exit(0)

    def fail(self, kind: str, message: str) -> NoReturn:
        self.writer.drain()
        limit = min(_MAX_MESSAGE_CHARS, self.max_message // 8)
        if len(message) > limit:
            # Keep the head and the tail: the tail holds the exception line.
            head, tail = limit // 4, limit - limit // 4
            omitted = len(message) - head - tail
            message = f"{message[:head]}\n... [{omitted} characters omitted] ...\n{message[-tail:]}"
        try:
            self.finish({"type": "error", "kind": kind, "message": message})
        except orjson.JSONEncodeError:
            message = message.encode("utf-8", "backslashreplace").decode("utf-8")
            self.finish({"type": "error", "kind": kind, "message": message})

    def log(self, text: str) -> None:
        """Send ``text`` as log frames; past the output limit, stop (see :func:`log_cost`)."""
        try:
            data = orjson.dumps({"type": "log", "text": text})
        except orjson.JSONEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
            data = orjson.dumps({"type": "log", "text": text})
        if len(data) > self.max_message or (
            len(data) > MAX_FRAME_BRACKETS and _brackets(data) > MAX_FRAME_BRACKETS
        ):
            # One huge line: split it so every frame stays under the limits.
            step = max(1, min(self.max_message // 8, MAX_FRAME_BRACKETS // 2))
            for start in range(0, len(text), step):
                self.log(text[start : start + step])
            return
        self.flush()  # keep logs and calls in the order the program made them
        self.send_bytes(len(data).to_bytes(4, "big") + data)
        self.output += log_cost(len(data), text.count("\n"))
        if self.output > self.max_output:
            self.leave()  # the host counted the same and ends the run

    # -- tool calls ----------------------------------------------------------------

    def call(self, name: str, args: Any) -> asyncio.Future[Any]:
        call_id = self.calls + 1
        try:
            check_json(args)
            data = orjson.dumps({"type": "call", "id": call_id, "name": name, "args": args})
        except (NotJsonError, orjson.JSONEncodeError) as exc:
            raise TypeError(f"arguments of tool {name!r} are not JSON: {exc}") from None
        if len(data) > self.max_message:  # not sent: the id goes to the next call
            raise ToolCallError(
                name, f"arguments are {len(data)} bytes, over the limit of {self.max_message}"
            )
        if len(data) > MAX_FRAME_BRACKETS and _brackets(data) > MAX_FRAME_BRACKETS:
            raise ToolCallError(name, f"arguments hold {_TOO_MANY_BRACKETS}")
        self.calls = call_id
        frame = len(data).to_bytes(4, "big") + data
        if call_id > self.max_calls:
            # One call too many: the host counts it and ends the run.
            self.flush()
            self.send_bytes(frame)
            self.leave()
        future: asyncio.Future[Any] = self.loop.create_future()
        if self.pending or self.outbox:
            # Other calls are in flight (asyncio.gather and friends): batch
            # this one with whatever else is issued before the loop turns.
            if not self.outbox:
                self.loop.call_soon(self.flush)
            self.outbox.append(frame)
        else:
            self.send_bytes(frame)
            if self.replies is not None:
                self.replies.expect_reply()
        self.pending[call_id] = (future, name)
        return future

    def flush(self) -> None:
        """Send the batched call frames."""
        if self.outbox:
            data = b"".join(self.outbox)
            self.outbox.clear()
            self.send_bytes(data)
            if self.replies is not None:
                self.replies.expect_reply()

    def send_bytes(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            os._exit(EXIT_HOST_GONE)

    def on_readable(self) -> None:
        try:
            data = self.sock.recv(min(max(self.decoder.wanted(), _MIN_RECV), _MAX_RECV))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            os._exit(EXIT_HOST_GONE)
        if not data:
            os._exit(EXIT_HOST_GONE)
        self.received(data)

    def received(self, data: bytes) -> None:
        """Take ``data`` from the host: the run's start (see :meth:`start_from`), then answers."""
        payloads: Sequence[bytes | memoryview] = self.decoder.feed(data)
        if self.task is None:
            payloads = self.start_from(payloads)
        for payload in payloads:
            frame = orjson.loads(payload)
            entry = self.pending.pop(frame["id"], None)
            if entry is None or entry[0].done():
                continue
            future, name = entry
            if frame["ok"]:
                future.set_result(frame["value"])
            else:
                future.set_exception(ToolCallError(name, frame["message"], frame.get("code")))

    # -- the program ---------------------------------------------------------------

    def read_start(self, inbox: bytearray) -> None:
        """Read the run's start into ``inbox`` (blocking reads) and start the run.

        Its frames are taken where they lie in ``inbox``, not copied, and
        ``inbox`` grows only for a frame that does not fit in it (see
        :func:`start_room`). What follows the start goes to the decoder.
        """
        filled = start = 0
        while True:
            with memoryview(inbox) as view:
                while filled - start >= HEADER.size:
                    end = start + HEADER.size + HEADER.unpack_from(view, start)[0]
                    if end > filled:
                        break
                    with view[start + HEADER.size : end] as payload:
                        start = end
                        self.start_from((payload,))
                    if self.task is not None or self.setup_error is not None:
                        break
            if self.task is not None or self.setup_error is not None:
                break
            # Room for the frame in progress (for its header, until that has come).
            wanted = HEADER.size
            if filled - start >= HEADER.size:
                wanted += HEADER.unpack_from(inbox, start)[0]
                if wanted > HEADER.size + _MAX_START_FRAME:
                    self.setup_error = ValueError(f"a frame of {wanted} bytes starts the run")
                    break
            if start + wanted > len(inbox):
                del inbox[:start]
                filled -= start
                start = 0
                if wanted > len(inbox):
                    inbox.extend(bytes(wanted - len(inbox)))
            try:
                with memoryview(inbox) as view, view[filled:] as free:
                    received = self.sock.recv_into(free)
            except OSError:
                os._exit(EXIT_HOST_GONE)
            if not received:
                os._exit(EXIT_HOST_GONE)
            filled += received
        if filled > start and self.setup_error is None:
            self.received(bytes(inbox[start:filled]))

    def start_from(self, payloads: Sequence[bytes | memoryview]) -> Sequence[bytes | memoryview]:
        """Take the run's start off ``payloads``; start the run once it is whole.

        The start: the run frame, then the packed tool names when the frame's
        ``tools`` is ``None`` (a frame of their own, not JSON), then the compiled
        program when the frame says ``compiled``.
        """
        index = 0
        try:
            while self.task is None and index < len(payloads):
                payload = payloads[index]
                index += 1
                frame = self.run_frame
                if frame is None:
                    self.run_frame = frame = orjson.loads(payload)
                    names = frame["tools"]
                    if names is None:
                        continue  # they come next
                elif self.tools is None:
                    names = str(payload, "utf-8")
                else:
                    self.launch(payload)
                    continue
                self.prepare(frame, names)
                if not frame.get("compiled"):
                    self.launch(None)
        except BaseException as exc:  # not the program's: the worker failed to set up
            self.setup_error = exc
            return []
        return payloads[index:]

    def prepare(self, frame: dict[str, Any], names: str) -> None:
        """Set the run up from its frame and tool names (while the compiled program is on its way)."""
        self.max_output = int(frame["max_output_bytes"])
        self.max_message = int(frame["max_message_bytes"])
        self.max_calls = int(frame["max_tool_calls"])
        self.decoder = FrameDecoder(self.max_message)
        self.code = code = frame["code"]
        self.tools = tools = Tools(self, names)
        sys.stdout = sys.stderr = self.writer
        linecache.cache[PROGRAM_FILENAME] = (
            len(code),
            None,
            code.splitlines(True),
            PROGRAM_FILENAME,
        )
        self.namespace = _program_globals(tools, self.settings)

    def launch(self, compiled_bytes: bytes | memoryview | None) -> None:
        """Start the program's task; ``compiled_bytes`` from the host, if any."""
        compiled: CodeType | None = None
        if compiled_bytes:
            # Compiled by the host (the trusted side) with this same interpreter.
            loaded = marshal.loads(compiled_bytes)
            if type(loaded) is CodeType:
                compiled = loaded
        if compiled is None:
            try:
                compiled = _compile(self.code, self.settings)
            except SyntaxError as exc:
                self.fail("syntax", syntax_message(exc))
            except MemoryError:
                self.fail("exception", "MemoryError: the program is too large to compile")
            except RecursionError:
                self.fail("syntax", "SyntaxError: the program is nested too deeply to compile")
        namespace = self.namespace
        exec(compiled, namespace)
        main = namespace.pop(PROGRAM_FUNCTION)
        self.task = task = self.loop.create_task(self.execute(main))
        task.add_done_callback(self.on_done)

    def on_done(self, task: asyncio.Task[Any]) -> None:
        self.loop.stop()

    async def execute(self, main: Callable[[], Any]) -> Any:
        value = await main()
        if self.final:
            # Straight from the program's task: no done callback and no
            # loop.stop() turn between the return and the outcome. Failures
            # still end the loop and are reported by ``serve``.
            self.report(value)
        return value

    def report(self, value: Any) -> NoReturn:
        data = self.result_frame(value)
        self.flush()
        self.send_bytes(data)
        self.leave()

    def result_frame(self, value: Any) -> bytes:
        """The final frame for the program's return ``value`` (a failure is sent and ends here)."""
        self.writer.drain()
        if value is NOTHING:
            self.finish({"type": "done"})
        try:
            check_json(value)
            data = orjson.dumps({"type": "done", "result": value})
        except (NotJsonError, orjson.JSONEncodeError) as exc:
            self.fail(
                "exception",
                f"TypeError: the program's return value is not lossless JSON: {exc}",
            )
        if len(data) > MAX_FRAME_BRACKETS and _brackets(data) > MAX_FRAME_BRACKETS:
            self.fail("exception", f"ValueError: the program's result holds {_TOO_MANY_BRACKETS}")
        if len(data) > self.max_message:
            # No frame can carry it: send what shows the host the output limit
            # passed, or, within the limit, fail as the program's error.
            frames = overflow_frames(len(data), self.output, self.max_output, self.max_message)
            if frames is None:
                self.fail(
                    "exception",
                    f"ValueError: the program's result is {len(data)} bytes, over the "
                    f"message limit of {self.max_message} bytes",
                )
            self.flush()
            for text in frames:
                self.send_bytes(len(text).to_bytes(4, "big") + text.encode())
            self.leave()
        return len(data).to_bytes(4, "big") + data


_TOO_MANY_BRACKETS = (
    f"more than {MAX_FRAME_BRACKETS} arrays and objects (or '[' and '{{' in strings), "
    "too many for one message"
)


def _brackets(data: bytes) -> int:
    return data.count(b"[") + data.count(b"{")


def _program_globals(tools: Tools, settings: WorkerSettings) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        "tools": tools,
        "ToolCallError": ToolCallError,
        NOTHING_NAME: NOTHING,
    }
    if settings.restricted:
        from ._restricted import restricted_globals

        return restricted_globals(namespace, allowed=settings.allowed_modules)
    return namespace


def serve(
    sock: socket.socket,
    loop: asyncio.AbstractEventLoop,
    layers: list[list[Any]],
    settings: WorkerSettings,
    replies: ReplySelector | None = None,
    start_bytes: int = 0,
    *,
    prewarmed: bool = True,
) -> NoReturn:
    """Announce readiness, run the one program the host sends, report, exit.

    The event loop is warm (it ran the prewarm program, ``_prewarm``, unless
    ``prewarmed`` is false, as "ready" says) and its reader is registered
    while the worker waits as a spare; the run's start is read
    directly and starts the program's task before the loop runs it.
    ``replies``, the loop's selector when it is a :class:`ReplySelector`, is
    told of each tool call sent. ``start_bytes``: how big the host expects
    the run's start to be (see :func:`start_room`).
    """
    asyncio.set_event_loop(loop)
    run = _ChannelRun(sock, loop, settings, replies)
    loop.add_reader(sock.fileno(), run.on_readable)
    # The allow-list is in place before "ready", not set up while a program
    # waits: this code's own imports are trusted by the guard all the same.
    _install_import_guard(settings)
    inbox = start_room(start_bytes)
    # Forked with the zygote's background policy: a worker that waits for its
    # host must be woken up at once, not when the CPU has nothing else to do.
    set_cpu_policy(background=False)
    sock.sendall(encode_frame({"type": "ready", "layers": layers, "prewarmed": prewarmed}))
    # Wait for the run's start in a blocking read (the socket is blocking): one
    # system call when the host wakes this spare, not the event loop's poll,
    # its dispatch and then the read. The start starts the program's task; the
    # loop runs it, reading answers as they come.
    run.read_start(inbox)
    del inbox
    if run.setup_error is not None:
        raise run.setup_error
    escaped: BaseException | None = None
    try:
        loop.run_forever()
    except BaseException as exc:  # SystemExit and the like, out of the program's task
        escaped = exc
    try:
        if escaped is not None:
            raise escaped
        task = run.task
        if task is None or not task.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        value = task.result()
    except BaseException as exc:  # the program's failure, whatever it raised
        _report_failure(run, exc)
    run.report(value)


def start_room(start_bytes: int) -> bytearray:
    """The buffer to read the run's start into, made while the worker is a spare.

    A fresh process pays a page fault the first time it writes a page, several
    microseconds each on a virtual machine. Read into new buffers and decoded
    into new strings, the 60 KB start of a run with 5,000 tool names cost about
    80 faults more than the start of a run with 10 (0.3 ms, where the whole run
    takes 1). So a spare takes them while it waits, for the start the host
    expects (``start_bytes``, at most :data:`_MAX_START_ROOM`): it touches the
    buffer, and as much memory again that it frees below the buffer, where
    the tool names' string is then made (glibc's malloc reuses the free
    chunk). Without such a start, a small buffer.
    """
    size = min(start_bytes, _MAX_START_ROOM)
    if size <= _START_BYTES:
        return bytearray(_START_BYTES)
    # A block glibc mmapped, freed, raises its mmap threshold past the block's
    # size: the two below, and the string, then come from the heap. (Zeroed by
    # calloc, so never touched, when it is mmapped.)
    bytes(size + _START_BYTES)
    room = bytearray(size)  # (zeroed, so touched)
    inbox = bytearray(size)
    del room
    return inbox


def _report_failure(run: _ChannelRun, exc: BaseException) -> NoReturn:
    """Report the program's failure ``exc`` (a ``MemoryError`` too) as an ``exception``."""
    try:
        try:
            message = format_program_exception(exc)
        except MemoryError:
            message = memory_message()
        run.fail("exception", message)
    except MemoryError:
        # Not even that: the host finds the worker gone and asks the kernel.
        os._exit(EXIT_MEMORY)


def set_cpu_policy(*, background: bool) -> None:
    """Make this process yield the CPU to the host (``SCHED_BATCH``), or not.

    A background process does not preempt a running one when it wakes up: the
    zygote forking a spare, a worker's teardown and the zygote reaping it then
    wait for an idle CPU or the host's next wait, instead of delaying the host
    in the middle of handing a run over. Its share of the CPU stays the same.
    Best effort: where the policy cannot be set, nothing changes.
    """
    policy = getattr(os, "SCHED_BATCH" if background else "SCHED_OTHER", None)
    if policy is not None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, os.sched_param(0))


def _compile(code: str, settings: WorkerSettings) -> CodeType:
    return _compile_source(code, restricted=settings.restricted)


def _compile_source(code: str, *, restricted: bool) -> CodeType:
    if restricted:
        from ._restricted import compile_restricted_program

        return compile_restricted_program(code, PROGRAM_FILENAME)
    return compile_program(code)


def compile_for_worker(code: str, *, restricted: bool) -> bytes | None:
    """Compile ``code`` as a worker would, for a worker of this same interpreter.

    Returns the code object as marshal bytes, or ``None`` when it does not
    compile here: the worker then compiles the source itself and reports why.
    """
    try:
        return marshal.dumps(_compile_source(code, restricted=restricted))
    except Exception:  # SyntaxError, RecursionError, MemoryError...: the worker's to report
        return None


def _install_import_guard(settings: WorkerSettings) -> None:
    """Install the import allow-list, unless it is off."""
    if settings.allowed_modules is None:
        return
    # No fallback: the zygote refuses to start without the guard's module.
    from ._imports import install_import_guard

    install_import_guard(settings.allowed_modules)
