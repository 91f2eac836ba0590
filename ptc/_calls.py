"""Model calls as the executor takes them: ids, and what makes a call malformed.

A batch is what a model emitted, so anything in it may be wrong. Each item is
checked on its own: an item that is not a call (not a :class:`ModelCall` or a
mapping), a call without a non-empty string id or name, a call whose arguments
are text that is not JSON (the model's JSON string cut short, say), and a call
whose id an earlier call of the batch already has all become error results of their own
(``MALFORMED_CALL``, ``DUPLICATE_CALL_ID``), in their place in the batch; the
rest of the batch runs. The first call with an id runs; a later one with the
same id does not (which of them the model meant is anyone's guess, and running
both would make their events impossible to tell apart).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from registry import ErrorInfo, ToolFailure

from ._exceptions import DUPLICATE_CALL_ID, MALFORMED_CALL

__all__ = ["ModelCall", "PlannedCall", "new_call_id", "plan_batch"]

# How much of a malformed item's text its events keep.
_SHOWN_CHARS = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One tool call as the model emitted it; ``arguments`` may be a JSON string."""

    call_id: str
    name: str
    arguments: Any = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedCall:
    """One item of a batch, checked.

    ``call.call_id`` is the model's id (generated when it had none): the batch
    result carries it. ``event_id`` is the id of the call's events, unique in
    the batch. A call with a ``failure`` is not run: that is its result.
    """

    call: ModelCall
    event_id: str
    failure: ToolFailure | None = None


def new_call_id(prefix: str) -> str:
    """A fresh call id, ``<prefix>-<12 hex digits>``: unique across runs and processes."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def plan_batch(batch: Any) -> list[PlannedCall]:
    """Check every item of ``batch`` (see the module docstring)."""
    planned: list[PlannedCall] = []
    seen: set[str] = set()
    for item in batch:
        call, problem = _parse(item)
        event_id = call.call_id
        failure: ToolFailure | None = None
        if problem is not None:
            failure = ToolFailure.of(
                f"malformed tool call: {problem}; it was not run",
                ErrorInfo(name="MalformedCallError", code=MALFORMED_CALL),
            )
        if call.call_id in seen:
            event_id = new_call_id(f"{call.call_id}:dup")
            if failure is None:
                failure = ToolFailure.of(
                    f"duplicate call id {call.call_id!r}: an earlier call of this batch has "
                    "it, so this call was not run; give every call its own id",
                    ErrorInfo(name="DuplicateCallIdError", code=DUPLICATE_CALL_ID),
                )
        seen.add(call.call_id)
        planned.append(PlannedCall(call=call, event_id=event_id, failure=failure))
    return planned


def _parse(item: Any) -> tuple[ModelCall, str | None]:
    """The call ``item`` makes, and what is wrong with it (``None``: nothing)."""
    if isinstance(item, ModelCall):
        call_id: Any = item.call_id
        name: Any = item.name
        arguments: Any = item.arguments
    elif isinstance(item, Mapping):
        try:
            call_id = item.get("id", item.get("call_id"))
            name = item.get("name")
            arguments = item.get("arguments", item.get("input", {}))
        except Exception as exc:  # a mapping of the caller's own making
            return _unrunnable(None, "", item), f"reading it failed ({type(exc).__name__})"
    else:
        not_a_call = (
            "a call is an object with an id, a name and arguments, "
            f"not {type(item).__name__} {_shown(item)}"
        )
        return _unrunnable(None, "", item), not_a_call
    problem: str | None = None
    if isinstance(arguments, str | bytes):
        # Text is the model's JSON encoding of the arguments (OpenAI's `arguments`).
        try:
            arguments = orjson.loads(arguments) if arguments else {}
        except orjson.JSONDecodeError as exc:
            problem = f"its arguments are not valid JSON ({exc})"
    if not isinstance(call_id, str) or not call_id:
        problem = _missing("id", call_id)
    elif not isinstance(name, str) or not name:
        problem = _missing("name", name)
    if problem is None:
        return ModelCall(call_id=call_id, name=name, arguments=arguments), None
    return _unrunnable(call_id, name, arguments), problem


def _unrunnable(call_id: Any, name: Any, arguments: Any) -> ModelCall:
    """A malformed call as its events and result show it: string id and name, JSON arguments."""
    if not isinstance(call_id, str) or not call_id:
        call_id = new_call_id("call")
    if not isinstance(name, str):
        name = _shown(name)
    try:
        orjson.dumps(arguments)
    except (TypeError, orjson.JSONEncodeError):
        arguments = _shown(arguments)
    return ModelCall(call_id=call_id, name=name, arguments=arguments)


def _missing(what: str, value: Any) -> str:
    if value is None:
        return f"it has no {what}"
    if isinstance(value, str):
        return f"its {what} is empty"
    return f"its {what} is {type(value).__name__} {_shown(value)}, not a string"


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
