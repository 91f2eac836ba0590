"""Safe text for generated source: comments, docstrings, string literals.

Descriptions and names come from tool authors (and, through MCP, from remote
servers), so none of them may ever break out of the comment, docstring or string
literal they are placed in, or make the generated text fail to compile.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "DESCRIPTION_LIMIT",
    "comment_text",
    "compact_json",
    "docstring",
    "first_paragraph",
    "first_sentence",
    "fit",
    "py_str",
    "summary",
]

#: Longest description (in characters) kept in a comment or docstring.
DESCRIPTION_LIMIT = 300

# Control characters (NUL makes compile() fail, CR ends a line) and lone
# surrogates (the text could not be encoded as UTF-8) never reach the output.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _clean_line(line: str) -> str:
    """One line, whitespace collapsed, unsafe characters dropped."""
    line = " ".join(line.split())
    if not line.isprintable():
        line = " ".join(_UNSAFE.sub(" ", line).split())
    return line


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    if cut < limit // 2:
        cut = limit
    return text[:cut].rstrip() + "…"


def first_paragraph(text: object, limit: int = DESCRIPTION_LIMIT) -> list[str]:
    """The first paragraph of a description as clean lines, at most ``limit`` chars.

    Non-string input yields no lines.
    """
    if not isinstance(text, str) or not text:
        return []
    if len(text) <= limit and text.isprintable():  # one clean line already
        text = text.strip()
        return [text] if text else []
    lines: list[str] = []
    size = 0
    for raw in text.splitlines():
        line = _clean_line(raw)
        if not line:
            if lines:
                break  # a blank line ends the first paragraph
            continue
        if size + len(line) > limit:
            lines.append(_truncate(line, max(limit - size, 1)))
            break
        lines.append(line)
        size += len(line) + 1
    return lines


# a sentence ends at . ! or ? before a space, unless it ends an abbreviation
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_ABBREVIATIONS = ("e.g", "i.e", "etc", " vs", "(vs")


def first_sentence(text: object) -> str:
    """The first sentence of a description as one clean line (whitespace collapsed)."""
    line = " ".join(first_paragraph(text, 1000))
    for end in _SENTENCE_END.finditer(line):
        if line[max(end.start() - 3, 0) : end.start()] not in _ABBREVIATIONS:
            return line[: end.end()]
    return line


def fit(line: str, limit: int) -> str:
    """``line`` in at most ``limit`` chars: cut after its last clause that fits, else a word."""
    if len(line) <= limit:
        return line
    cut = max(line.rfind(mark, 0, limit) for mark in (", ", "; ", ": ", " (", " — "))
    if cut >= limit * 2 // 3:
        return line[:cut].rstrip(" ,;:—") + "…"
    return _truncate(line, limit)


def summary(text: object, limit: int = 100) -> str:
    """The first sentence of a description: one clean line, at most ``limit`` chars."""
    return fit(first_sentence(text), limit)


def comment_text(text: object, limit: int = DESCRIPTION_LIMIT) -> str:
    """A description folded into one line, safe after ``#``."""
    return " ".join(first_paragraph(text, limit))


def docstring(lines: list[str], indent: str) -> str:
    """A triple-quoted docstring for ``lines`` (already clean), indented.

    Backslashes are doubled and any quote that could close the literal early is
    escaped, so the docstring holds exactly the text and nothing can follow it.
    """
    escaped = [_escape_doc(line) for line in lines]
    if len(escaped) > 1:
        body = ("\n" + indent).join(escaped) + "\n" + indent
    else:
        body = escaped[0] if escaped else ""
        if body.endswith('"'):
            body = body[:-1] + '\\"'
    return f'{indent}"""{body}"""\n'


def _escape_doc(line: str) -> str:
    if "\\" in line:
        line = line.replace("\\", "\\\\")
    if '""' in line:
        line = line.replace('"""', '""\\"')
    return line


def py_str(value: str) -> str:
    """A Python string literal for ``value``, double-quoted when possible."""
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    text = repr(value)
    if text[0] == "'" and '"' not in value:
        return f'"{text[1:-1]}"'
    return text


def compact_json(value: Any, limit: int = 200) -> str:
    """Compact JSON for a comment (ASCII, one line, capped); never raises."""
    if type(value) is int and -(10**15) < value < 10**15:  # the common case, fast
        return str(value)
    try:
        text = json.dumps(
            value, ensure_ascii=True, separators=(",", ":"), skipkeys=True, default=repr
        )
    except (ValueError, TypeError, RecursionError):
        text = "..."
    # default=repr can still produce odd characters; keep the comment one line.
    text = _clean_line(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
