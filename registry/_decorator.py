"""``define_tool``: a :class:`ToolDefinition` built from a typed function.

The parameter schema comes from the signature, the output schema from the
return annotation and the descriptions from the docstring (Google style;
reST ``:param x:`` and numpy ``Parameters`` sections are understood too).

Choices a tool author should know:

* Arguments reach the function JSON-shaped (lists stay lists, TypedDicts stay
  plain dicts). Two conversions keep annotations honest: ``enum.Enum`` values
  become members (and members in the return value become values again), and an
  integral float such as ``2.0`` — valid JSON Schema ``integer`` — becomes an
  ``int`` where an ``int`` is annotated.
* Docstring notes and warnings stay in the description; examples and the
  ``Args``/``Returns``/``Raises`` sections do not. Documenting a parameter the
  signature lacks is a registration error (stale docs mislead the model). An
  ``Annotated[X, "text"]`` description wins over the docstring's.
* TypedDicts are closed (``additionalProperties: false``): the model may not
  invent keys, and a returned dict with undeclared keys fails as
  ``INVALID_TOOL_OUTPUT``. A recursive TypedDict goes to ``$defs`` and is
  referenced with ``$ref``; all others are inlined.
* A synchronous function runs in a worker thread. Python cannot stop a thread,
  so a cancelled call waits for the function to return; such a function should
  watch ``ctx.signal`` when it can run long.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, MutableSequence, Sequence
from dataclasses import dataclass
from functools import partial
from typing import (
    Annotated,
    Any,
    ForwardRef,
    Literal,
    NoReturn,
    NotRequired,
    Required,
    TypeAlias,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

import anyio.to_thread
import jsonschema

from ._docstring import Docstring, parse_docstring
from ._exceptions import RegistrationError
from ._json import NotJsonError, snapshot_json
from ._types import RenderFn, ToolAnnotations, ToolDefinition, ToolOutput, ToolRunContext
from ._validation import compile_definition

__all__ = ["ToolFunction", "define_tool"]

#: What ``define_tool`` and ``ToolRegistry.tool`` accept: a typed sync or async callable.
ToolFunction: TypeAlias = Callable[..., Any]

Convert: TypeAlias = Callable[[Any], Any]

_SCALARS: tuple[tuple[object, str], ...] = (
    (str, "string"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (None, "null"),
    (type(None), "null"),
)
_ARRAYS = (list, Sequence, MutableSequence)
_OBJECTS = (dict, Mapping, MutableMapping)
_UNIONS = (Union, types.UnionType)
_SETS = (set, frozenset, typing.AbstractSet, typing.MutableSet)
_ASYNC_RETURNS = (Awaitable, typing.Coroutine)


def define_tool(
    fn: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool | Callable[[Any], bool] = False,
    timeout: float | None = None,
    output_schema: Mapping[str, Any] | None = None,
    render: RenderFn | None = None,
    annotations: ToolAnnotations | None = None,
) -> ToolDefinition:
    """Build a tool definition from a typed function.

    Args:
        fn: an ``async def`` or plain function; every parameter is keyword-passable
            and annotated. A parameter annotated ``ToolRunContext`` receives the
            call's context and is not part of the schema.
        name: the tool name; defaults to ``fn.__name__``.
        description: the tool description; defaults to the docstring without its
            ``Args:``/``Returns:``/``Raises:``… sections.
        concurrency_safe: passed through to the definition.
        timeout: passed through to the definition.
        output_schema: overrides the schema derived from the return annotation.
        render: passed through as ``ToolOutput.render``.
        annotations: passed through to the definition (behaviour hints for policy).

    Returns:
        The definition, with schemas already checked by ``jsonschema``.

    Raises:
        RegistrationError: an annotation has no JSON Schema, a parameter kind
            cannot be passed by keyword, the docstring documents an unknown
            parameter, or the resulting definition is invalid.
    """
    tool = name if name is not None else str(getattr(fn, "__name__", type(fn).__name__))
    if inspect.isclass(fn) or not callable(fn):
        raise RegistrationError(tool, f"expected a function, got {fn!r}")
    target = fn if inspect.isroutine(fn) or isinstance(fn, partial) else type(fn).__call__
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise RegistrationError(tool, "a generator cannot be a tool; return a list instead")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise RegistrationError(tool, f"cannot read the signature of {fn!r}: {exc}") from exc
    hints = _resolve_hints(tool, target)
    doc = parse_docstring(inspect.getdoc(target))
    if target is not fn and not doc.description:
        # A callable object: its class docstring describes the tool, but its
        # ``Args:`` belong to the constructor, not to the call.
        doc = Docstring(parse_docstring(inspect.getdoc(fn)).description, doc.params, doc.returns)

    schemas = _Schemas(tool)
    params: list[_Param] = []
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for param in signature.parameters.values():
        where = f"parameter {param.name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise RegistrationError(
                tool, f"{where} ({star}{param.name}) is variadic; a JSON object has named keys only"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise RegistrationError(
                tool, f"{where} is positional-only; tools are called with keyword arguments"
            )
        if param.name not in hints:
            raise RegistrationError(tool, f"{where} has no type annotation")
        hint = hints[param.name]
        if _strip(hint) is ToolRunContext:
            params.append(_Param(param.name, context=True, decode=None))
            continue
        prop = schemas.schema(hint, where)
        text = doc.params.get(param.name)
        if text and "description" not in prop:
            prop = {**prop, "description": text}
        if param.default is param.empty:
            required.append(param.name)
        else:
            default = _json_default(param.default, _converter(hint, decode=False))
            if default is not _NO_DEFAULT and _accepts(prop, schemas.defs, default):
                prop = {**prop, "default": default}
        properties[param.name] = prop
        params.append(_Param(param.name, context=False, decode=_converter(hint, decode=True)))
    unknown = sorted(set(doc.params) - set(signature.parameters))
    if unknown:
        listed = ", ".join(repr(n) for n in unknown)
        raise RegistrationError(
            tool, f"the docstring documents {listed}, which the signature lacks"
        )

    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    parameters["additionalProperties"] = False
    if schemas.defs:
        parameters["$defs"] = schemas.defs

    encode: Convert | None = None
    if output_schema is not None:
        output = dict(output_schema)
    elif "return" not in hints:
        raise RegistrationError(
            tool, "the return annotation is missing; annotate it or pass output_schema"
        )
    else:
        returns = hints["return"]
        if get_origin(returns) in _ASYNC_RETURNS and get_args(returns):
            # A sync function handing back an awaitable: the tool's value is its result.
            returns = get_args(returns)[-1]
        out = _Schemas(tool)
        output = out.schema(returns, "the return annotation")
        if doc.returns and "description" not in output:
            output = {**output, "description": doc.returns}
        if out.defs:
            output["$defs"] = out.defs
        encode = _converter(returns, decode=False)

    definition = ToolDefinition(
        name=tool,
        description=doc.description if description is None else description,
        parameters=parameters,
        output=ToolOutput(schema=output, render=render),
        execute=_make_execute(fn, _is_async(fn, target), tuple(params), encode),
        concurrency_safe=concurrency_safe,
        timeout=timeout,
        annotations=annotations,
    )
    # Fail here, not at a later register(); the reserved-name check stays with
    # register() so ptc may build its transport with this function too.
    compile_definition(definition, transport=True)
    return definition


# --------------------------------------------------------------------------- calling


@dataclass(frozen=True, slots=True)
class _Param:
    name: str
    context: bool
    decode: Convert | None


def _is_async(fn: ToolFunction, target: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)


def _make_execute(
    fn: ToolFunction, is_async: bool, params: tuple[_Param, ...], encode: Convert | None
) -> Callable[[Any, ToolRunContext], Awaitable[Any]]:
    def keywords(args: Any, ctx: ToolRunContext) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise TypeError(f"tool arguments must be an object, got {type(args).__name__}")
        out: dict[str, Any] = {}
        for param in params:
            if param.context:
                out[param.name] = ctx
            elif param.name in args:
                value = args[param.name]
                out[param.name] = value if param.decode is None else param.decode(value)
        return out

    async def execute(args: Any, ctx: ToolRunContext, /) -> Any:
        kwargs = keywords(args, ctx)
        if is_async:
            value = await fn(**kwargs)
        else:
            # Never abandon the thread: a cancelled call returns only once the
            # function has, so no tool code outlives its call.
            value = await anyio.to_thread.run_sync(partial(fn, **kwargs), abandon_on_cancel=False)
            if inspect.isawaitable(value):
                # A sync wrapper around a coroutine function (a decorator without
                # functools' async awareness): finish its work on the event loop.
                value = await value
        return value if encode is None else encode(value)

    return execute


_NO_DEFAULT: Any = object()


def _json_default(value: object, encode: Convert | None) -> object:
    try:
        return snapshot_json(value if encode is None else encode(value))
    except NotJsonError:
        return _NO_DEFAULT


def _accepts(schema: dict[str, Any], defs: dict[str, Any], value: object) -> bool:
    # A default that breaks its own schema (``x: int = None``) would mislead the model.
    root = {**schema, "$defs": defs} if defs else schema
    return bool(jsonschema.Draft202012Validator(root).is_valid(value))


# --------------------------------------------------------------------------- annotations


class _Holder:
    """Carries one annotation so ``get_type_hints`` can resolve it on its own."""

    def __init__(self, annotations: dict[str, Any]) -> None:
        self.__annotations__ = annotations


def _resolve_hints(tool: str, fn: ToolFunction) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        failure = exc
    # Find the annotation that failed so the error can name it.
    raw = getattr(fn, "__annotations__", None)
    if isinstance(raw, Mapping):
        namespace = getattr(inspect.unwrap(fn), "__globals__", {})
        for key, annotation in raw.items():
            try:
                typing.get_type_hints(
                    _Holder({key: annotation}), globalns=namespace, include_extras=True
                )
            except Exception as exc:
                where = "the return annotation" if key == "return" else f"parameter {key!r}"
                raise RegistrationError(
                    tool,
                    f"{where}: cannot resolve {annotation!r} ({type(exc).__name__}: {exc}); "
                    "names in annotations must exist at runtime, not only under TYPE_CHECKING",
                ) from exc
    raise RegistrationError(
        tool, f"cannot resolve the annotations of {fn!r}: {failure}"
    ) from failure


def _strip(tp: Any) -> Any:
    """``tp`` without ``Annotated``, ``Required``/``NotRequired`` and ``NewType`` layers."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated or origin is Required or origin is NotRequired:
            tp = get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        else:
            return tp


