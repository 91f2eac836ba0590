"""The output budget's rule, on its own: cutting text and ``{logs, result}`` values."""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

import jsonschema
import orjson
import pytest

from ptc._budget import (
    DEFAULT_OUTPUT_BUDGET,
    apply_output_budget,
    check_output_budget,
    cut_marker,
    cut_text,
    parse_output_budget,
)
from ptc._executor import RUN_RESULT_SCHEMA
from registry import ErrorInfo, FailureDetail, ToolFailure, ToolSuccess, text_block

MARKER = re.compile(
    r"^\[… (?P<cut>[\d,]+) of (?P<total>[\d,]+) characters cut \(budget (?P<budget>[\d,]+)\)\. "
    r"Print less: filter or summarise inside the program and return only what you need\.(?P<note> .*)?\]$"
)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def split_cut(text: str) -> tuple[str, re.Match[str], str]:
    """(head, marker match, tail) of a cut text; exactly one marker line."""
    lines = text.split("\n")
    found = [i for i, line in enumerate(lines) if MARKER.match(line)]
    assert len(found) == 1, text[:500]
    i = found[0]
    match = MARKER.match(lines[i])
    assert match is not None
    return "\n".join(lines[:i]), match, "\n".join(lines[i + 1 :])


def numbered_lines(count: int, width: int = 40) -> str:
    return "\n".join(f"{i:06d} " + "y" * (width - 7) for i in range(count))


# ----------------------------------------------------------------------------- text


def test_text_within_the_budget_is_returned_as_it_is() -> None:
    text = "a\nb" * 100
    assert cut_text(text, len(text)) == (text, None)
    assert cut_text(text, math.inf) == (text, None)


def test_a_long_text_keeps_whole_lines_of_its_head_and_tail_around_one_marker() -> None:
    text = numbered_lines(10_000)
    out, truncation = cut_text(text, 3_000)
    assert truncation is not None and len(out) <= 3_000
    head, marker, tail = split_cut(out)
    # Whole lines from the start and from the end.
    assert text.startswith(head + "\n") and text.endswith("\n" + tail)
    assert all(len(line) == 40 for line in head.split("\n") + tail.split("\n"))
    # About 2/3 head, 1/3 tail (within a line of each).
    room = len(head) + len(tail)
    assert abs(len(head) - 2 * room / 3) <= 41 and abs(len(tail) - room / 3) <= 41
    # The marker counts what the head and tail leave out.
    total, cut = number(marker["total"]), number(marker["cut"])
    assert total == len(text) and cut == len(text) - len(head) - len(tail)
    assert number(marker["budget"]) == 3_000
    assert (truncation.chars, truncation.cut, truncation.budget) == (total, cut, 3_000)


def test_a_text_without_newlines_is_cut_inside_its_one_line() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100_000))
    out, truncation = cut_text(text, 1_000)
    assert truncation is not None and len(out) <= 1_000
    head, marker, tail = split_cut(out)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) > 400 and len(tail) > 200  # the room is used, not given up to a line rule
    assert number(marker["cut"]) == len(text) - len(head) - len(tail)


def test_the_marker_fills_the_cut_exactly_to_the_budget_at_most() -> None:
    for budget in (300, 301, 999, 1_000, 30_000):
        for text in (numbered_lines(5_000, 13), "x" * 50_000):
            out, _ = cut_text(text, budget)
            assert len(out) <= budget


def test_a_budget_smaller_than_the_marker_gives_the_marker_alone() -> None:
    out, truncation = cut_text("x" * 5_000, 10)
    assert MARKER.match(out) and out == cut_marker(5_000, 5_000, 10)
    assert truncation is not None and truncation.cut == 5_000


def test_a_note_goes_into_the_marker() -> None:
    out, _ = cut_text("x" * 5_000, 1_000, "The full output is in /tmp/out.txt.")
    _, marker, _ = split_cut(out)
    assert marker["note"] == " The full output is in /tmp/out.txt."


