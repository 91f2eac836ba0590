r"""The wire between host and worker: length-prefixed orjson frames.

A frame is a 4-byte big-endian payload length followed by one orjson object.
This module is imported by the host *and* by the worker (inside the zygote), so
it depends on nothing but the standard library and orjson.

Worker -> host::

    {"type": "ready", "layers": [[name, active, detail], ...][, "prewarmed": bool]}
    {"type": "call", "id": n, "name": tool_name, "args": json}     # ids 1, 2, 3, ...
    {"type": "log", "text": "one or more lines joined by \n"}
    {"type": "overflow", "text": spaces}  # counted output standing in for a
                                          # result too big for any frame
    {"type": "done"} | {"type": "done", "result": json}
    {"type": "error", "kind": "syntax" | "exception", "message": text}
    {"type": "error", "kind": "sandbox", "message": text}        # instead of "ready"

A worker reports what the program did, never which limit it hit: the host
counts the output (see ``_wire.log_cost``) and the calls, keeps the clock
and asks the kernel how the worker ended. A frame that claims a limit is
malformed. Values (``args``, ``result``) nest at most :data:`MAX_JSON_DEPTH`
levels, checked on the host before anything else touches them.

Host -> worker::

    {"type": "run", "code": str, "tools": str | null, "max_output_bytes": n,
     "max_tool_calls": n, "max_message_bytes": n[, "compiled": true]}
    <UTF-8 bytes of the packed tool names>  # a raw frame, only after a run
                                            # frame whose "tools" is null
    <marshal bytes of the compiled program, or empty>  # a raw frame, only after
                                                      # a run frame with "compiled"
    {"type": "answer", "id": n, "ok": true, "value": json}
    {"type": "answer", "id": n, "ok": false, "message": str[, "code": str]}

The tool names are packed as ``_program.pack_names`` packs them: in the run
frame for the Pyodide worker, in a frame of their own for the CPython worker,
which decodes them straight from the buffer it read them into (no JSON string
to unescape; see ``_bootstrap.start_room``). A run's start is the run frame
and the raw frames after it.

(Host -> worker is the trusted direction: the worker loads the code object the
host compiled for it with this same interpreter.)

Security warning: on the host every worker frame is hostile input. Use
:class:`FrameDecoder` (bounded before allocating) and :func:`parse_worker_frame`
(exact keys and types, bounded depth; it raises nothing but
:class:`ProtocolError`) and treat :class:`ProtocolError` as a reason to kill.
"""

from __future__ import annotations

import struct
from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict

import orjson

from .._exceptions import ProtocolError
from ._wire import MAX_FRAME_BRACKETS, MAX_JSON_DEPTH, NotJsonError, check_json

__all__ = [
    "HEADER",
    "MAX_JSON_DEPTH",
    "REPLY_SPIN",
    "REPLY_SPIN_SKIP",
    "WORKER_ERROR_KINDS",
    "CallFrame",
    "DoneFrame",
    "ErrorFrame",
    "FrameDecoder",
    "LogFrame",
    "NotJsonError",
    "OverflowFrame",
    "ProtocolError",
    "ReadyFrame",
    "WorkerFrame",
    "check_json",
    "encode_frame",
    "parse_worker_frame",
]

HEADER: Final = struct.Struct(">I")

#: After sending a frame that expects a reply (a tool call from the worker, an
#: answer from the host), how long (seconds) its sender polls for the next frame,
#: a loop turn apart, before it sleeps in the kernel: a fast tool's answer is
#: picked up without a wake-up (the round trip of bench_runtime.py). Both ends use it.
REPLY_SPIN: Final = 100e-6
#: Waits after a poll that came to nothing that sleep without one (a slow tool
#: would otherwise cost a poll on every call).
REPLY_SPIN_SKIP: Final = 8

#: Failure kinds a worker may report: what the program did ("sandbox" only
#: instead of "ready"). Kinds that mean a limit was hit are the host's alone.
WORKER_ERROR_KINDS: Final = frozenset({"syntax", "exception", "sandbox"})


class ReadyFrame(TypedDict):
    type: Literal["ready"]
    layers: list[list[Any]]
    prewarmed: NotRequired[bool]  # whether it ran the prewarm program (CPython workers)


class CallFrame(TypedDict):
    type: Literal["call"]
    id: int
    name: str
    args: Any


class LogFrame(TypedDict):
    type: Literal["log"]
    text: str


class OverflowFrame(TypedDict):
    type: Literal["overflow"]
    text: str


class DoneFrame(TypedDict, total=False):
    type: Literal["done"]
    result: Any


class ErrorFrame(TypedDict):
    type: Literal["error"]
    kind: str
    message: str


WorkerFrame: TypeAlias = ReadyFrame | CallFrame | LogFrame | OverflowFrame | DoneFrame | ErrorFrame


def encode_frame(frame: dict[str, Any]) -> bytes:
    """Serialize one frame with its length prefix."""
    payload = orjson.dumps(frame)
    return HEADER.pack(len(payload)) + payload


