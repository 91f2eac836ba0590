"""What both ends of a worker's channel check and count alike: lossless JSON and output.

The lossless-JSON check (:func:`check_json`) a worker makes of every value it
sends, and the output accounting (:func:`log_cost`, :func:`overflow_frames`): a
worker stops its program once its own count passes the output limit, right
after the frame that passed it, and the host, counting the same frames the
same way, decides ``output_limit``. Defined here once for the host, the CPython
worker and the Pyodide worker. Standard library only and no package-relative
import: the CPython worker and the host import it as ``runtime._worker._wire``,
the Pyodide worker loads this file as the module ``_ptc_wire``.

Security warning: in a worker this code runs in the same interpreter as the
untrusted program, which can patch it. It enforces nothing the host relies on;
the host checks every frame and every limit again.
"""

from __future__ import annotations

import math

__all__ = [
    "LINE_COST",
    "MAX_FRAME_BRACKETS",
    "MAX_JSON_DEPTH",
    "NotJsonError",
    "check_json",
    "log_cost",
    "overflow_frames",
]

#: What each line of output costs toward the output limit on top of its text:
#: its quotes and comma in the ``{logs, result}`` JSON (3 bytes) or its newline
#: in the rendered text (1 byte), rounded up. A flood of empty lines is paid for.
LINE_COST = 4
#: Most ``[`` and ``{`` one frame may hold (arrays and objects, or characters
#: of its strings). Parsing costs the host about 0.3 µs and 64 bytes per array
#: or object, against a few nanoseconds per byte of anything else: the bound
#: keeps one frame within a third of a second and tens of MiB however its
#: bytes are spent. A worker splits a longer log line and refuses larger
#: arguments or results (as too big for a message); the host refuses such a frame.
MAX_FRAME_BRACKETS = 1 << 20
#: Deepest nesting of a value that crosses the wire (tool arguments, results).
#: orjson serialises at most 254 levels and the registry's snapshot admits 255;
#: the host wraps a program's value in at most 3 more (``ptc run --json``:
#: payload, events, event), so 250 leaves every host-side consumer room.
MAX_JSON_DEPTH = 250
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
# ``{"type":"log","text":""}`` and ``{"type":"overflow","text":""}``: frames without their text.
_LOG_FRAME_BYTES = 24
_OVERFLOW_FRAME_BYTES = 29


# --------------------------------------------------------------------------- lossless JSON
# What both workers check before a value leaves them (the host checks again).


class NotJsonError(ValueError):
    """A value is not lossless JSON; ``path`` says where (``$`` is the root)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{problem} at {path}")


def check_json(value: object) -> None:
    """Raise :class:`NotJsonError` unless ``value`` is lossless JSON.

    Lossless JSON: ``dict`` with ``str`` keys, ``list``, ``str``, ``int`` within
    64 bits, finite ``float``, ``bool`` and ``None``; exact types, no cycles,
    nesting at most :data:`MAX_JSON_DEPTH`.
    """
    try:
        _check(value, 0)
    except _Bad as bad:
        raise NotJsonError("$" + "".join(reversed(bad.parts)), bad.problem) from None


class _Bad(Exception):
    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.parts: list[str] = []


def _check(value: object, depth: int) -> None:
    # The path is only built on the way out of a failure: the walk stays cheap.
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return
    if kind is int:
        if not _INT_MIN <= value <= _INT_MAX:  # type: ignore[operator]
            raise _Bad("integer does not fit in 64 bits")
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _Bad(f"{value!r} is not a JSON number")
        return
    if depth >= MAX_JSON_DEPTH:
        raise _Bad(f"nesting deeper than {MAX_JSON_DEPTH} levels")
    if kind is list:
        item: object
        for index, item in enumerate(value):  # type: ignore[arg-type]
            try:
                _check(item, depth + 1)
            except _Bad as bad:
                bad.parts.append(f"[{index}]")
                raise
        return
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _Bad(f"key {key!r} is not a string")
            try:
                _check(item, depth + 1)
            except _Bad as bad:
                bad.parts.append(f"[{key!r}]")
                raise
        return
    hint = " (use a list)" if kind is tuple else ""
    raise _Bad(f"{kind.__name__} is not JSON{hint}")


# --------------------------------------------------------------------------- output limit


def log_cost(frame_bytes: int, newlines: int) -> int:
    r"""What one log frame counts toward the output limit, on either end of the wire.

    ``frame_bytes`` is the size of the frame's JSON payload and ``newlines``
    the number of ``"\n"`` in its text. The count is the text as JSON
    escapes it (UTF-8 bytes; 2 bytes per quote, backslash or newline, 6 per
    other control character), less each newline's escape, plus
    :data:`LINE_COST` for every line the text makes. So the logs, as the
    ``{logs, result}`` JSON or as rendered text, never take more bytes than
    they were counted for. (A frame written with more bytes than needed only
    costs its sender more.)
    """
    return frame_bytes - _LOG_FRAME_BYTES + (newlines + 1) * LINE_COST - 2 * newlines


def overflow_frames(
    frame_bytes: int, output: int, max_output: int, max_message: int
) -> list[str] | None:
    """What to send instead of a final frame of ``frame_bytes`` bytes that no frame can carry.

    Only the host decides that the output limit was passed, from bytes it
    counts itself, so as many bytes as it takes to pass the limit (``output``
    counted so far of ``max_output``) go instead, as ``overflow`` frames of
    spaces (counted by the host, never shown), each within ``max_message``.
    ``None`` when even the whole frame would not pass the limit: the result
    is then merely too big for a message, an error of the program's.
    """
    missing = max_output - output + 1
    if frame_bytes < missing or max_message < _OVERFLOW_FRAME_BYTES:
        return None
    frames: list[str] = []
    while missing > 0:
        size = min(max_message, max(missing, _OVERFLOW_FRAME_BYTES))
        frames.append('{"type":"overflow","text":"' + " " * (size - _OVERFLOW_FRAME_BYTES) + '"}')
        missing -= size
    return frames
