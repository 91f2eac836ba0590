"""Type annotations -> JSON Schema, for the parameters and the result of a typed tool.

:class:`TypeSchemas` translates one annotation at a time, sharing one ``$defs``
between them (a recursive TypedDict or dataclass goes there, pydantic models'
own ``$defs`` are merged in, renamed on a clash). Scalars, ``Literal``, unions,
lists, ``dict[str, ...]``, enums, TypedDicts, dataclasses, pydantic models and
the typed leaves (``datetime``, ``UUID``, ``Decimal``, paths...) have a schema;
anything else is a :class:`RegistrationError` naming where it was found. The
values themselves are converted by ``_convert``; this module only describes them.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    ForwardRef,
    Literal,
    NoReturn,
    NotRequired,
    Required,
    TypeVar,
    get_args,
    get_origin,
)

from ._annotations import (
    ARRAYS,
    OBJECTS,
    SETS,
    UNIONS,
    is_any_json,
    is_dataclass_type,
    is_enum,
    is_model,
    leaf_kind,
    leaf_schema,
    scalar,
    strip,
)
from ._convert import NO_DEFAULT, converter, json_default
from ._docstring import parse_docstring
from ._exceptions import RegistrationError
from ._fastcheck import compile_fast_check
from ._types import ToolRunContext

__all__ = ["TypeSchemas", "accepts_default"]


def accepts_default(schema: dict[str, Any], defs: dict[str, Any], value: object) -> bool:
    """Whether ``value`` is valid against ``schema`` (with ``defs``): a default worth showing.

    A default that breaks its own schema (``x: int = None``) would mislead the model.
    """
    root = {**schema, "$defs": defs} if defs else schema
    fast = compile_fast_check(root)
    if fast is not None and fast(value):
        return True  # without loading jsonschema, as registration does for plain schemas
    import jsonschema

    return bool(jsonschema.Draft202012Validator(root).is_valid(value))


class TypeSchemas:
    """Translates annotations into JSON Schema sharing one ``$defs``.

    ``serialization`` selects the result side: a dataclass then lists every
    field (all present in a returned instance), a pydantic model gives its
    serialization schema and a ``Decimal`` is always a string.
    """

    def __init__(self, tool: str, *, serialization: bool) -> None:
        self.tool = tool
        self.serialization = serialization
        self.defs: dict[str, dict[str, Any]] = {}
        self._def_names: dict[type, str] = {}
        self._active: list[type] = []

    def _fail(self, where: str, problem: str) -> NoReturn:
        raise RegistrationError(self.tool, f"{where}: {problem}")

    def schema(self, tp: Any, where: str) -> dict[str, Any]:
        origin, args = get_origin(tp), get_args(tp)
        if origin is Annotated:
            schema = dict(self.schema(args[0], where))
            for item in tp.__metadata__:
                if isinstance(item, str):
                    schema["description"] = item
                elif isinstance(item, Mapping):
                    schema.update(item)
            return schema
        if origin is Required or origin is NotRequired:
            self._fail(where, f"{_show(tp)}: Required/NotRequired only apply to TypedDict keys")
        if isinstance(tp, typing.NewType):
            return self.schema(tp.__supertype__, where)
        kind = scalar(tp)
        if kind is not None:
            return {"type": kind}
        leaf = leaf_kind(tp)
        if leaf is not None:
            return leaf_schema(leaf, serialization=self.serialization)
        if is_any_json(tp):
            return {}
        if origin is Literal:
            return self._literal(args, where)
        if origin in UNIONS:
            return self._union(args, where)
        container = origin if origin is not None else tp
        if container in ARRAYS:
            schema = {"type": "array"}
            if args:
                schema["items"] = self.schema(args[0], f"{where} (list item)")
            return schema
        if container in OBJECTS:
            return self._mapping(args, where)
        if container is tuple:
            self._fail(where, f"{_show(tp)}: JSON has no tuples; use list[...]")
        if container in SETS:
            self._fail(where, f"{_show(tp)}: JSON has no sets; use list[...]")
        if container in (bytes, bytearray, memoryview):
            self._fail(where, f"{_show(tp)} is not JSON; use str (for example base64 text)")
        if isinstance(tp, ForwardRef | str):
            self._fail(where, f"unresolved forward reference {_show(tp)}")
        if isinstance(tp, TypeVar) or (
            origin is not None and (typing.is_typeddict(origin) or is_dataclass_type(origin))
        ):
            self._fail(where, f"{_show(tp)}: generic types are not supported; use a concrete type")
        if typing.is_typeddict(tp):
            return self._typeddict(tp, where)
        if is_enum(tp):
            return self._enum(tp, where)
        if is_model(tp):
            return self._model(tp, where)
        if is_dataclass_type(tp):
            return self._dataclass(tp, where)
        if tp is ToolRunContext:
            self._fail(where, "ToolRunContext is injected and can only be a whole parameter")
        self._fail(
            where,
            f"{_show(tp)} has no JSON Schema (use str, int, float, bool, None, list, "
            "dict[str, ...], Literal, an Enum, a TypedDict, a dataclass, a pydantic model, "
            "datetime, date, time, UUID, Decimal or a Path)",
        )

    def _literal(self, values: tuple[Any, ...], where: str) -> dict[str, Any]:
        kinds: list[str] = []
        for value in values:
            kind = scalar(type(value))
            if kind is None or kind == "number":
                self._fail(
                    where, f"literal {value!r}: only str, int, bool and None literals are JSON"
                )
            if kind not in kinds:
                kinds.append(kind)
        schema: dict[str, Any] = {"type": kinds[0]} if len(kinds) == 1 else {}
        schema["enum"] = list(values)
        return schema

    def _union(self, members: tuple[Any, ...], where: str) -> dict[str, Any]:
        schemas = [self.schema(member, where) for member in members]
        if {} in schemas:
            return {}
        kinds: list[str] = []
        for schema in schemas:
            if len(schema) != 1 or not isinstance(schema.get("type"), str):
                return {"anyOf": schemas}
            if schema["type"] not in kinds:
                kinds.append(schema["type"])
        return {"type": kinds}

    def _mapping(self, args: tuple[Any, ...], where: str) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object"}
        if not args:
            return schema
        key, value = args
        key = strip(key)
        if get_origin(key) is Literal and all(type(k) is str for k in get_args(key)):
            schema["propertyNames"] = {"enum": list(get_args(key))}
        elif key is not str:
            self._fail(
                where, f"{_show(args[0])} keys: JSON object keys are strings; use dict[str, ...]"
            )
        values = self.schema(value, f"{where} (dict value)")
        if values:
            schema["additionalProperties"] = values
        return schema

    def _enum(self, tp: type[enum.Enum], where: str) -> dict[str, Any]:
        if issubclass(tp, enum.Flag):
            self._fail(where, f"{tp.__qualname__} is a Flag; combinations have no JSON form")
        values = [member.value for member in tp]
        if not values:
            self._fail(where, f"enum {tp.__qualname__} has no members")
        kinds = {type(value) for value in values}
        if not kinds <= {str, int}:
            self._fail(where, f"enum {tp.__qualname__} values must be str or int")
        schema: dict[str, Any] = {"title": tp.__name__}
        if len(kinds) == 1:
            schema["type"] = "string" if kinds == {str} else "integer"
        schema["enum"] = values
        return schema

    def _typeddict(self, tp: type, where: str) -> dict[str, Any]:
        def keys(hints: dict[str, Any]) -> list[_Key]:
            return [
                _Key(key, _unwrap_required(hint), _is_required(tp, key, hint))
                for key, hint in hints.items()
            ]

        return self._record(tp, where, "key", keys)

    def _dataclass(self, tp: type, where: str) -> dict[str, Any]:
        def keys(hints: dict[str, Any]) -> list[_Key]:
            if any(isinstance(hint, dataclasses.InitVar) for hint in hints.values()):
                self._fail(where, f"{tp.__qualname__} has an InitVar, which JSON cannot pass")
            out: list[_Key] = []
            for field in dataclasses.fields(tp):
                if self.serialization:
                    out.append(_Key(field.name, hints[field.name], True))
                elif field.init:
                    default = _field_default(field)
                    required = (
                        field.default is dataclasses.MISSING
                        and field.default_factory is dataclasses.MISSING
                    )
                    out.append(_Key(field.name, hints[field.name], required, default))
            return out

        return self._record(tp, where, "field", keys)

    def _record(
        self,
        tp: type,
        where: str,
        part: str,
        keys: Callable[[dict[str, Any]], list[_Key]],
    ) -> dict[str, Any]:
        """A closed object schema for a TypedDict or dataclass (``$defs`` when recursive)."""
        known = self._def_names.get(tp)
        if known is not None:
            return {"$ref": f"#/$defs/{known}"}
        if tp in self._active:
            # Recursion: the type goes to $defs once its schema is complete.
            return {"$ref": f"#/$defs/{self._def_name(tp)}"}
        try:
            hints = typing.get_type_hints(tp, include_extras=True)
        except Exception as exc:
            self._fail(where, f"cannot resolve the {part}s of {tp.__qualname__}: {exc}")
        doc = parse_docstring(_own_doc(tp))
        properties: dict[str, Any] = {}
        required: list[str] = []
        self._active.append(tp)
        try:
            for key in keys(hints):
                prop = self.schema(key.hint, f"{where} ({part} {key.name!r} of {tp.__name__})")
                if key.name in doc.params:
                    prop = {**prop, "description": doc.params[key.name]}
                if key.default is not NO_DEFAULT:
                    default = json_default(key.default, converter(key.hint, decode=False))
                    if default is not NO_DEFAULT and accepts_default(prop, self.defs, default):
                        prop = {**prop, "default": default}
                properties[key.name] = prop
                if key.required:
                    required.append(key.name)
        finally:
            self._active.pop()
        schema: dict[str, Any] = {"title": tp.__name__, "type": "object"}
        if doc.description:
            schema["description"] = doc.description
        schema["properties"] = properties
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        name = self._def_names.get(tp)
        if name is None:
            return schema
        self.defs[name] = schema
        return {"$ref": f"#/$defs/{name}"}

    def _model(self, tp: Any, where: str) -> dict[str, Any]:
        """The model's own JSON Schema, its ``$defs`` merged into the tool's."""
        mode = "serialization" if self.serialization else "validation"
        try:
            generator = _model_schema_generator()
            schema = copy.deepcopy(tp.model_json_schema(mode=mode, schema_generator=generator))
        except Exception as exc:
            reason = str(exc).split("\n\n")[0]  # not pydantic's "For further information" link
            self._fail(where, f"pydantic cannot give {tp.__qualname__} a JSON Schema: {reason}")
        if not isinstance(schema, dict):
            self._fail(where, f"{tp.__qualname__}.model_json_schema() is not an object")
        defs: dict[str, Any] = schema.pop("$defs", None) or {}
        taken = set(self.defs) | set(self._def_names.values())
        # Two models may each call a different class ``Item``: if any name is taken
        # by something else, every taken name of this model moves to a fresh one.
        if any(name in taken and self.defs.get(name) != sub for name, sub in defs.items()):
            renames = {name: self._free_name(name) for name in defs if name in taken}
            schema = dict(_rename_refs(schema, renames))
            defs = {
                renames.get(name, name): _rename_refs(sub, renames) for name, sub in defs.items()
            }
        self.defs.update(defs)
        return schema

    def _free_name(self, wanted: str) -> str:
        taken = set(self.defs) | set(self._def_names.values())
        name, n = wanted, 1
        while name in taken:
            n += 1
            name = f"{wanted}_{n}"
        return name

    def _def_name(self, tp: type) -> str:
        name = self._free_name(tp.__name__)
        self._def_names[tp] = name
        return name


@dataclass(frozen=True, slots=True)
class _Key:
    """One key of a record: its name, type, whether it is required and its default."""

    name: str
    hint: Any
    required: bool
    default: Any = NO_DEFAULT


_MODEL_SCHEMA_GENERATOR: list[Any] = []


def _model_schema_generator() -> Any:
    """Pydantic's schema generator, with every field of a dumped model required.

    ``model_dump`` writes each field, defaults included, so a result's schema (and
    the SDK's TypedDict for it) should not call them optional. Built on first use:
    a model exists, so pydantic is already imported.
    """
    if not _MODEL_SCHEMA_GENERATOR:
        from pydantic.json_schema import GenerateJsonSchema

        class ResultFieldsRequired(GenerateJsonSchema):
            def field_is_required(self, field: Any, total: bool) -> bool:
                if self.mode == "serialization" and field["type"] != "typed-dict-field":
                    return field.get("serialization_exclude_if") is None
                return bool(super().field_is_required(field, total))

        _MODEL_SCHEMA_GENERATOR.append(ResultFieldsRequired)
    return _MODEL_SCHEMA_GENERATOR[0]


def _field_default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory in (list, dict):  # an empty container; others may not be pure
        return field.default_factory()
    return NO_DEFAULT


def _own_doc(tp: type) -> str | None:
    """The docstring the author wrote: ``@dataclass`` invents one (its signature) otherwise."""
    doc = tp.__doc__
    if doc and is_dataclass_type(tp):
        try:
            invented = tp.__name__ + str(inspect.signature(tp)).replace(" -> None", "")
        except (TypeError, ValueError):
            return doc
        if doc == invented:
            return None
    return doc


def _rename_refs(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, dict):
        out = {k: _rename_refs(v, renames) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in renames:
            out["$ref"] = f"#/$defs/{renames[ref[8:]]}"
        return out
    if isinstance(node, list):
        return [_rename_refs(v, renames) for v in node]
    return node


def _unwrap_required(hint: Any) -> Any:
    """A TypedDict key's type without its ``Required``/``NotRequired`` marker."""
    origin = get_origin(hint)
    if origin is Required or origin is NotRequired:
        return get_args(hint)[0]
    if origin is Annotated:
        inner = _unwrap_required(get_args(hint)[0])
        return Annotated[(inner, *hint.__metadata__)]
    return hint


def _is_required(tp: type, key: str, hint: Any) -> bool:
    # ``__required_keys__`` misses Required/NotRequired written as strings
    # (``from __future__ import annotations``) on 3.11, so the resolved marker wins.
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    origin = get_origin(hint)
    if origin is Required:
        return True
    if origin is NotRequired:
        return False
    return key in getattr(tp, "__required_keys__", frozenset())


def _show(tp: object) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    if isinstance(tp, ForwardRef):
        return repr(tp.__forward_arg__)
    return repr(tp).replace("typing.", "")