class FrameDecoder:
    """Split a byte stream into frame payloads, refusing oversized frames up front."""

    __slots__ = ("_buffer", "_max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self._buffer = bytearray()
        self._max_bytes = max_bytes

    def wanted(self) -> int:
        """How many bytes the current frame still needs (at least 1)."""
        buffered = len(self._buffer)
        if buffered < 4:
            return 4 - buffered
        size: int = HEADER.unpack_from(self._buffer)[0]
        return max(1, 4 + size - buffered)

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return every payload completed by it.

        Raises:
            ProtocolError: a frame announces more than the allowed bytes.
        """
        buffer = self._buffer
        buffer += data
        payloads: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= 4:
            (size,) = HEADER.unpack_from(buffer, start)
            if size > self._max_bytes:
                raise ProtocolError(
                    f"frame of {size} bytes exceeds the limit of {self._max_bytes} bytes"
                )
            if end - start - 4 < size:
                break
            payloads.append(bytes(buffer[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            del buffer[:start]
        return payloads


_CALL_KEYS: Final = frozenset({"type", "id", "name", "args"})
_LOG_KEYS: Final = frozenset({"type", "text"})
_DONE_KEYS: Final = frozenset({"type"})
_RESULT_KEYS: Final = frozenset({"type", "result"})
_ERROR_KEYS: Final = frozenset({"type", "kind", "message"})
_READY_KEYS: Final = frozenset({"type", "layers"})
_PREWARMED_READY_KEYS: Final = _READY_KEYS | {"prewarmed"}
# A payload this short cannot nest deeper than the limit (each level costs
# two bytes, and the frame itself is one): no need to look.
_SHALLOW_BYTES: Final = 2 * MAX_JSON_DEPTH
# The deepest nesting orjson writes (it refuses one level more).
_ORJSON_LEVELS: Final = 254


def _bad(detail: str) -> ProtocolError:
    return ProtocolError(f"invalid frame from the worker: {detail}")


def parse_worker_frame(payload: bytes) -> WorkerFrame:
    """Decode and schema-check one worker frame (exact keys and types, bounded depth).

    A payload with more than ``MAX_FRAME_BRACKETS`` brackets is refused
    unparsed. orjson parses at most 1024 levels (and refuses invalid UTF-8,
    lone surrogates, NaN and raw control characters); values are then checked
    to nest at most :data:`MAX_JSON_DEPTH` levels.

    Raises:
        ProtocolError: the payload is not a well-formed worker frame (nothing else).
    """
    brackets = 0
    if len(payload) > _SHALLOW_BYTES:
        brackets = payload.count(b"[") + payload.count(b"{")
        if brackets > MAX_FRAME_BRACKETS:
            raise _bad(f"more than {MAX_FRAME_BRACKETS} '[' and '{{' in one frame")
    try:
        frame = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise _bad(f"not JSON ({exc})") from None
    if type(frame) is not dict:
        raise _bad("not an object")
    kind = frame.get("type")
    keys = frame.keys()
    if kind == "call":
        if keys == _CALL_KEYS and type(frame["id"]) is int and type(frame["name"]) is str:
            if brackets > MAX_JSON_DEPTH + 1:  # (the frame itself is one)
                _check_depth(frame["args"])
            return frame  # type: ignore[return-value]
    elif kind == "log" or kind == "overflow":
        if keys == _LOG_KEYS and type(frame["text"]) is str:
            return frame  # type: ignore[return-value]
    elif kind == "done":
        if keys == _RESULT_KEYS:
            if brackets > MAX_JSON_DEPTH + 1:
                _check_depth(frame["result"])
            return frame  # type: ignore[return-value]
        if keys == _DONE_KEYS:
            return frame  # type: ignore[return-value]
    elif kind == "error":
        error_kind = frame.get("kind")
        if (
            keys == _ERROR_KEYS
            and type(error_kind) is str
            and error_kind in WORKER_ERROR_KINDS
            and type(frame["message"]) is str
        ):
            return frame  # type: ignore[return-value]
    elif kind == "ready":
        if (
            keys == _READY_KEYS
            or (keys == _PREWARMED_READY_KEYS and type(frame["prewarmed"]) is bool)
        ) and _is_layer_list(frame["layers"]):
            return frame  # type: ignore[return-value]
    elif type(kind) is str:
        raise _bad(f"unknown type {kind[:40]!r}")
    else:
        raise _bad(f"type is {type(kind).__name__}, not str")
    raise _bad(f"malformed {kind!r} frame")


def _check_depth(value: object) -> None:
    """Raise :class:`ProtocolError` if ``value`` nests too deep.

    Only values of frames with more brackets than the limit (counted in C;
    none counted in a frame too short to nest too deep) are looked at, by
    orjson itself: it writes at most :data:`_ORJSON_LEVELS` levels, so
    ``value`` wrapped in the levels the host may add fits exactly when it nests
    at most :data:`MAX_JSON_DEPTH`. (In C, without recursion in Python: a walk
    in Python would cost the host seconds for a frame of many small lists.)
    """
    for _ in range(_ORJSON_LEVELS - MAX_JSON_DEPTH):
        value = [value]
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise _bad(f"a value nests deeper than {MAX_JSON_DEPTH} levels") from None


def _is_layer_list(value: object) -> bool:
    if type(value) is not list or len(value) > 64:
        return False
    for item in value:
        if not (
            type(item) is list
            and len(item) == 3
            and type(item[0]) is str
            and type(item[1]) is bool
            and type(item[2]) is str
        ):
            return False
    return True