def _scalar(tp: object) -> str | None:
    for python, json_type in _SCALARS:
        if tp is python:
            return json_type
    return None


def _is_enum(tp: object) -> typing.TypeGuard[type[enum.Enum]]:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _is_any_json(tp: object) -> bool:
    """Whether ``tp`` is "any JSON value": ``Any``, ``object`` or a JsonValue-like union.

    A recursive alias such as ``registry.JsonValue`` resolves to a union of the
    seven JSON kinds whose containers end in unresolved ``ForwardRef``s.
    """
    if tp is Any or tp is object or isinstance(tp, ForwardRef):
        return True
    if get_origin(tp) not in _UNIONS:
        return False
    kinds: set[str] = set()
    for member in get_args(tp):
        origin, args = get_origin(member), get_args(member)
        kind = _scalar(member)
        if kind is not None:
            kinds.add(kind)
        elif origin in _OBJECTS and len(args) == 2 and args[0] is str and _is_any_json(args[1]):
            kinds.add("object")
        elif origin in _ARRAYS and len(args) == 1 and _is_any_json(args[0]):
            kinds.add("array")
        else:
            return False
    return kinds >= {"string", "boolean", "integer", "number", "null", "object", "array"}


class _Schemas:
    """Translates annotations into JSON Schema sharing one ``$defs``."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
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
        kind = _scalar(tp)
        if kind is not None:
            return {"type": kind}
        if _is_any_json(tp):
            return {}
        if origin is Literal:
            return self._literal(args, where)
        if origin in _UNIONS:
            return self._union(args, where)
        container = origin if origin is not None else tp
        if container in _ARRAYS:
            schema = {"type": "array"}
            if args:
                schema["items"] = self.schema(args[0], f"{where} (list item)")
            return schema
        if container in _OBJECTS:
            return self._mapping(args, where)
        if container is tuple:
            self._fail(where, f"{_show(tp)}: JSON has no tuples; use list[...]")
        if container in _SETS:
            self._fail(where, f"{_show(tp)}: JSON has no sets; use list[...]")
        if container in (bytes, bytearray, memoryview):
            self._fail(where, f"{_show(tp)} is not JSON; use str (for example base64 text)")
        if isinstance(tp, ForwardRef | str):
            self._fail(where, f"unresolved forward reference {_show(tp)}")
        if isinstance(tp, TypeVar) or (origin is not None and typing.is_typeddict(origin)):
            self._fail(where, f"{_show(tp)}: generic types are not supported; use a concrete type")
        if typing.is_typeddict(tp):
            return self._typeddict(tp, where)
        if _is_enum(tp):
            return self._enum(tp, where)
        if tp is ToolRunContext:
            self._fail(where, "ToolRunContext is injected and can only be a whole parameter")
        self._fail(
            where,
            f"{_show(tp)} has no JSON Schema (use str, int, float, bool, None, "
            "list, dict[str, ...], Literal, an Enum or a TypedDict)",
        )

    def _literal(self, values: tuple[Any, ...], where: str) -> dict[str, Any]:
        kinds: list[str] = []
        for value in values:
            kind = _scalar(type(value))
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
        key = _strip(key)
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
        known = self._def_names.get(tp)
        if known is not None:
            return {"$ref": f"#/$defs/{known}"}
        if tp in self._active:
            # Recursion: the type goes to $defs once its schema is complete.
            return {"$ref": f"#/$defs/{self._def_name(tp)}"}
        try:
            hints = typing.get_type_hints(tp, include_extras=True)
        except Exception as exc:
            self._fail(where, f"cannot resolve the keys of {tp.__qualname__}: {exc}")
        doc = parse_docstring(tp.__doc__)
        properties: dict[str, Any] = {}
        required: list[str] = []
        self._active.append(tp)
        try:
            for key, hint in hints.items():
                prop = self.schema(
                    _unwrap_required(hint), f"{where} (key {key!r} of {tp.__name__})"
                )
                if key in doc.params:
                    prop = {**prop, "description": doc.params[key]}
                properties[key] = prop
                if _is_required(tp, key, hint):
                    required.append(key)
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

    def _def_name(self, tp: type) -> str:
        taken = set(self._def_names.values())
        name, n = tp.__name__, 1
        while name in taken:
            n += 1
            name = f"{tp.__name__}_{n}"
        self._def_names[tp] = name
        return name


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


# --------------------------------------------------------------------------- value conversion


def _needs(tp: Any, decode: bool, seen: set[type]) -> bool:
    """Whether values of ``tp`` need converting: enums both ways, ints on the way in."""
    tp = _strip(tp)
    if _is_enum(tp):
        return True
    if typing.is_typeddict(tp):
        if tp in seen:
            return False
        seen.add(tp)
        return any(_needs(h, decode, seen) for h in typing.get_type_hints(tp).values())
    if _is_any_json(tp) or get_origin(tp) is Literal:
        return False
    if tp is int:
        return decode
    return any(_needs(arg, decode, seen) for arg in get_args(tp))


def _converter(tp: Any, *, decode: bool) -> Convert | None:
    """JSON -> Python (``decode``) or Python -> JSON for ``tp``; ``None`` when identity."""
    if not _needs(tp, decode, set()):
        return None
    return _build_converter(tp, decode, {})


def _to_int(value: Any) -> Any:
    # JSON Schema's "integer" admits 2.0; an ``int`` annotation promises an int.
    return int(value) if type(value) is float else value


def _build_converter(tp: Any, decode: bool, memo: dict[type, list[Convert]]) -> Convert:
    tp = _strip(tp)
    if tp is int:
        return _to_int
    if _is_enum(tp):
        if decode:
            # The schema admitted only member values, so the lookup cannot fail.
            return tp
        enum_type = tp
        return lambda value: value.value if isinstance(value, enum_type) else value
    origin, args = get_origin(tp), get_args(tp)
    if origin in _ARRAYS:
        item = _build_converter(args[0], decode, memo)
        return lambda value: [item(x) for x in value] if isinstance(value, list) else value
    if origin in _OBJECTS:
        inner = _build_converter(args[1], decode, memo)
        return lambda value: (
            {k: inner(x) for k, x in value.items()} if isinstance(value, dict) else value
        )
    if typing.is_typeddict(tp):
        return _typeddict_converter(tp, decode, memo)
    # A union: 2.0 stays a float when the union also admits float.
    has_float = any(_strip(member) is float for member in args)
    members = [
        (_matcher(member, decode), _build_converter(member, decode, memo))
        for member in args
        if _needs(member, decode, set()) and not (has_float and _strip(member) is int)
    ]

    def convert_union(value: Any) -> Any:
        for matches, convert in members:
            if matches(value):
                return convert(value)
        return value

    return convert_union


def _typeddict_converter(tp: type, decode: bool, memo: dict[type, list[Convert]]) -> Convert:
    cell = memo.get(tp)
    if cell is None:
        cell = memo[tp] = []
        fields = {
            key: _build_converter(hint, decode, memo)
            for key, hint in typing.get_type_hints(tp).items()
            if _needs(hint, decode, set())
        }

        def convert(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            return {k: fields[k](x) if k in fields else x for k, x in value.items()}

        cell.append(convert)
    # Late-bound so a recursive TypedDict can refer to its own converter.
    return lambda value: cell[0](value)


def _matcher(member: Any, decode: bool) -> Callable[[Any], bool]:
    """Whether a value belongs to one union member (one that needs converting)."""
    member = _strip(member)
    if member is int:
        return lambda value: type(value) is float
    if _is_enum(member):
        if not decode:
            enum_type = member
            return lambda value: isinstance(value, enum_type)
        values = [m.value for m in member]
        return lambda value: type(value) in (str, int) and value in values
    if get_origin(member) in _ARRAYS:
        return lambda value: isinstance(value, list)
    return lambda value: isinstance(value, dict)


# --------------------------------------------------------------------------- docstrings
