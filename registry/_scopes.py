"""Layers of registrations: the global layer and named scopes with parents."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from ._validation import CompiledTool

__all__ = ["Layer", "Listener", "Restriction"]

_ids = count()


@dataclass(frozen=True, slots=True)
class Restriction:
    """One snapshotted allow/deny mask over what a scope inherits."""

    key: int
    allow: frozenset[str] | None
    deny: frozenset[str]

    def admits(self, name: str) -> bool:
        if name in self.deny:
            return False
        return self.allow is None or name in self.allow


@dataclass(frozen=True, slots=True)
class Listener:
    """One registered listener with the scope it is filtered to (``None``: every call)."""

    key: int
    fn: Any
    scope: str | None


def next_key() -> int:
    return next(_ids)


@dataclass(slots=True)
class Layer:
    """What one scope (or the global layer, ``name=None``) owns."""

    name: str | None
    parent: str | None = None
    tools: dict[str, CompiledTool] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    restrictions: list[Restriction] = field(default_factory=list)

    def names(self) -> Iterator[str]:
        yield from self.tools
        yield from self.reserved


Disposer = Callable[[], None]
