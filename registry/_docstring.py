"""Parsing Google, reST and numpy docstrings into a description and per-parameter text."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

__all__ = ["Docstring", "parse_docstring"]


@dataclass(frozen=True, slots=True)
class Docstring:
    """The parts of a docstring a tool definition uses."""

    description: str
    params: dict[str, str]
    returns: str | None


_PARAM_SECTIONS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
    | {"other parameters", "attributes", "keys", "fields"}
)
_RETURN_SECTIONS = frozenset({"returns", "return", "yields", "yield"})
# Sections about the Python API (examples call the function, not the tool) are
# dropped; notes and warnings usually state behaviour the model needs, so they stay.
_SECTIONS = (
    _PARAM_SECTIONS
    | _RETURN_SECTIONS
    | {"raises", "raise", "warns", "example", "examples", "see also", "todo", "references"}
)
_KEPT_SECTIONS = frozenset({"note", "notes", "warning", "warnings"})
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_REST_FIELD = re.compile(r"^:(\w+)((?:\s+[^:]*?)?)\s*:(.*)$")


def parse_docstring(doc: str | None) -> Docstring:
    """Split a docstring into description, per-parameter texts and the returns text."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    description: list[str] = []
    sections: list[tuple[str, str, list[str]]] = []  # (style, title, body lines)
    body: list[str] | None = None
    numpy = False
    i = 0
    while i < len(lines):
        line = lines[i]
        following = lines[i + 1] if i + 1 < len(lines) else ""
        title = line.strip().lower()
        if (
            line[:1].strip()
            and title in _SECTIONS | _KEPT_SECTIONS
            and _NUMPY_RULE.match(following)
        ):
            if title in _KEPT_SECTIONS:
                body, numpy = None, False
                description += [line, following]
            else:
                body, numpy = [], True
                sections.append(("numpy", title, body))
            i += 2
            continue
        header = _GOOGLE_HEADER.match(line)
        if header and header.group(1).lower() in _SECTIONS:
            body, numpy = [], False
            sections.append(("google", header.group(1).lower(), body))
        elif _REST_FIELD.match(line):
            body, numpy = [line], False
            sections.append(("rest", "", body))
        elif body is not None and (numpy or not line.strip() or line[0].isspace()):
            body.append(line)
        else:
            # Google sections end where the indentation returns to the margin.
            body = None
            description.append(line)
        i += 1

    params: dict[str, str] = {}
    returns: str | None = None
    for style, title, section in sections:
        if style == "rest":
            field = _REST_FIELD.match(section[0])
            assert field is not None
            kind, arg, text = field.group(1), field.group(2).split(), field.group(3)
            text = _join([text, *section[1:]])
            if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and arg:
                params[arg[-1]] = text
            elif kind in ("returns", "return"):
                returns = text
        elif title in _RETURN_SECTIONS:
            # A numpy entry starts with its type line ("str"); the text follows.
            returns = _join(section[1:] if style == "numpy" else section) or None
        elif title in _PARAM_SECTIONS:
            params.update(_entries(section, numpy=style == "numpy"))
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(description)).strip()
    return Docstring(description=text, params=params, returns=returns)


def _entries(section: list[str], *, numpy: bool) -> dict[str, str]:
    indents = [len(line) - len(line.lstrip()) for line in section if line.strip()]
    if not indents:
        return {}
    margin = min(indents)
    out: dict[str, str] = {}
    names: list[str] = []
    texts: list[str] = []

    def flush() -> None:
        for name in names:
            out[name] = _join(texts)

    for line in section:
        if line.strip() and len(line) - len(line.lstrip()) == margin:
            flush()
            entry = line.strip()
            match = (_NUMPY_ENTRY if numpy else _GOOGLE_ENTRY).match(entry)
            if match is None:
                names, texts = [], []
                continue
            if numpy:
                names = [n.strip().lstrip("*") for n in match.group(1).split(",")]
                texts = []
            else:
                names, texts = [match.group(1)], [match.group(2)]
        else:
            texts.append(line)
    flush()
    return out


def _join(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())
