"""Event dicts the executor emits, and the hooks that see them.

Every event is a JSON-serializable ``dict`` with ``type``, ``id`` and ``time``
(epoch seconds). Types:

- ``tool/call``: an outer model call starts (``name``, ``arguments``).
- ``tool/result``: it settled (``name``, ``is_error``, ``content``, ``error``?;
  ``truncated``: ``{chars, cut, budget}`` when the output budget cut its
  content, which is then what the model got: the whole goes to ``on_spill``).
- ``tool/ptc-dispatch-start``: a program's sub-call entered the pipeline
  (``parent_id``, ``name``, ``arguments``; never a schema or description).
- ``tool/ptc-dispatch``: that sub-call settled, exactly once (``parent_id``,
  ``name``, ``is_error``, ``content``, ``error``?, ``started``, ``duration``;
  ``abandoned: true`` when its run stopped waiting for it first).
- ``tool/progress``: a running call (outer or sub-call) reported progress
  (``name``, ``progress``, ``total``?, ``message``?; ``parent_id`` for a sub-call),
  between its start and its settle event.
- ``tool/ptc-log``: a line the program printed, as the host received it
  (``id`` is the outer ``run_code`` call's; ``text``, capped with a ``…`` and
  ``truncated: true`` when longer than ``LiveLogs.max_chars``), between the
  run's ``tool/call`` and ``tool/result``, among its sub-calls' events in
  the order things happened. Lines beyond ``LiveLogs``' rate are not sent;
  one last ``tool/ptc-log`` with ``dropped`` (how many) and a ``text``
  saying so comes before the ``tool/result``. Only what is shown live is
  limited: the run's result keeps every line.

Every outer call has exactly one ``tool/call`` and one ``tool/result``,
whatever ends it (cancellation included), and every sub-call that started
exactly one settle event. The sink gets them in order from the executor's
delivery thread (see ``ptc._delivery``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypedDict

from registry import ContentBlock, ToolExecution, ToolResult

__all__ = [
    "DispatchLogHook",
    "EventSink",
    "PtcDispatchLog",
    "ToolCallEvent",
    "ToolResultEvent",
    "call_event",
    "dispatch_event",
    "dispatch_start_event",
    "log_dropped_event",
    "log_event",
    "progress_event",
    "result_event",
]

EventType: TypeAlias = Literal[
    "tool/call",
    "tool/result",
    "tool/ptc-dispatch-start",
    "tool/ptc-dispatch",
    "tool/progress",
    "tool/ptc-log",
]


class ToolCallEvent(TypedDict):
    type: Literal["tool/call", "tool/ptc-dispatch-start"]
    id: str
    name: str
    arguments: Any
    time: float


class ToolResultEvent(TypedDict, total=False):
    type: Literal["tool/result", "tool/ptc-dispatch"]
    id: str
    parent_id: str
    name: str
    is_error: bool
    content: list[ContentBlock]
    error: dict[str, Any]
    time: float
    started: float
    duration: float
    abandoned: bool
    isolation: dict[str, Any]
    abandoned_sub_calls: list[str]
    truncated: dict[str, int]


EventSink: TypeAlias = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class PtcDispatchLog:
    """One settled sub-call about to be logged, as a dispatch-log hook sees it.

    ``content`` is the rendered result (what a native call would show); the
    program already received the value, so a hook only changes the logged copy.
    """

    execution: ToolExecution
    sub_call_id: str
    name: str
    is_error: bool
    content: list[ContentBlock]


#: ``(log) -> replacement content | None`` (sync or async); raising is contained.
DispatchLogHook: TypeAlias = Callable[
    [PtcDispatchLog], "Sequence[ContentBlock] | Awaitable[Sequence[ContentBlock] | None] | None"
]


def call_event(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "type": "tool/call",
        "id": call_id,
        "name": name,
        "arguments": arguments,
        "time": time.time(),
    }


def result_event(call_id: str, name: str, result: ToolResult) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "tool/result",
        "id": call_id,
        "name": name,
        "is_error": result.is_error,
        "content": result.content,
        "time": time.time(),
    }
    if result.error is not None:
        event["error"] = result.error.to_json()
    return event


def progress_event(
    execution: ToolExecution, progress: float, total: float | None, message: str | None
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "tool/progress",
        "id": execution.call_id,
        "name": execution.name,
        "progress": progress,
        "time": time.time(),
    }
    if execution.parent is not None:
        event["parent_id"] = execution.root_call_id
    if total is not None:
        event["total"] = total
    if message is not None:
        event["message"] = message
    return event


def log_event(call_id: str, text: str, max_chars: int) -> dict[str, Any]:
    """A ``tool/ptc-log`` event: one printed line, at most ``max_chars`` characters of it."""
    event: dict[str, Any] = {"type": "tool/ptc-log", "id": call_id, "text": text}
    if len(text) > max_chars:
        event["text"] = text[: max_chars - 1] + "…"
        event["truncated"] = True
    event["time"] = time.time()
    return event


def log_dropped_event(call_id: str, dropped: int) -> dict[str, Any]:
    """The ``tool/ptc-log`` event that says how many lines were not shown live."""
    lines = "1 line" if dropped == 1 else f"{dropped} lines"
    return {
        "type": "tool/ptc-log",
        "id": call_id,
        "dropped": dropped,
        "text": f"{lines} of output not shown live (over the rate limit)",
        "time": time.time(),
    }


def dispatch_start_event(sub_id: str, parent_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "type": "tool/ptc-dispatch-start",
        "id": sub_id,
        "parent_id": parent_id,
        "name": name,
        "arguments": arguments,
        "time": time.time(),
    }


def dispatch_event(
    sub_id: str,
    parent_id: str,
    name: str,
    result: ToolResult,
    content: list[ContentBlock],
    started: float,
    *,
    abandoned: bool = False,
) -> dict[str, Any]:
    now = time.time()
    event: dict[str, Any] = {
        "type": "tool/ptc-dispatch",
        "id": sub_id,
        "parent_id": parent_id,
        "name": name,
        "is_error": result.is_error,
        "content": content,
        "time": now,
        "started": started,
        "duration": max(now - started, 0.0),
    }
    if result.error is not None:
        event["error"] = result.error.to_json()
    if abandoned:
        event["abandoned"] = True
    return event
