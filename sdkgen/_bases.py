"""Fields that many TypedDicts repeat, declared once in a base class they inherit.

Most tools of a server take the same few fields with the same type and the same
description (``owner``/``repo``, ``page``/``perPage``). Each such group becomes a
``class OwnerRepoFields(TypedDict)`` declared once, and every TypedDict that
has the whole group inherits it instead of repeating its lines: the same keys,
types, requiredness and comments, fewer characters (about 8 % of the GitHub
corpus). A class inherits at most a few bases, whose fields never overlap.
"""

from __future__ import annotations

import heapq
from collections import Counter
from itertools import combinations

from ._naming import pascal
from ._schema import Definitions, Field, class_body

__all__ = ["share_fields"]

_MIN_USES = 3  # a group is worth a base when this many classes repeat it
_MAX_GROUP = 6  # fields in one base
_MAX_BASES = 3  # bases of one class
_MAX_FIELDS = 24  # classes with more fields take part with their first ones only
_MAX_ROUNDS = 32
_MIN_SAVING = 100  # characters a base must save: no base for a trifle


def _line(field: Field) -> int:
    key, expr, comment = field
    return len(key) + len(expr) + 7 + (len(comment) + 4 if comment else 0)


def _saving(size: int, users: int) -> int:
    """Characters saved by declaring fields of ``size`` characters once for ``users`` classes.

    Each user writes the base's name instead (about as long as ``TypedDict``, or
    ``, Name`` for a second base); the base costs its header and a blank line.
    """
    return (users - 1) * size - users * 7 - 40


def _pair_saving(pair: tuple[Field, Field], uses: int, size: dict[Field, int]) -> int:
    return _saving(size[pair[0]] + size[pair[1]], uses)


def share_fields(defs: Definitions) -> None:
    """Move repeated field groups of ``defs``' TypedDicts into shared base classes.

    Deterministic: classes are visited in emission order and ties go by the
    fields' text. Rewrites the blocks in place and declares the bases first.
    """
    classes = defs.classes
    if len(classes) < _MIN_USES:
        return
    counts: Counter[Field] = Counter()
    for fields, _ in classes.values():
        counts.update(set(fields[:_MAX_FIELDS]))
    size = {f: _line(f) for f, n in counts.items() if n >= _MIN_USES}
    available: dict[str, set[Field]] = {}
    for name, (declared, _) in classes.items():
        mine = {f for f in declared[:_MAX_FIELDS] if f in size}
        if len(mine) >= 2:
            available[name] = mine
    pairs: Counter[tuple[Field, Field]] = Counter()
    for mine in available.values():
        pairs.update(combinations(sorted(mine), 2))
    # the pairs by what a base of just them would save; counts only fall as bases
    # are made, so a stale entry is an upper bound (lazy greedy: recheck the top)
    heap = [(-_pair_saving(p, n, size), p) for p, n in pairs.items() if n >= _MIN_USES]
    heapq.heapify(heap)
    bases: list[tuple[str, list[Field]]] = []
    inherits: dict[str, list[str]] = {}
    for _ in range(_MAX_ROUNDS):
        found = _best_group(available, pairs, heap, size)
        if found is None:
            break
        group, users = found
        # required fields first, then by key: the order every TypedDict uses
        ordered = sorted(group, key=lambda f: (f[1].startswith("NotRequired["), f))
        name = defs.allocator.allocate(pascal("_".join(f[0] for f in ordered), "Shared") + "Fields")
        bases.append((name, ordered))
        for user in users:
            names = inherits.setdefault(user, [])
            names.append(name)
            before = available[user]
            # this class's pairs no longer count: those with a field it now inherits,
            # and all of them once it has as many bases as it may
            gone = before if len(names) >= _MAX_BASES else group
            pairs.subtract(
                pair
                for pair in combinations(sorted(before), 2)
                if pair[0] in gone or pair[1] in gone
            )
            available[user] = set() if len(names) >= _MAX_BASES else before - group
    if bases:
        _rewrite(defs, bases, inherits)


def _best_group(
    available: dict[str, set[Field]],
    pairs: Counter[tuple[Field, Field]],
    heap: list[tuple[int, tuple[Field, Field]]],
    size: dict[Field, int],
) -> tuple[frozenset[Field], list[str]] | None:
    """The field group whose base saves most, and the classes that have all of it."""
    while heap:
        stale, pair = heap[0]
        uses = pairs[pair]
        saving = _pair_saving(pair, uses, size) if uses >= _MIN_USES else _MIN_SAVING - 1
        if saving < _MIN_SAVING:
            heapq.heappop(heap)
        elif -stale != saving:
            heapq.heapreplace(heap, (-saving, pair))
        else:
            heapq.heappop(heap)
            break
    else:
        return None
    group = frozenset(pair)
    users = [name for name, fields in available.items() if group <= fields]
    # grow the group while a field shared by enough of its users saves more
    while len(group) < _MAX_GROUP:
        chars = sum(size[f] for f in group)
        saving = _saving(chars, len(users))
        extra: Counter[Field] = Counter()
        for user in users:
            extra.update(available[user] - group)
        choice: tuple[int, Field] | None = None
        for field, uses in extra.items():
            gain = _saving(chars + size[field], uses)
            if uses >= _MIN_USES and gain > saving and (choice is None or (gain, field) > choice):
                choice = (gain, field)
        if choice is None:
            break
        group = group | {choice[1]}
        users = [u for u in users if choice[1] in available[u]]
    return group, users


def _rewrite(
    defs: Definitions, bases: list[tuple[str, list[Field]]], inherits: dict[str, list[str]]
) -> None:
    shared = {name: set(fields) for name, fields in bases}
    for user, names in inherits.items():
        fields, doc = defs.classes[user]
        # the bases in the order of their fields in the class (required ones first)
        position = {field: i for i, field in enumerate(fields)}
        names = sorted(names, key=lambda n: min(position[f] for f in shared[n]))
        taken = set().union(*(shared[n] for n in names))
        rest = [f for f in fields if f not in taken]
        index, uses = defs.uses[user]
        body = class_body(rest, doc) if rest or doc else "    pass\n"
        defs.blocks[index] = f"class {user}({', '.join(names)}):\n{body}"
        defs.uses[user] = (index, f"{uses} {' '.join(names)}")
    # the bases go first: a class statement needs its bases defined
    blocks = [f"class {name}(TypedDict):\n{class_body(fields, [])}" for name, fields in bases]
    shift = len(blocks)
    defs.uses = {name: (index + shift, uses) for name, (index, uses) in defs.uses.items()}
    for i, (name, fields) in enumerate(bases):
        defs.uses[name] = (i, " ".join(expr for _, expr, _ in fields))
        defs.emitted.add(name)
    defs.blocks[:0] = blocks
