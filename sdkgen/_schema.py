"""JSON Schema -> Python type expressions (and the named TypedDicts they need).

Never raises: whatever cannot be expressed degrades to ``Any`` (with a note that
ends up in a comment next to the field), and a depth limit plus a per-document
node budget keep cyclic or huge inputs from producing unbounded output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from ._naming import NameAllocator, is_field_identifier, pascal
from ._text import comment_text, compact_json, docstring, first_paragraph, py_str

# dict first: the common case skips the slower ABC check
_MAPPING = (dict, Mapping)

__all__ = ["Definitions", "Field", "SchemaRenderer", "class_body", "json_schema_to_py"]

#: One TypedDict field: (key, type expression, comment).
Field = tuple[str, str, str]

_MAX_DEPTH = 32
_NODE_BUDGET = 20_000
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Spellings of "type" seen in the wild, mapped to the standard ones.
_TYPE_NAMES = {
    "string": "string",
    "str": "string",
    "text": "string",
    "integer": "integer",
    "int": "integer",
    "long": "integer",
    "number": "number",
    "float": "number",
    "double": "number",
    "decimal": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "null": "null",
    "none": "null",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "object": "object",
    "dict": "object",
    "map": "object",
    "record": "object",
    "any": "any",
    "json": "any",
}
_SCALARS = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "any": "JsonValue",
}
_OBJECT_HINTS = ("properties", "additionalProperties", "patternProperties", "required")
_ARRAY_HINTS = ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")
_STRING_HINTS = ("minLength", "maxLength", "pattern")
_NUMBER_HINTS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_SHAPE_KEYS = frozenset(
    {"type", "properties", "items", "$ref", "enum", "const", "oneOf", "anyOf", "allOf"}
    | {"additionalProperties"}
)
# (schema key, label) pairs shown in a field's comment: what a caller must respect.
_CONSTRAINTS = (
    ("default", "default"),
    ("minimum", "min"),
    ("maximum", "max"),
    ("exclusiveMinimum", "greater than"),
    ("exclusiveMaximum", "less than"),
    ("multipleOf", "multiple of"),
    ("minLength", "minLength"),
    ("maxLength", "maxLength"),
    ("pattern", "pattern"),
    ("format", "format"),
    ("minItems", "minItems"),
    ("maxItems", "maxItems"),
    ("uniqueItems", "uniqueItems"),
)
# a plain scalar schema: "type" names one of these and none of _SPECIAL appears
_PLAIN = {k: _SCALARS[v] for k, v in _TYPE_NAMES.items() if v in _SCALARS}
_SPECIAL = frozenset(("$ref", "allOf", "oneOf", "anyOf", "enum", "const", "nullable"))
_CONSTRAINT_KEYS = frozenset(key for key, _ in _CONSTRAINTS)


class Definitions:
    """The named types of one SDK render, shared by every tool in it."""

    __slots__ = ("allocator", "blocks", "classes", "emitted", "shapes", "uses")

    def __init__(self) -> None:
        self.allocator = NameAllocator()
        self.blocks: list[str] = []
        self.emitted: set[str] = set()
        # identical TypedDict bodies share the first name they were given
        self.shapes: dict[str, str] = {}
        # name -> (its block's index, the type expressions it mentions): what
        # ``describe`` follows to show a tool's types and nothing else
        self.uses: dict[str, tuple[int, str]] = {}
        # class-syntax TypedDicts: name -> (fields, docstring lines), for _bases
        self.classes: dict[str, tuple[list[Field], list[str]]] = {}

    def emit(self, name: str, block: str, uses: str = "") -> None:
        self.uses[name] = (len(self.blocks), uses)
        self.blocks.append(block)
        self.emitted.add(name)

    def closure(self, names: list[str]) -> list[str]:
        """The blocks declaring ``names`` and every type they use, in SDK order."""
        seen: set[str] = set()
        todo = [n for n in names if n in self.uses]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(i for i in _IDENT.findall(self.uses[name][1]) if i in self.uses)
        return [self.blocks[i] for i in sorted(self.uses[n][0] for n in seen)]

    def alias(self, name: str, expr: str, notes: list[str]) -> None:
        """Emit ``name: TypeAlias = expr``, never as a union member of itself."""
        members = [m for m in split_union(expr) if m != name]
        if len(members) != len(split_union(expr)):
            expr = _union(members)  # "A = A | str" is no type; A is then just str
        lines = [f"# {note}\n" for note in notes]
        lines.append(f"{name}: TypeAlias = {self.forward(expr)}\n")
        self.emit(name, "".join(lines), expr)

    def forward(self, expr: str) -> str:
        """``expr`` quoted when it names a type not emitted yet (runtime-safe)."""
        allocated = self.allocator.allocated
        for ident in _IDENT.findall(expr):
            if ident in allocated and ident not in self.emitted:
                return py_str(expr)
        return expr


class _Named:
    """A schema node being declared under a name (a ``$ref`` target or a root)."""

    __slots__ = ("expr", "name", "wanted")

    def __init__(self, wanted: str, name: str | None = None) -> None:
        self.wanted = wanted
        self.name = name  # claimed on first recursive use (or preset for roots)
        self.expr: str | None = None


class SchemaRenderer:
    """Renders the schemas of one document (one ``$ref`` root)."""

    __slots__ = ("_budget", "_defs", "_named", "_root", "_stack", "base", "notes")

    def __init__(self, root: Any, defs: Definitions | None, base: str = "") -> None:
        self._root = root
        self._defs = defs
        self.base = base
        self.notes: list[str] = []
        self._named: dict[int, _Named] = {}
        self._stack: set[int] = set()
        self._budget = _NODE_BUDGET

    # ------------------------------------------------------------------ entry points

    def declare(self, name: str) -> None:
        """Declare the root schema as the type ``name`` (a TypedDict or an alias)."""
        assert self._defs is not None
        state = _Named(name, name)
        self._named[id(self._root)] = state
        expr = self.type_of(self._root, name, 0, state)
        state.expr = name
        if name not in self._defs.emitted:
            notes = self._take_notes(0)
            root = self._root
            lines: list[str] = []
            if isinstance(root, _MAPPING):
                about = comment_text(root.get("description"))
                limits = _constraints(root, about.lower())
                lines = [about] if about else []
                if limits:  # a tool returning a datetime returns a str: say which
                    lines.append(f"({', '.join(limits)})")
            self._defs.alias(name, expr, [*lines, *notes])

    def type_of(self, node: Any, hint: str, depth: int, named: _Named | None = None) -> str:
        """The type expression for ``node``; nested objects get names from ``hint``."""
        self._budget -= 1
        if self._budget < 0 or depth > _MAX_DEPTH:
            self.notes.append("schema too large or too deep")
            return "Any"
        if node is True:
            return "JsonValue"
        if not isinstance(node, _MAPPING):
            self.notes.append(f"schema: {compact_json(node, 120)}")
            return "Any"
        if "$ref" in node:
            return self._ref(node, hint, depth)
        if "allOf" in node:
            node = self._merge_all(node, depth)
        for key in ("oneOf", "anyOf"):
            variants = node.get(key)
            if isinstance(variants, list) and any(_has_shape(v) for v in variants):
                return self._variants(node, key, variants, hint, depth)
        if "enum" in node or "const" in node:
            expr = self._literal(node)
        else:
            expr = self._typed(node, hint, depth, named)
        if node.get("nullable") is True and expr not in ("None", "Any", "JsonValue"):
            expr = f"{expr} | None"
        return expr

    # ------------------------------------------------------------------ constructs

    def _typed(self, node: Mapping[str, Any], hint: str, depth: int, named: _Named | None) -> str:
        kind = node.get("type")
        if kind is None:
            kind = _infer_type(node)
        if isinstance(kind, list):
            if not kind:
                return self._degrade(node)
            if len(kind) == 1:
                kind = kind[0]
            else:
                members = [self._typed({**node, "type": k}, hint, depth, None) for k in kind]
                return _union(members)
        if not isinstance(kind, str):
            return self._degrade(node)
        std = _TYPE_NAMES.get(kind) or _TYPE_NAMES.get(kind.lower())
        if std is None:
            return self._degrade(node)
        if std == "object":
            return self._object(node, hint, depth, named)
        if std == "array":
            return self._array(node, hint, depth)
        return _SCALARS[std]

    def _degrade(self, node: Any) -> str:
        self.notes.append(f"schema: {compact_json(node, 120)}")
        return "Any"

    def _array(self, node: Mapping[str, Any], hint: str, depth: int) -> str:
        items = node.get("prefixItems", node.get("items"))
        if items is None or items is True:
            return "list[JsonValue]"
        if isinstance(items, list):
            # tuple-style items: any position's type (JSON arrays come back as lists)
            if not items:
                return "list[JsonValue]"
            return f"list[{_union([self.type_of(s, hint + 'Item', depth + 1) for s in items])}]"
        return f"list[{self.type_of(items, hint + 'Item', depth + 1)}]"

    def _literal(self, node: Mapping[str, Any]) -> str:
        values = [node["const"]] if "const" in node else node.get("enum")
        if not isinstance(values, list) or not values:
            return self._degrade(node)
        literals: list[str] = []
        others: list[str] = []
        for value in values:
            if value is None:
                others.append("None")
            elif isinstance(value, bool):
                literals.append("True" if value else "False")
            elif isinstance(value, int):
                try:
                    literals.append(str(int(value)))
                except ValueError:  # more digits than int->str allows
                    others.append("int")
            elif isinstance(value, str):
                literals.append(py_str(value))
            elif isinstance(value, float):
                others.append("float")  # floats cannot be Literal members
            else:
                others.append("JsonValue")
                self.notes.append(f"one of: {compact_json(values, 120)}")
        members = [f"Literal[{', '.join(dict.fromkeys(literals))}]"] if literals else []
        return _union(members + others)

    def _variants(
        self, node: Mapping[str, Any], key: str, variants: list[Any], hint: str, depth: int
    ) -> str:
        base = {k: v for k, v in node.items() if k not in ("oneOf", "anyOf", "description")}
        shaped = "type" in base or "properties" in base
        members: list[str] = []
        for i, variant in enumerate(variants, 1):
            if shaped and isinstance(variant, _MAPPING):
                variant = _merge(base, variant)
            members.append(self.type_of(variant, f"{hint}Option{i}", depth + 1))
        expr = _union(members)
        if node.get("nullable") is True:
            expr = _union([expr, "None"])
        return expr

    def _merge_all(
        self, node: Mapping[str, Any], depth: int, seen: frozenset[int] = frozenset()
    ) -> Mapping[str, Any]:
        """``allOf`` folded into one schema (the usual "object plus more fields")."""
        parts = node.get("allOf")
        if not isinstance(parts, list):
            return node
        seen = seen | {id(node)}  # a part that includes itself is merged once
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        for part in parts:
            self._budget -= 1
            target = part
            if isinstance(part, _MAPPING) and isinstance(part.get("$ref"), str):
                target = self._resolve(part["$ref"])
            if not isinstance(target, _MAPPING) or id(target) in seen or self._budget < 0:
                continue
            if "allOf" in target and depth < _MAX_DEPTH:
                target = self._merge_all(target, depth + 1, seen)
            merged = _merge(merged, target)
        return merged

    def _object(self, node: Mapping[str, Any], hint: str, depth: int, named: _Named | None) -> str:
        props: Mapping[str, Any] = node.get("properties") or {}
        extra = node.get("additionalProperties")
        has_props = isinstance(props, _MAPPING) and bool(props)
        defs = self._defs
        # no properties: a dict, unless closed (then only {} fits: an empty TypedDict)
        if not has_props and not (extra is False and defs is not None):
            value = "JsonValue"
            if isinstance(extra, _MAPPING):
                value = self.type_of(extra, hint + "Value", depth + 1)
            elif isinstance(node.get("patternProperties"), Mapping):
                schemas = list(node["patternProperties"].values())
                value = _union([self.type_of(s, hint + "Value", depth + 1) for s in schemas])
            return f"dict[str, {value}]"
        if defs is None:
            return "dict[str, Any]"  # a TypedDict needs a name: none outside the SDK
        required = node.get("required")
        needed = (
            {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        )
        keys = [k for k in props if isinstance(k, str)] if has_props else []
        keys.sort(key=lambda k: (k not in needed, k))
        fields: list[Field] = []
        notes = self.notes
        for key in keys:
            sub = props[key]
            mark = len(notes)
            kind = sub.get("type") if type(sub) is dict else None
            if type(kind) is str and kind in _PLAIN and _SPECIAL.isdisjoint(sub):
                expr = _PLAIN[kind]  # the common case: skip the general path
            else:
                expr = self.type_of(sub, hint + pascal(key, "Field"), depth + 1)
            if key not in needed:
                expr = f"NotRequired[{expr}]"
            fields.append((key, expr, _field_comment(sub, self._take_notes(mark))))
        doc = first_paragraph(node.get("description")) if named is not None else []
        uses = " ".join(expr for _, expr, _ in fields)
        if isinstance(extra, _MAPPING) and extra:
            value = self.type_of(extra, hint + "Value", depth + 1)
            doc.append(f"Other keys are allowed too; their values are {value}.")
            uses += " " + value
        for key, quantity in (("oneOf", "exactly one"), ("anyOf", "at least one")):
            if key in node:
                needs = _required_choices(node[key])
                if needs:
                    doc.append(f"Give {quantity} of: {' | '.join(needs)}.")
        classic = all(is_field_identifier(k) for k in keys)
        if classic:
            body = class_body(fields, doc)
            shape = body
        else:
            head = "".join(f"# {line}\n" for line in doc)
            body = _functional_body(fields, defs)
            shape = f"{head}\0{body}"
        if named is not None and named.name is not None:
            name = named.name
        else:
            shared = defs.shapes.get(shape)
            if shared is not None:
                return shared
            name = defs.allocator.allocate(named.wanted if named is not None else hint)
            defs.shapes[shape] = name
        if classic:
            block = f"class {name}(TypedDict):\n{body}"
            defs.classes[name] = (fields, doc)
        else:
            block = f'{head}{name} = TypedDict("{name}", {{\n{body}}})\n'
        defs.emit(name, block, uses)
        return name

    def _ref(self, node: Mapping[str, Any], hint: str, depth: int) -> str:
        ref = node["$ref"]
        target = self._resolve(ref) if isinstance(ref, str) else None
        if target is None:
            self.notes.append(f"unresolved $ref {compact_json(ref, 80)}")
            return "Any"
        key = id(target)
        if self._defs is None:  # inline; a cycle cannot be named, so it is Any
            if key in self._stack:
                return "Any"
            self._stack.add(key)
            try:
                return self.type_of(target, hint, depth + 1)
            finally:
                self._stack.discard(key)
        state = self._named.get(key)
        if state is not None:
            if state.expr is not None:
                return state.expr
            if state.name is None:
                state.name = self._defs.allocator.allocate(state.wanted)
            return state.name
        segment = ref.rsplit("/", 1)[-1]
        state = _Named(self.base + pascal(segment, "Def"))
        self._named[key] = state
        expr = self.type_of(target, state.wanted, depth + 1, state)
        if state.name is not None:
            if state.name not in self._defs.emitted:
                # a recursive non-object (e.g. a tree of lists): a named alias
                self._defs.alias(state.name, expr, [])
            expr = state.name
        state.expr = expr
        return expr

    def _resolve(self, ref: str) -> Any:
        if ref == "#":
            return self._root
        if not ref.startswith("#/"):
            return None
        node = self._root
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if "%" in part:
                part = unquote(part)
            if isinstance(node, _MAPPING) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def _take_notes(self, mark: int) -> list[str]:
        if len(self.notes) == mark:
            return []
        taken = list(dict.fromkeys(self.notes[mark:]))
        del self.notes[mark:]
        return taken


# ---------------------------------------------------------------------- helpers


def _has_shape(schema: Any) -> bool:
    if isinstance(schema, bool):
        return True
    return isinstance(schema, _MAPPING) and not _SHAPE_KEYS.isdisjoint(schema)


def _infer_type(node: Mapping[str, Any]) -> str:
    for keys, kind in (
        (_OBJECT_HINTS, "object"),
        (_ARRAY_HINTS, "array"),
        (_STRING_HINTS, "string"),
        (_NUMBER_HINTS, "number"),
    ):
        if any(k in node for k in keys):
            return kind
    return "any"  # an annotation-only node accepts any JSON value


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        old = merged.get(key)
        if key == "properties" and isinstance(old, _MAPPING) and isinstance(value, _MAPPING):
            merged[key] = {**old, **value}
        elif key == "required" and isinstance(old, list) and isinstance(value, list):
            merged[key] = old + [r for r in value if r not in old]
        else:
            merged[key] = value
    return merged


def split_union(expr: str) -> list[str]:
    """The top-level members of a ``A | B[C | D] | Literal["x | y"]`` expression."""
    if " | " not in expr:
        return [expr]
    members: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0 and expr.startswith(" | ", i):
            members.append(expr[start:i])
            start = i + 3
            i += 2
        i += 1
    members.append(expr[start:])
    return members


def _union(members: list[str]) -> str:
    unique = list(dict.fromkeys(members))
    if "Any" in unique:
        return "Any"
    if "JsonValue" in unique:
        return "JsonValue"
    if "None" in unique and unique[-1] != "None":
        unique.remove("None")
        unique.append("None")
    return " | ".join(unique) if unique else "Any"


def _required_choices(variants: Any) -> list[str]:
    """``oneOf: [{required: [a]}, {required: [b, c]}]`` -> ``["a", "b + c"]``."""
    if not isinstance(variants, list):
        return []
    choices = []
    for variant in variants:
        required = variant.get("required") if isinstance(variant, _MAPPING) else None
        if not isinstance(required, list) or not required:
            return []
        choices.append(" + ".join(comment_text(r, 60) for r in required if isinstance(r, str)))
    return choices


def _field_comment(schema: Any, notes: list[str]) -> str:
    parts: list[str] = []
    if isinstance(schema, _MAPPING):
        text = comment_text(schema.get("description"))
        if text:
            parts.append(text)
        limits = _constraints(schema, text.lower())
        if schema.get("deprecated") is True:
            limits.append("deprecated")
        if limits:
            parts.append(f"({', '.join(limits)})")
    if notes:
        parts.append(f"[{'; '.join(notes)}]")
    return " ".join(parts)


def _constraints(schema: Mapping[str, Any], said: str) -> list[str]:
    """What a value must respect, for a comment (``said``: what the prose already says)."""
    limits = _limits(_optional_view(schema), said)
    items = schema.get("items")
    if isinstance(items, _MAPPING):
        # a list of dates is a list[str]: say what each string is
        fmt = _optional_view(items).get("format")
        if fmt is not None:
            limits.append(f"items format {compact_json(fmt, 60)}")
    return limits


def _limits(schema: Mapping[str, Any], said: str) -> list[str]:
    limits: list[str] = []
    if _CONSTRAINT_KEYS.isdisjoint(schema):
        return limits
    for key, label in _CONSTRAINTS:
        if key in schema:
            value = compact_json(schema[key], 60)
            # authors often repeat limits in prose ("(min 1, max 100)"): once is enough
            if f"{label} {value}".lower() not in said and (f"{label}: {value}".lower() not in said):
                limits.append(f"{label} {value}")
    return limits


def _optional_view(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """An optional value's constraints: ``anyOf: [X, {"type": "null"}]`` shows X's too."""
    for key in ("anyOf", "oneOf"):
        variants = schema.get(key)
        if isinstance(variants, list) and len(variants) == 2:
            rest = [
                v for v in variants if not (isinstance(v, _MAPPING) and v.get("type") == "null")
            ]
            if len(rest) == 1 and isinstance(rest[0], _MAPPING) and "$ref" not in rest[0]:
                return {**rest[0], **schema}
    return schema


def class_body(fields: list[Field], doc: list[str]) -> str:
    """The body of a class-syntax TypedDict: its docstring, then a line per field."""
    lines = [docstring(doc, "    ")] if doc else []
    for key, expr, comment in fields:
        suffix = f"  # {comment}" if comment else ""
        lines.append(f"    {key}: {expr}{suffix}\n")
    if not lines:
        lines.append("    pass\n")
    return "".join(lines)


def _functional_body(fields: list[Field], defs: Definitions) -> str:
    lines = []
    for key, expr, comment in fields:
        suffix = f"  # {comment}" if comment else ""
        lines.append(f"    {py_str(key)}: {defs.forward(expr)},{suffix}\n")
    return "".join(lines)


def json_schema_to_py(schema: Any) -> str:
    """The Python type expression for one JSON Schema; never raises.

    Without the naming context of an SDK render, objects with declared
    properties become ``dict[str, Any]`` and recursive ``$ref`` s become
    ``Any``. The expression may mention ``JsonValue`` (declared by the SDK).
    """
    renderer = SchemaRenderer(schema, None)
    try:
        return renderer.type_of(schema, "", 0)
    except RecursionError:  # pragma: no cover - depth is bounded above
        return "Any"
