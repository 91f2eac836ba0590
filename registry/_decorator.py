"""``define_tool``: a :class:`ToolDefinition` built from a typed function.

The parameter schema comes from the signature, the output schema from the
return annotation and the descriptions from the docstring (Google style;
reST ``:param x:`` and numpy ``Parameters`` sections are understood too).

Choices a tool author should know:

* Arguments reach the function as annotated, results leave as JSON. Lists stay
  lists and TypedDicts plain dicts; an ``enum.Enum`` value becomes its member,
  an integral float such as ``2.0`` (valid JSON Schema ``integer``) an ``int``.
  Typed values are strings in JSON, with a ``format``: ``datetime``
  (``date-time``; a bare date is refused, a naive time stays naive), ``date``,
  ``time``, ``UUID``, ``Path``/``PurePath`` (``path``); a ``Decimal`` argument is
  a number or a plain-notation string (``pattern``), a returned one always that
  string. A dataclass becomes a closed object (its defaults shown, its
  ``__post_init__`` its validation); a pydantic model keeps its own schema
  (``model_json_schema``, its ``$defs`` merged into the tool's) and is built by
  ``model_validate`` and written by ``model_dump(mode="json", by_alias=True)``.
  The body gets instances; what it returns goes back to JSON the same way.
  An argument that cannot be converted (a malformed date, a failing validator)
  is ``INVALID_ARGS``, naming the path of every bad value.
* pydantic is optional: a model is recognised only once the program has
  imported pydantic, and nothing here imports it first.
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

import copy
import dataclasses
import enum
import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
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
    get_args,
    get_origin,
)

import anyio.to_thread

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
from ._convert import ConversionError, Convert, converter
from ._docstring import Docstring, parse_docstring
from ._exceptions import RegistrationError, ToolArgsError, ToolOutputError
from ._fastcheck import compile_fast_check
from ._json import NotJsonError, snapshot_json
from ._types import (
    RenderFn,
    ToolAnnotations,
    ToolDefinition,
    ToolOutput,
    ToolReturn,
    ToolRunContext,
)
from ._validation import compile_definition

__all__ = ["ToolFunction", "define_tool"]

#: What ``define_tool`` and ``ToolRegistry.tool`` accept: a typed sync or async callable.
ToolFunction: TypeAlias = Callable[..., Any]

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

    schemas = _Schemas(tool, serialization=False)
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
        if strip(hint) is ToolRunContext:
            params.append(_Param(param.name, context=True, decode=None))
            continue
        prop = schemas.schema(hint, where)
        text = doc.params.get(param.name)
        if text and "description" not in prop:
            prop = {**prop, "description": text}
        if param.default is param.empty:
            required.append(param.name)
        else:
            default = _json_default(param.default, converter(hint, decode=False))
            if default is not _NO_DEFAULT and _accepts(prop, schemas.defs, default):
                prop = {**prop, "default": default}
        properties[param.name] = prop
        params.append(_Param(param.name, context=False, decode=converter(hint, decode=True)))
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
        out = _Schemas(tool, serialization=True)
        output = out.schema(returns, "the return annotation")
        if doc.returns and "description" not in output:
            output = {**output, "description": doc.returns}
        if out.defs:
            output["$defs"] = out.defs
        encode = converter(returns, decode=False)

    definition = ToolDefinition(
        name=tool,
        description=doc.description if description is None else description,
        parameters=parameters,
        output=ToolOutput(schema=output, render=render),
        execute=_make_execute(tool, fn, _is_async(fn, target), tuple(params), encode),
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
    tool: str,
    fn: ToolFunction,
    is_async: bool,
    params: tuple[_Param, ...],
    encode: Convert | None,
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
                if param.decode is None:
                    out[param.name] = value
                    continue
                try:
                    out[param.name] = param.decode(value)
                except ConversionError as exc:
                    described = exc.inside(param.name).describe()
                    raise ToolArgsError(f"invalid arguments for {tool}: {described}") from None
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
        return value if encode is None else _encode(tool, encode, value)

    return execute


def _encode(tool: str, encode: Convert, value: Any) -> Any:
    content = None
    if type(value) is ToolReturn:
        value, content = value.value, value.content
    try:
        value = encode(value)
    except ConversionError as exc:
        raise ToolOutputError(
            f"{tool} returned a value with no JSON form: {exc.describe()}"
        ) from None
    return value if content is None else ToolReturn(value, content)


_NO_DEFAULT: Any = object()


def _json_default(value: object, encode: Convert | None) -> object:
    try:
        return snapshot_json(value if encode is None else encode(value))
    except (NotJsonError, ConversionError):
        return _NO_DEFAULT


def _accepts(schema: dict[str, Any], defs: dict[str, Any], value: object) -> bool:
    # A default that breaks its own schema (``x: int = None``) would mislead the model.
    root = {**schema, "$defs": defs} if defs else schema
    fast = compile_fast_check(root)
    if fast is not None and fast(value):
        return True  # without loading jsonschema, as registration does for plain schemas
    import jsonschema

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


class _Schemas:
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
                if key.default is not _NO_DEFAULT:
                    default = _json_default(key.default, converter(key.hint, decode=False))
                    if default is not _NO_DEFAULT and _accepts(prop, self.defs, default):
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
    default: Any = _NO_DEFAULT


_MODEL_SCHEMA_GENERATOR: list[Any] = []


def _model_schema_generator() -> Any:
    """pydantic's schema generator, with every field of a dumped model required.

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
    return _NO_DEFAULT


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
