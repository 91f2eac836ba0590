"""Names in the generated SDK: type names from paths, method names from tool names."""

from __future__ import annotations

import builtins
import functools
import keyword
import re

__all__ = [
    "DISCOVERY_METHODS",
    "RESERVED",
    "NameAllocator",
    "is_attribute_name",
    "is_field_identifier",
    "is_namespace_part",
    "is_tools_member",
    "namespace_of",
    "pascal",
]

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

#: The program's ``tools`` object's own methods (discovery, in both modes): a tool
#: or namespace so named is reached by subscript, ``tools["search"]``.
DISCOVERY_METHODS = frozenset({"describe", "search"})

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


def is_tools_member(name: str, taken: frozenset[str] | set[str]) -> bool:
    """Whether a tool or a namespace can be declared as an attribute of ``tools`` itself.

    :func:`is_attribute_name`, and not one of :data:`DISCOVERY_METHODS`: at run
    time ``tools.search`` is the discovery method, so a tool named ``search``
    is ``tools["search"]`` and one named ``search.x`` is ``tools["search.x"]``.
    A namespace's own members (``tools.git.search``) are not affected.
    """
    return name not in DISCOVERY_METHODS and is_attribute_name(name, taken)


def namespace_of(name: str) -> tuple[str, str] | None:
    """``(namespace, rest)`` of a namespaced tool name, or ``None`` for a plain one.

    The naming rule, which ``runtime._worker._program`` implements for the program's
    ``tools`` object (the packages share no code): the text before the FIRST
    ``"."`` is the namespace when it is a non-empty ASCII identifier that is not
    a keyword and does not start with ``"_"``; the rest is everything after that
    dot. At run time such a tool is ``tools.<namespace>.<rest>`` when the rest
    obeys the same rule, and always ``tools.<namespace>["<rest>"]`` and
    ``tools["<namespace>.<rest>"]``. The SDK promises less
    (:func:`is_attribute_name` for both parts): what it declares must also
    type-check.
    """
    namespace, dot, rest = name.partition(".")
    if dot and is_namespace_part(namespace):
        return namespace, rest
    return None


def is_namespace_part(text: str) -> bool:
    """Whether ``text`` can be a namespace (or, at run time, a rest reached as an attribute)."""
    return (
        text.isascii()
        and text.isidentifier()
        and not text.startswith("_")
        and not keyword.iskeyword(text)
    )


class NameAllocator:
    """Hands out unique type names; a taken name gets the next free number."""

    __slots__ = ("_next", "_taken", "allocated")

    def __init__(self) -> None:
        self._taken: set[str] = set(RESERVED) | _BUILTINS
        self._next: dict[str, int] = {}
        self.allocated: set[str] = set()

    def allocate(self, wanted: str, avoid: frozenset[str] | set[str] = frozenset()) -> str:
        """Reserve and return ``wanted`` or ``wanted2``, ``wanted3``, ...

        ``avoid`` holds names that are not types but must not become one
        either (the members of the class that will use the name).
        """
        if wanted not in self._taken and wanted not in avoid:
            self._taken.add(wanted)
            self.allocated.add(wanted)
            return wanted
        n = self._next.get(wanted, 2)
        while f"{wanted}{n}" in self._taken or f"{wanted}{n}" in avoid:
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
