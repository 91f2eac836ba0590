"""Names in the generated SDK: type names from paths, method names from tool names."""

from __future__ import annotations

import builtins
import functools
import keyword
import re

__all__ = ["RESERVED", "NameAllocator", "is_attribute_name", "is_field_identifier", "pascal"]

#: Names the SDK text itself defines or imports; no generated name may take them.
RESERVED = frozenset(
    {
        "annotations",
        "Any",
        "Awaitable",
        "Callable",
        "JsonValue",
        "Literal",
        "NotRequired",
        "Protocol",
        "ToolCallError",
        "Tools",
        "TypeAlias",
        "TypedDict",
        "overload",
        "tools",
    }
)

_BUILTINS = frozenset(dir(builtins))
_MAX_NAME = 80
_WORD_SEPARATORS = re.compile("[^A-Za-z0-9]+")


@functools.lru_cache(maxsize=8192)
def pascal(text: str, fallback: str) -> str:
    """``"get_issue"``/``"get-issue"``/``"getIssue"`` -> ``"GetIssue"`` (ASCII only)."""
    name = "".join(p[0].upper() + p[1:] for p in _WORD_SEPARATORS.split(text) if p)[:_MAX_NAME]
    if not name:
        return fallback
    if name[0].isdigit():
        return fallback + name
    return name


@functools.lru_cache(maxsize=8192)
def is_field_identifier(name: str) -> bool:
    """Whether ``name`` can be a key of a class-syntax ``TypedDict``.

    Keywords cannot, and a leading double underscore would be name-mangled.
    """
    return (
        name.isidentifier()
        and name.isascii()
        and not keyword.iskeyword(name)
        and not name.startswith("__")
    )


def is_attribute_name(name: str, taken: frozenset[str] | set[str]) -> bool:
    """Whether a tool can be declared as ``tools.<name>``.

    Everything else (keywords, builtins, non-ASCII, punctuation, leading
    underscore, names the ``Tools`` class body uses as types) is reached as
    ``tools["<name>"]``: a method named like a type would shadow it in the class.
    """
    return (
        name.isidentifier()
        and name.isascii()
        and not name.startswith("_")
        and not keyword.iskeyword(name)
        and name not in _BUILTINS
        and name not in RESERVED
        and name not in taken
    )


class NameAllocator:
    """Hands out unique type names; a taken name gets the next free number."""

    __slots__ = ("_next", "_taken", "allocated")

    def __init__(self) -> None:
        self._taken: set[str] = set(RESERVED) | _BUILTINS
        self._next: dict[str, int] = {}
        self.allocated: set[str] = set()

    def allocate(self, wanted: str) -> str:
        """Reserve and return ``wanted`` or ``wanted2``, ``wanted3``, ..."""
        if wanted not in self._taken:
            self._taken.add(wanted)
            self.allocated.add(wanted)
            return wanted
        n = self._next.get(wanted, 2)
        while f"{wanted}{n}" in self._taken:
            n += 1
        self._next[wanted] = n + 1
        name = f"{wanted}{n}"
        self._taken.add(name)
        self.allocated.add(name)
        return name

    @property
    def taken(self) -> set[str]:
        """Every name allocated so far (plus the reserved ones)."""
        return self._taken
