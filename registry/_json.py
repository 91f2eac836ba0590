"""Lossless JSON: the one value shape that crosses every boundary.

A value is lossless JSON when serialising and parsing it gives back an equal
value of the same types: ``dict`` with ``str`` keys, ``list``, ``str``, ``int``
within 64 bits, finite ``float``, ``bool`` and ``None`` — exact types, not
subclasses. Everything else (NaN, infinities, bytes, tuples, sets, non-string
keys, cycles, huge ints, enums, dataclasses…) is rejected with a path.
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

import orjson

from ._exceptions import NotJsonError

__all__ = [
    "MAX_DEPTH",
    "JsonValue",
    "NotJsonError",
    "clone_json",
    "dumps_pretty",
    "snapshot_json",
]

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"

#: Deepest nesting accepted; matches what orjson can serialise.
MAX_DEPTH = 255
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


_FLAT_MAX_KEYS = 32


def snapshot_json(value: object) -> Any:
    """Return a deep, independent copy of ``value`` or raise :class:`NotJsonError`."""
    kind = type(value)
    if kind is bool or value is None:
        return value
    if kind is dict and len(value) <= _FLAT_MAX_KEYS:  # type: ignore[arg-type]
        # The common shape of tool arguments: a small object of plain scalars.
        copied = _flat_copy(value)  # type: ignore[arg-type]
        if copied is not None:
            return copied
    elif kind is str and value.isascii():  # type: ignore[attr-defined]
        return value  # immutable, and ASCII holds no lone surrogate
    try:
        # Fast path: orjson refuses most non-JSON values outright; the ones it
        # converts (NaN -> null, enum/UUID -> their value, tuple -> array) no
        # longer compare equal, so the exact walk below decides and explains.
        copied = orjson.loads(orjson.dumps(value, option=_STRICT))
        # Exact types first: orjson turns IntEnum/StrEnum/float-mixin enum members
        # into their plain values, which then compare equal, and ``==`` would call
        # a member's own ``__eq__``.
        if _exact_types(value) and copied == value:
            return copied
    except (TypeError, orjson.JSONEncodeError):
        pass
    return _copy(value, "$", 0, set())


def _flat_copy(value: dict[Any, Any]) -> dict[str, Any] | None:
    """A copy of a dict of ASCII keys and plain scalars, else ``None`` (undecided).

    ``None`` sends the value down the general path, which accepts or rejects it
    with a reason; this only recognises the certainly-valid common case.
    """
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return None
        kind = type(item)
        if kind is str:
            if not item.isascii():
                return None
        elif kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return None
        elif kind is float:
            if not math.isfinite(item):
                return None
        elif kind is not bool and item is not None:
            return None
    return dict(value)


def _exact_types(value: object) -> bool:
    # ``==`` treats True == 1 and 1 == 1.0; orjson keeps those types, and it
    # rejects non-``str`` keys and str/int/dict/list subclasses, so only values
    # need checking. orjson refused anything deeper than its recursion limit.
    # Plain loops: measurably faster than ``all()`` over a generator here.
    # Scalars are checked inline: a call per item was most of the cost of a
    # long list (10,000 ints: 0.94 ms with a call each).
    kind = type(value)
    if kind is dict:
        items = value.values()  # type: ignore[attr-defined]
    elif kind is list:
        items = value
    else:
        return kind is str or kind is int or kind is float or kind is bool or value is None
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is float or kind is bool or item is None:
            continue
        if (kind is not dict and kind is not list) or not _exact_types(item):
            return False
    return True


def _copy(value: object, path: str, depth: int, ancestors: set[int]) -> Any:
    kind = type(value)
    if kind is str:
        # orjson (the fast path) refuses lone surrogates; so must the walk, or the
        # value would fail later at pretty-printing or on the worker wire.
        try:
            value.encode("utf-8")  # type: ignore[attr-defined]
        except UnicodeEncodeError:
            raise NotJsonError(path, "string with a lone surrogate (not valid Unicode)") from None
        return value
    if kind is bool or value is None:
        return value
    if kind is int:
        if _INT_MIN <= value <= _INT_MAX:  # type: ignore[operator]
            return value
        raise NotJsonError(path, "integer outside the 64-bit range")
    if kind is float:
        if math.isfinite(value):  # type: ignore[arg-type]
            return value
        raise NotJsonError(path, f"non-finite number {value!r}")
    if kind is dict or kind is list:
        if depth >= MAX_DEPTH:
            raise NotJsonError(path, f"nesting deeper than {MAX_DEPTH} levels")
        marker = id(value)
        if marker in ancestors:
            raise NotJsonError(path, "cyclic reference")
        ancestors.add(marker)
        try:
            if kind is list:
                items: list[Any] = value  # type: ignore[assignment]
                return [
                    _copy(item, f"{path}[{i}]", depth + 1, ancestors)
                    for i, item in enumerate(items)
                ]
            out: dict[str, Any] = {}
            for key, item in value.items():  # type: ignore[attr-defined]
                if type(key) is not str:
                    raise NotJsonError(path, f"non-string key {key!r}")
                if not key.isascii():
                    try:
                        key.encode("utf-8")
                    except UnicodeEncodeError:
                        raise NotJsonError(
                            path, "key with a lone surrogate (not valid Unicode)"
                        ) from None
                out[key] = _copy(item, f"{path}.{key}", depth + 1, ancestors)
            return out
        finally:
            ancestors.discard(marker)
    raise NotJsonError(path, f"{_describe(value)} is not JSON")


def _describe(value: object) -> str:
    kind = type(value)
    if kind is tuple:
        return "tuple (use a list)"
    if kind in (set, frozenset):
        return f"{kind.__name__} (use a list)"
    if kind in (bytes, bytearray, memoryview):
        return f"{kind.__name__} (decode it to str)"
    return (
        f"value of type {kind.__module__}.{kind.__qualname__}"
        if kind.__module__ not in ("builtins",)
        else f"value of type {kind.__qualname__}"
    )


def clone_json(value: Any) -> Any:
    """A deep copy of an already-lossless value: fresh containers, shared scalars.

    Cheaper than :func:`snapshot_json` (nothing is checked again). Stack-safe:
    orjson copies what it can, an explicit stack what nests deeper than orjson goes.
    """
    kind = type(value)
    if kind is dict:
        if len(value) <= _FLAT_MAX_KEYS:
            for item in value.values():
                if type(item) is dict or type(item) is list:
                    break
            else:
                return dict(value)  # a flat object: its scalars are immutable
    elif kind is not list:
        return value
    try:
        return orjson.loads(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return _clone_walk(value)


def _clone_walk(value: Any) -> Any:
    """:func:`clone_json` for what orjson refuses (too deep, or not JSON at all).

    Copies every ``dict`` and ``list`` and shares anything else; a container met
    twice (shared, or a cycle) is copied once, so the walk always ends.
    """
    kind = type(value)
    if kind is not dict and kind is not list:
        return value
    top: Any = {} if kind is dict else [None] * len(value)
    copies: dict[int, Any] = {id(value): top}
    stack: list[tuple[Any, Any]] = [(value, top)]
    while stack:
        original, copy = stack.pop()
        pairs = original.items() if type(original) is dict else enumerate(original)
        for key, item in pairs:
            kind = type(item)
            if kind is dict or kind is list:
                child = copies.get(id(item))
                if child is None:
                    child = {} if kind is dict else [None] * len(item)
                    copies[id(item)] = child
                    stack.append((item, child))
                item = child
            copy[key] = item
    return top


def dumps_pretty(value: object, *, max_indent: int | None = None) -> str:
    """Pretty JSON text (two-space indent) of an already-lossless value.

    Args:
        value: lossless JSON.
        max_indent: the deepest indentation, in characters; a container whose
            items would be indented deeper is written compactly. ``None``: no cap.

    Stack-safe at any depth: orjson writes what it can (it refuses more than 254
    levels, one less than :data:`MAX_DEPTH`), an explicit stack the rest.
    """
    if max_indent is None:
        try:
            return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
        except orjson.JSONEncodeError:
            pass  # nests deeper than orjson goes
    return _write(value, max_indent)


_TEXT, _PRETTY, _COMPACT = 0, 1, 2
_STEP = 2


def _write(value: object, max_indent: int | None) -> str:
    """JSON text by an explicit stack: indented, then compact below ``max_indent``.

    Byte-identical to orjson's own output (``OPT_INDENT_2`` for the indented
    part); orjson still writes every scalar, key and compact subtree it can.
    """
    out: list[str] = []
    stack: list[tuple[int, Any, int]] = [(_PRETTY, value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        kind, item, depth = pop()
        if kind == _TEXT:
            out.append(item)
            continue
        if not isinstance(item, dict | list) or not item:
            out.append(orjson.dumps(item).decode())
            continue
        if kind == _PRETTY and max_indent is not None and (depth + 1) * _STEP > max_indent:
            kind = _COMPACT
        if kind == _COMPACT:
            try:
                out.append(orjson.dumps(item).decode())
                continue
            except orjson.JSONEncodeError:
                pass  # too deep for orjson: this level is written here
            pad = close = ""
            comma, colon = ",", ":"
        else:
            pad = "\n" + " " * ((depth + 1) * _STEP)
            close = "\n" + " " * (depth * _STEP)
            comma, colon = ",", ": "
        # Pushed in reverse, so they pop in order: opener, items (with their
        # separators and keys), closer.
        if isinstance(item, dict):
            opener, closer = "{", "}"
            entries = [
                (pad + orjson.dumps(key).decode() + colon, child) for key, child in item.items()
            ]
        else:
            opener, closer = "[", "]"
            entries = [(pad, child) for child in item]
        push((_TEXT, close + closer, 0))
        for index in range(len(entries) - 1, -1, -1):
            prefix, child = entries[index]
            push((kind, child, depth + 1))
            push((_TEXT, prefix if index == 0 else comma + prefix, 0))
        push((_TEXT, opener, 0))
    return "".join(out)
