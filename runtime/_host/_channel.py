"""Host side of a worker's run channel: bounded frame I/O on a non-blocking socket."""

from __future__ import annotations

import socket
import time
from collections import deque

import anyio
import anyio.lowlevel

from .._exceptions import ChannelClosed
from .._worker._protocol import REPLY_SPIN, REPLY_SPIN_SKIP, FrameDecoder

__all__ = ["ChannelClosed", "FrameChannel"]

_MIN_RECV = 1 << 16
_MAX_RECV = 1 << 20
# Frames already buffered are handed out without touching the event loop; give
# it (and cancellation) a turn every so many so a flooding worker cannot starve it.
_FRAMES_PER_CHECKPOINT = 64
_clock = time.perf_counter


class FrameChannel:
    """Length-prefixed frames over a socket the worker holds the other end of.

    The socket is owned by the caller (closed by it); this only reads and writes.
    Reads never allocate more than one bounded frame ahead. Writes go through
    an outbox: a frame is written at once when the socket takes it, and frames
    queued while a write waits (or while a batch gathers) go out together, so
    many answers finishing in one loop turn cost one system call, not one each.
    """

    __slots__ = (
        "_decoder",
        "_drained",
        "_eof",
        "_flushing",
        "_frames",
        "_outbox",
        "_sent_at",
        "_since_checkpoint",
        "_skip",
        "_sock",
    )

    def __init__(self, sock: socket.socket, max_frame_bytes: int, *, drained: bool = False) -> None:
        """``drained``: the socket is known to be empty (the first read waits first)."""
        if sock.gettimeout() != 0.0:  # no system calls when it is non-blocking already
            sock.setblocking(False)
        self._sock = sock
        self._decoder = FrameDecoder(max_frame_bytes)
        self._frames: deque[bytes] = deque()
        self._eof = False
        self._drained = drained
        self._outbox: list[bytes | memoryview] = []
        self._flushing = False
        self._since_checkpoint = 0
        self._sent_at = 0.0  # _clock() at the last write
        self._skip = 0  # reads left that do not poll

    @property
    def buffered(self) -> bool:
        """Whether a received frame is waiting to be handed out."""
        return bool(self._frames)

    async def receive(self) -> bytes | None:
        """Return the next frame payload, or ``None`` once the worker closed its end.

        Raises:
            ProtocolError: the worker announced a frame over the size limit.
        """
        frames = self._frames
        if frames:
            self._since_checkpoint += 1
            if self._since_checkpoint >= _FRAMES_PER_CHECKPOINT:
                self._since_checkpoint = 0
                await anyio.lowlevel.checkpoint()
            return frames.popleft()
        sock = self._sock
        while not frames:
            if self._eof:
                return None
            size = min(max(self._decoder.wanted(), _MIN_RECV), _MAX_RECV)
            if self._drained:
                # The last read did not fill its buffer: the socket is most
                # likely empty, so wait first instead of paying for EAGAIN.
                data = await self._poll(size)
                if data is None:
                    await anyio.wait_readable(sock)
            else:
                data = None
            if data is None:
                try:
                    data = sock.recv(size)
                except BlockingIOError:
                    self._drained = True
                    continue
                except OSError:
                    data = b""
            if not data:
                self._eof = True
                continue
            self._drained = len(data) < size
            frames.extend(self._decoder.feed(data))
        self._since_checkpoint = 0
        return frames.popleft()

    async def _poll(self, size: int) -> bytes | None:
        """Read, a loop turn apart, for a moment after a write; ``None`` if nothing came.

        The worker answers a write (a tool's answer) within tens of
        microseconds, often less than it takes an idle CPU to wake up for the
        event loop's wait: a host that polls that long keeps its CPU awake.
        Other tasks run between the reads, as they would while this one waited.
        After a poll that came to nothing, the next few reads do without.
        """
        if self._skip:
            self._skip -= 1
            return None
        end = self._sent_at + REPLY_SPIN
        clock = _clock
        sock = self._sock
        polled = False
        while clock() < end:
            polled = True
            await anyio.lowlevel.checkpoint()
            try:
                return sock.recv(size)
            except BlockingIOError:
                continue
            except OSError:
                return b""
        if polled:
            self._skip = REPLY_SPIN_SKIP
        return None

    def send_nowait(self, *frames: bytes | memoryview) -> None:
        """Queue whole frames and write what the socket takes now (in one write), without waiting.

        Whatever does not fit stays queued for the next :meth:`send` or :meth:`flush`.

        Raises:
            ChannelClosed: the worker is gone.
        """
        self._outbox.extend(frames)
        if not self._flushing:
            self._write_some()

    async def send(self, data: bytes, *, batch: bool = False) -> None:
        """Write one whole frame; frames from concurrent tasks never interleave.

        With ``batch``, wait one loop turn first so that frames other tasks send
        in the meantime go out in the same write. When another task is already
        writing, the frame is left in its outbox (it writes it) and this returns.

        Raises:
            ChannelClosed: the worker is gone.
        """
        outbox = self._outbox
        if not batch and not outbox and not self._flushing:
            # The common case: nothing queued, and the socket takes it all.
            try:
                sent = self._sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None
            self._sent_at = _clock()
            if sent == len(data):
                return
            outbox.append(memoryview(data)[sent:])
        else:
            outbox.append(data)
        if self._flushing:
            return
        self._flushing = True
        try:
            if batch:
                await anyio.lowlevel.checkpoint()
            await self._flush()
        finally:
            self._flushing = False

    async def flush(self) -> None:
        """Write every queued frame (a no-op when another task is writing them).

        Raises:
            ChannelClosed: the worker is gone.
        """
        if self._outbox and not self._flushing:
            self._flushing = True
            try:
                await self._flush()
            finally:
                self._flushing = False

    async def _flush(self) -> None:
        while not self._write_some():
            await anyio.wait_writable(self._sock)

    def _write_some(self) -> bool:
        """Write queued frames until the socket is full; ``True`` once all are out."""
        outbox = self._outbox
        sock = self._sock
        while outbox:
            if len(outbox) == 1:
                data = outbox.pop()
            else:
                # Bounded copies: a batch is at most about _MAX_RECV bytes.
                count = total = 0
                for item in outbox:
                    count += 1
                    total += len(item)
                    if total >= _MAX_RECV:
                        break
                data = b"".join(outbox[:count])
                del outbox[:count]
            try:
                sent = sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                outbox.clear()
                raise ChannelClosed(str(exc)) from None
            self._sent_at = _clock()
            if sent < len(data):
                # Keep the rest first in line: frames never interleave.
                outbox.insert(0, memoryview(data)[sent:])
                return False
        return True
