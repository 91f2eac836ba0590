"""The output budget: how much of a ``run_code`` result reaches the model.

The runtime's output limit (``Limits.max_output_bytes``, 64 MiB) protects the
host; the budget protects the model's context. It counts characters (code
points) of text, and applies to a ``run_code`` result after the pipeline:

- **Content** (what the model reads): the text blocks, joined by newlines, are
  cut to the budget when longer, keeping the head (2/3 of the room the marker
  leaves) and the tail (1/3), with one marker line between them
  (:func:`cut_marker`). The head ends at the last line break within its room
  when that break is in the room's second half (the tail starts after the
  first break in its room's first half); otherwise the cut falls inside the
  line. The cut text, marker included, is at most the budget (only a budget
  shorter than the marker gives the marker alone). ``cut`` counts the
  characters of the text that neither the head nor the tail shows. A
  failure's message is cut the same way, on its own.
- **Media** (image and audio blocks after the text, see ``ptc._media``):
  each counts :data:`~ptc._media.MEDIA_BUDGET_CHARS` (6,000) characters,
  whatever its size. Over the budget, the text keeps its length or half the
  budget, whichever is less; the media get what is left, in order, and the
  text then gets the rest. A block that does not fit is dropped, and a line
  after the text says how many and which (its placeholder in the text still
  names it). ``cut`` counts a dropped block as its 6,000 characters.
- **Value** (``{logs, result}``, an MCP server's ``structuredContent``): the
  logs count as their lines joined by newlines, the result as its own length
  when it is a string, else as its compact JSON text (where each image or
  audio block the content shows is its placeholder plus its 6,000 characters;
  cut, the result is that text, without the blocks). Within the budget
  together, the value is unchanged. Otherwise they share it: a part that fits
  in half the budget is kept whole and the other part gets the rest (each gets
  half when both are larger). Logs over their share are cut like content (the
  marker is a line of its own); a result over its share becomes its text (its
  JSON text when it is not a string) cut the same way. The value then has
  ``truncated``: ``{"chars", "cut", "budget"}``, plus ``"result": "string" |
  "json"`` when the result was cut and ``"note"`` when the spill hook gave one.

Cuts fall between characters, never between the halves of a surrogate pair,
and (within a few characters) not inside a combining sequence, an emoji ZWJ
sequence, a flag or a CRLF. :data:`math.inf` disables the budget.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson

from registry import ContentBlock, FailureDetail, ToolFailure, ToolResult, ToolSuccess, text_block

from ._media import MEDIA_BUDGET_CHARS, MEDIA_TYPES, find_media, with_placeholders

__all__ = [
    "DEFAULT_OUTPUT_BUDGET",
    "OutputSpill",
    "SpillHook",
    "Truncation",
    "apply_output_budget",
    "check_output_budget",
    "content_size",
    "content_text",
    "cut_marker",
    "cut_text",
    "over_budget",
    "parse_output_budget",
]

#: Characters of a ``run_code`` result the model gets by default (about 7,500
#: tokens): what Claude Code's Bash tool keeps of a command's output.
DEFAULT_OUTPUT_BUDGET = 30_000
#: The longest note a spill hook may add to the marker (a longer one is cut).
MAX_NOTE_CHARS = 500
#: How far a cut moves to keep a grapheme whole before it settles for a code point.
_MAX_NUDGE = 32

#: A budget: a positive number of characters, or ``math.inf`` for none.
OutputBudget: TypeAlias = int | float


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncation:
    """How much of one text (or value) was cut: ``chars`` in all, ``cut`` of them.

    ``media_dropped``: how many image or audio blocks were dropped (each
    counted in ``chars`` and ``cut`` as its share of the budget).
    """

    chars: int
    cut: int
    budget: int
    media_dropped: int = 0

    def to_json(self) -> dict[str, int]:
        out = {"chars": self.chars, "cut": self.cut, "budget": self.budget}
        if self.media_dropped:
            out["media_dropped"] = self.media_dropped
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSpill:
    """A ``run_code`` result whose model-facing output was cut, whole, for the host.

    Attributes:
        call_id: the outer call's id (its events' ``id``).
        scope: the scope it ran in.
        budget: the budget it was cut to.
        result: the result before the cut: ``content`` and ``value`` (a success)
            or ``error`` (a failure) in full.
    """

    call_id: str
    scope: str | None
    budget: int
    result: ToolResult

    @property
    def text(self) -> str:
        """The full model-facing text (the text blocks joined by newlines)."""
        return content_text(self.result.content)


#: ``(spill) -> note | None`` (sync or async). A note (e.g. where the host saved
#: the output) is added to the marker and to the value's ``truncated``; raising
#: is contained (logged).
SpillHook: TypeAlias = Callable[[OutputSpill], "str | Awaitable[str | None] | None"]


def check_output_budget(value: object, label: str = "output_budget") -> OutputBudget:
    """``value`` as a budget: a positive ``int`` or ``math.inf``.

    Raises:
        ValueError: anything else (``0`` included: ``math.inf`` disables the budget).
    """
    if value == math.inf and isinstance(value, float):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{label} must be a positive number of characters, or math.inf for no budget; "
            f"got {value!r}"
        )
    return value


def parse_output_budget(text: str) -> OutputBudget:
    """A command line's ``--output-budget``: ``N`` characters, or ``off``.

    Raises:
        ValueError: anything else, in one line for the user.
    """
    word = text.strip().lower().replace("_", "").replace(",", "")
    if word in ("off", "none", "inf"):
        return math.inf
    if word.isdigit() and int(word) >= 1:
        return int(word)
    raise ValueError(
        f"--output-budget must be a positive number of characters or 'off', got {text!r}"
    )


def cut_marker(cut: int, total: int, budget: int, note: str | None = None) -> str:
    """The line that stands for what was cut, and says how to get less."""
    text = (
        f"[… {cut:,} of {total:,} characters cut (budget {budget:,}). Print less: filter or "
        "summarise inside the program and return only what you need."
    )
    if note:
        text += " " + note
    return text + "]"


def content_text(content: list[ContentBlock]) -> str:
    """The text blocks of ``content``, joined by newlines."""
    return "\n".join(
        block["text"] for block in content if block.get("type") == "text" and "text" in block
    )


def content_size(content: list[ContentBlock]) -> int:
    """What ``content`` counts against the budget: its text, plus each image or audio block."""
    media = sum(1 for block in content if block.get("type") in MEDIA_TYPES)
    return len(content_text(content)) + media * MEDIA_BUDGET_CHARS


def cut_text(
    text: str, budget: OutputBudget, note: str | None = None, *, shown_budget: int | None = None
) -> tuple[str, Truncation | None]:
    """``text`` within ``budget`` characters: head, a marker line, tail (see the module).

    ``shown_budget`` is the budget the marker names (the whole call's, when
    ``budget`` is one part's share of it).
    """
    total = len(text)
    if total <= budget:
        return text, None
    limit = int(budget)
    named = limit if shown_budget is None else shown_budget
    # The marker's longest form (every character cut) fixes the room left.
    room = limit - len(cut_marker(total, total, named, note)) - 2
    if room <= 0:
        return cut_marker(total, total, named, note), Truncation(
            chars=total, cut=total, budget=named
        )
    head_room = room * 2 // 3
    tail_room = room - head_room
    end = text.rfind("\n", 0, head_room + 1)
    if end < head_room / 2:
        end = _nudge(text, head_room, -1)
    elif end > 0 and text[end - 1] == "\r":
        end -= 1  # the line ends with CRLF
    tail_start = total - tail_room
    newline = text.find("\n", tail_start - 1)
    if newline != -1 and total - newline - 1 >= tail_room / 2:
        tail_start = newline + 1
    else:
        tail_start = _nudge(text, tail_start, +1)
    cut = tail_start - end
    parts = [text[:end]] if end > 0 else []
    parts.append(cut_marker(cut, total, named, note))
    if tail_start < total:
        parts.append(text[tail_start:])
    return "\n".join(parts), Truncation(chars=total, cut=cut, budget=named)


def _nudge(text: str, index: int, step: int) -> int:
    """``index`` moved by ``step`` until a cut there splits no character or grapheme."""
    for _ in range(_MAX_NUDGE):
        if not _joined(text, index):
            return index
        index += step
    while _split_pair(text, index):  # past the nudge, at least whole code points
        index += step
    return index


def _split_pair(text: str, index: int) -> bool:
    return (
        0 < index < len(text)
        and "\ud800" <= text[index - 1] <= "\udbff"
        and "\udc00" <= text[index] <= "\udfff"
    )


def _joined(text: str, index: int) -> bool:
    """Whether ``text[index - 1]`` and ``text[index]`` belong to one grapheme."""
    if not 0 < index < len(text):
        return False
    before, after = text[index - 1], text[index]
    if _split_pair(text, index) or (before == "\r" and after == "\n"):
        return True
    if before == "\u200d" or after == "\u200d":  # zero-width joiner
        return True
    if unicodedata.category(after) in ("Mn", "Mc", "Me"):  # combining marks, selectors
        return True
    if "\U0001f3fb" <= after <= "\U0001f3ff" or "\U000e0020" <= after <= "\U000e007f":
        return True  # emoji skin tones, emoji tag sequences
    regional = "\U0001f1e6", "\U0001f1ff"
    if regional[0] <= before <= regional[1] and regional[0] <= after <= regional[1]:
        # A flag is a pair: split between pairs, never inside one.
        run = 0
        while index - run - 1 >= 0 and regional[0] <= text[index - run - 1] <= regional[1]:
            run += 1
        return run % 2 == 1
    return False


def over_budget(result: ToolResult, budget: OutputBudget) -> bool:
    """Whether any model-facing part of ``result`` is longer than ``budget`` allows."""
    if budget == math.inf:
        return False
    if content_size(result.content) > budget:
        return True
    if isinstance(result, ToolFailure):
        return len(result.error.message) > budget
    value = result.value
    if not isinstance(value, dict):
        return False
    logs, result_text, media_chars = _value_parts(value)
    return len(logs) + (0 if result_text is None else len(result_text) + media_chars) > budget


def apply_output_budget(
    result: ToolResult, budget: OutputBudget, note: str | None = None
) -> tuple[ToolResult, Truncation | None]:
    """``result`` with its content, value or error message cut to ``budget``.

    Returns the result and how much of its content was cut (``None``: nothing).
    A part within the budget is the same object, unchanged.
    """
    if budget == math.inf:
        return result, None
    limit = int(budget)
    if note is not None:
        note = " ".join(note.split())[:MAX_NOTE_CHARS] or None
    content, truncation = _cut_content(result.content, limit, note)
    if isinstance(result, ToolFailure):
        message, cut = cut_text(result.error.message, limit, note)
        error = result.error
        if cut is not None:
            error = FailureDetail(message=message, info=error.info)
        budgeted: ToolResult = ToolFailure(
            error=error,
            content=content,
            meta=result.meta,
            additional_contexts=result.additional_contexts,
        )
    else:
        value = result.value
        if isinstance(value, dict):
            value = _cut_value(value, limit, note)
        budgeted = ToolSuccess(
            value=value,
            content=content,
            meta=result.meta,
            additional_contexts=result.additional_contexts,
        )
    return budgeted, truncation


def _cut_content(
    content: list[ContentBlock], budget: int, note: str | None
) -> tuple[list[ContentBlock], Truncation | None]:
    text = content_text(content)
    media = [block for block in content if block.get("type") in MEDIA_TYPES]
    if not media:
        cut, truncation = cut_text(text, budget, note)
        if truncation is None:
            return content, None
        others = [block for block in content if block.get("type") != "text"]
        return [text_block(cut), *others], truncation
    media_chars = len(media) * MEDIA_BUDGET_CHARS
    if len(text) + media_chars <= budget:
        return content, None
    room = budget - min(len(text), budget // 2)  # what the media may take
    kept, dropped_line = len(media), ""
    if media_chars > room:
        longest = len(_dropped_line(media, len(media), budget)) + 1
        kept = max(0, (room - longest) // MEDIA_BUDGET_CHARS)
        dropped_line = _dropped_line(media, kept, budget)
    text_share = budget - kept * MEDIA_BUDGET_CHARS - (len(dropped_line) + 1 if dropped_line else 0)
    cut, text_cut = cut_text(text, max(text_share, 1), note, shown_budget=budget)
    if dropped_line:
        cut = f"{cut}\n{dropped_line}" if cut else dropped_line
    dropped = len(media) - kept
    truncation = Truncation(
        chars=len(text) + media_chars,
        cut=(0 if text_cut is None else text_cut.cut) + dropped * MEDIA_BUDGET_CHARS,
        budget=budget,
        media_dropped=dropped,
    )
    shown = media[:kept]
    others = [
        block
        for block in content
        if block.get("type") != "text" and block.get("type") not in MEDIA_TYPES
    ]
    return [text_block(cut), *shown, *others], truncation


def _dropped_line(media: list[ContentBlock], kept: int, budget: int) -> str:
    """The line after the text that says which media blocks the budget dropped."""
    dropped = media[kept:]
    kinds = {block.get("type") for block in dropped}
    what = "images" if kinds == {"image"} else "audio clips" if kinds == {"audio"} else "media"
    numbers = f"number {kept + 1}" if len(dropped) == 1 else f"numbers {kept + 1}-{len(media)}"
    return (
        f"[… {len(dropped)} of {len(media)} {what} not shown ({numbers}): each counts "
        f"{MEDIA_BUDGET_CHARS:,} characters of the output budget ({budget:,}). Return fewer.]"
    )


def _value_parts(value: dict[str, Any]) -> tuple[str, str | None, int]:
    """The logs' text, the result's (``None``: no result) and its media's count, as counted.

    A result with media blocks the content shows is its text with their
    placeholders, and they add ``MEDIA_BUDGET_CHARS`` each.
    """
    logs = value.get("logs")
    logs_text = "\n".join(logs) if isinstance(logs, list) else ""
    if "result" not in value:
        return logs_text, None, 0
    shown = value["result"]
    if isinstance(shown, str):
        return logs_text, shown, 0
    media = [m for m in find_media(shown) if m.block is not None]
    if media:
        shown = with_placeholders(shown, media, refused=False)
    return logs_text, orjson.dumps(shown).decode(), len(media) * MEDIA_BUDGET_CHARS


def _cut_value(value: dict[str, Any], budget: int, note: str | None) -> dict[str, Any]:
    logs_text, result_text, media_chars = _value_parts(value)
    logs_chars = len(logs_text)
    result_chars = 0 if result_text is None else len(result_text) + media_chars
    if logs_chars + result_chars <= budget:
        return value
    if result_chars <= budget / 2:
        logs_share, result_share = budget - result_chars, result_chars
    elif logs_chars <= budget / 2:
        logs_share, result_share = logs_chars, budget - logs_chars
    else:
        logs_share = budget // 2
        result_share = budget - logs_share
    cut_value = dict(value)
    cut_value.pop("truncated", None)
    truncated: dict[str, Any] = {"chars": logs_chars + result_chars, "cut": 0, "budget": budget}
    logs, logs_cut = cut_text(logs_text, logs_share, note, shown_budget=budget)
    if logs_cut is not None:
        cut_value["logs"] = logs.split("\n")
        truncated["cut"] += logs_cut.cut
    if result_text is not None and result_chars > result_share:
        # Cut, the result is its text: its media blocks are their placeholders only.
        shown, result_cut = cut_text(result_text, result_share, note, shown_budget=budget)
        truncated["result"] = "string" if isinstance(value["result"], str) else "json"
        cut_value["result"] = shown
        truncated["cut"] += (0 if result_cut is None else result_cut.cut) + media_chars
    if note:
        truncated["note"] = note
    cut_value["truncated"] = truncated
    return cut_value