def lone_surrogates(text: str) -> list[int]:
    """Where ``text`` has half a surrogate pair."""
    high = [i for i, c in enumerate(text) if "\ud800" <= c <= "\udbff"]
    low = [i for i, c in enumerate(text) if "\udc00" <= c <= "\udfff"]
    return sorted(set(high) ^ {i - 1 for i in low})


GRAPHEMES = {
    "combining accent": "e\u0301",
    "family (ZWJ sequence)": "\U0001f469\u200d\U0001f469\u200d\U0001f467",
    "flag (regional indicators)": "\U0001f1eb\U0001f1f7",
    "skin tone": "\U0001f44d\U0001f3fd",
    "keycap": "1\ufe0f\u20e3",
    "surrogate pair as code points": "\ud83d\ude00",
    "CRLF": "\r\n",
    "four-byte character": "\U0001f600",
}


@pytest.mark.parametrize("unit", GRAPHEMES.values(), ids=GRAPHEMES.keys())
@pytest.mark.parametrize("budget", [500, 501, 502, 503, 1_000])
def test_cuts_never_split_a_character_or_a_grapheme(unit: str, budget: int) -> None:
    text = unit * 5_000
    out, truncation = cut_text(text, budget)
    assert truncation is not None and len(out) <= budget
    head, _, tail = split_cut(out)
    # Head and tail are whole units: nothing of a unit is left half shown.
    assert head == unit * (len(head) // len(unit))
    assert tail == unit * (len(tail) // len(unit))
    assert head and tail
    assert not lone_surrogates(out)
    if unit != "\ud83d\ude00":
        out.encode("utf-8")  # valid text


def test_cut_text_is_unicode_clean_on_mixed_text() -> None:
    text = "".join(
        [
            "naïve café ",
            "e\u0301",
            "\U0001f469\u200d\U0001f4bb",
            " 中文 ",
            "\U0001f1ef\U0001f1f5",
            "\n",
        ]
        * 3_000
    )
    for budget in range(400, 460):
        out, _ = cut_text(text, budget)
        out.encode("utf-8")
        head, _, tail = split_cut(out)
        assert unicodedata.category(tail[0])[0] != "M"  # the tail starts on a base character
        assert not head.endswith("\u200d") and not tail.startswith("\u200d")


# ----------------------------------------------------------------------------- values


def success(value: dict[str, Any]) -> ToolSuccess:
    return ToolSuccess(value=value, content=[text_block("(content)")])


def cut_value(value: dict[str, Any], budget: int, note: str | None = None) -> dict[str, Any]:
    result, _ = apply_output_budget(success(value), budget, note)
    assert isinstance(result, ToolSuccess)
    jsonschema.validate(result.value, RUN_RESULT_SCHEMA)
    return result.value  # type: ignore[no-any-return]


def size(value: dict[str, Any]) -> int:
    logs = len("\n".join(value["logs"]))
    if "result" not in value:
        return logs
    result = value["result"]
    return logs + len(result if isinstance(result, str) else orjson.dumps(result).decode())


def test_a_value_within_the_budget_is_unchanged_byte_for_byte() -> None:
    value = {"logs": ['é\U0001f600"\\', "x" * 100], "result": {"k": ["\x02", 1.5, None]}}
    before = orjson.dumps(value)
    budget = size(value)
    assert cut_value(value, budget) is value
    assert orjson.dumps(value) == before
    assert "truncated" in cut_value(value, budget - 1)


def test_large_logs_and_a_small_result_keep_the_result_whole() -> None:
    lines = [f"line {i}" for i in range(20_000)]
    value = cut_value({"logs": lines, "result": {"answer": 42}}, 2_000)
    assert value["result"] == {"answer": 42}
    head, marker, tail = split_cut("\n".join(value["logs"]))
    assert lines[: len(head.split("\n"))] == head.split("\n")
    assert lines[-len(tail.split("\n")) :] == tail.split("\n")
    assert len("\n".join(value["logs"])) <= 2_000 - len('{"answer":42}')
    total = len("\n".join(lines)) + len('{"answer":42}')
    assert value["truncated"] == {"chars": total, "cut": number(marker["cut"]), "budget": 2_000}
    assert size(value) <= 2_000


def test_a_large_json_result_becomes_its_json_text_cut_and_small_logs_stay() -> None:
    result = [{"id": i, "name": f"item {i}"} for i in range(5_000)]
    value = cut_value({"logs": ["counted"], "result": result}, 3_000)
    assert value["logs"] == ["counted"]
    text = orjson.dumps(result).decode()
    head, _, tail = split_cut(value["result"])
    assert text.startswith(head) and text.endswith(tail)
    assert value["truncated"]["result"] == "json"
    assert value["truncated"]["chars"] == len("counted") + len(text)
    assert size(value) <= 3_000


def test_a_large_string_result_is_cut_as_a_string() -> None:
    value = cut_value({"logs": [], "result": "word " * 10_000}, 1_000)
    head, _, tail = split_cut(value["result"])
    assert value["truncated"]["result"] == "string"
    assert ("word " * 10_000).startswith(head) and ("word " * 10_000).endswith(tail)
    assert value["logs"] == []


def test_when_both_parts_are_large_each_gets_half() -> None:
    original = {"logs": ["x" * 50] * 1_000, "result": "r" * 50_000}
    value = cut_value(original, 4_000, "see /tmp/o")
    logs = "\n".join(value["logs"])
    assert len(logs) <= 2_000 and len(value["result"]) <= 2_000
    assert value["truncated"]["note"] == "see /tmp/o"
    # What is cut is everything the two heads and tails leave out.
    kept = sum(len(head) + len(tail) for head, _, tail in map(split_cut, [logs, value["result"]]))
    assert value["truncated"]["cut"] == size(original) - kept


def test_a_failure_has_its_content_and_message_cut() -> None:
    message = "code run failed (exception): boom\nCaptured output:\n" + numbered_lines(5_000)
    failure = ToolFailure(
        error=FailureDetail(message=message, info=ErrorInfo(name="E", code="CODE_RUN_FAILED")),
        content=[text_block("Error: " + message)],
    )
    result, truncation = apply_output_budget(failure, 1_000)
    assert isinstance(result, ToolFailure) and truncation is not None
    assert result.error.info == failure.error.info
    for text in (result.error.message, result.content[0]["text"]):
        assert len(text) <= 1_000
        head, _, tail = split_cut(text)
        assert "code run failed (exception): boom" in head
        assert tail.endswith(numbered_lines(5_000)[-40:])


# ----------------------------------------------------------------------------- settings


def test_the_default_budget_is_30000_characters() -> None:
    assert DEFAULT_OUTPUT_BUDGET == 30_000


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "100", None, math.nan, -math.inf])
def test_a_budget_is_a_positive_int_or_infinity(bad: object) -> None:
    with pytest.raises(ValueError, match=r"math\.inf for no budget"):
        check_output_budget(bad)


def test_check_output_budget_accepts_ints_and_infinity() -> None:
    assert check_output_budget(1) == 1
    assert check_output_budget(math.inf) == math.inf


@pytest.mark.parametrize(
    ("text", "budget"), [("500", 500), ("30_000", 30_000), ("off", math.inf), ("OFF", math.inf)]
)
def test_the_command_lines_budget(text: str, budget: float) -> None:
    assert parse_output_budget(text) == budget


@pytest.mark.parametrize("text", ["0", "-5", "1.5", "lots", ""])
def test_a_bad_command_line_budget_says_what_it_takes(text: str) -> None:
    with pytest.raises(ValueError, match="positive number of characters or 'off'"):
        parse_output_budget(text)
