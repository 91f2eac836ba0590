"""Formats and constraints that typed tools produce, in the SDK's comments.

A ``datetime`` is a ``str`` in the SDK: its comment is where a program learns
which string. These are the places a format hides: an optional value's
``anyOf``, a list's items, and a tool's whole result.
"""

from __future__ import annotations

from typing import Any

from sdkgen import render_sdk

DATE_TIME = {"type": "string", "format": "date-time"}
NULL = {"type": "null"}


def _lines(output: Any = None, **properties: Any) -> list[str]:
    tool: dict[str, Any] = {
        "name": "t",
        "description": "",
        "parameters": {"type": "object", "properties": properties, "required": sorted(properties)},
    }
    if output is not None:
        tool["output"] = output
    return render_sdk([tool], instructions=False).splitlines()


def test_an_optional_values_format_is_shown() -> None:
    lines = _lines(
        at={"anyOf": [DATE_TIME, NULL], "default": None, "description": "When."},
        day={"oneOf": [NULL, {"type": "string", "format": "date", "pattern": "^\\d"}]},
    )
    assert '    at: str | None  # When. (default null, format "date-time")' in lines
    assert '    day: str | None  # (pattern "^\\\\d", format "date")' in lines


def test_a_union_of_several_values_shows_no_one_format() -> None:
    lines = _lines(
        at={"anyOf": [DATE_TIME, {"type": "string", "format": "date"}]},
        when={"anyOf": [DATE_TIME, {"type": "integer"}, NULL]},
    )
    assert "    at: str" in lines
    assert "    when: str | int | None" in lines


def test_a_lists_item_format_is_shown() -> None:
    lines = _lines(
        days={"type": "array", "items": {"type": "string", "format": "date"}, "maxItems": 7},
        stamps={"type": "array", "items": {"anyOf": [DATE_TIME, NULL]}},
    )
    assert '    days: list[str]  # (maxItems 7, items format "date")' in lines
    assert '    stamps: list[str | None]  # (items format "date-time")' in lines


def test_a_scalar_results_format_is_shown_above_its_alias() -> None:
    text = "\n".join(_lines(output={**DATE_TIME, "description": "The next slot."}))
    assert '# The next slot.\n# (format "date-time")\nTResult: TypeAlias = str\n' in text
    listed = "\n".join(
        _lines(output={"type": "array", "items": {"type": "string", "format": "uuid"}})
    )
    assert '# (items format "uuid")\nTResult: TypeAlias = list[str]\n' in listed


def test_an_object_result_keeps_its_typeddict_and_plain_results_get_no_comment() -> None:
    text = "\n".join(_lines(output={"type": "string"}))
    assert "\nTResult: TypeAlias = str\n" in text
    assert "# (" not in text
    record = "\n".join(
        _lines(
            output={
                "type": "object",
                "properties": {"at": DATE_TIME},
                "required": ["at"],
            }
        )
    )
    assert 'class TResult(TypedDict):\n    at: str  # (format "date-time")\n' in record
