"""``define_tool``: a :class:`ToolDefinition` built from a typed function.

The parameter schema comes from the signature, the output schema from the
return annotation and the descriptions from the docstring (Google style;
reST ``:param x:`` and numpy ``Parameters`` sections are understood too).
The schemas are built by ``_schema_from_types``, the values converted at the
call by ``_convert``; this module puts them together into a definition whose
``execute`` decodes the arguments, calls the function and encodes its result.

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

import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias, get_args, get_origin

import anyio.to_thread

from ._annotations import strip
from ._convert import NO_DEFAULT, ConversionError, Convert, converter, json_default
from ._docstring import Docstring, parse_docstring
from ._exceptions import RegistrationError, ToolArgsError, ToolOutputError
from ._schema_from_types import TypeSchemas, accepts_default
from ._suspension import KnownBody, coroutine_may_suspend
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

    schemas = TypeSchemas(tool, serialization=False)
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
            default = json_default(param.default, converter(hint, decode=False))
            if default is not NO_DEFAULT and accepts_default(prop, schemas.defs, default):
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
        out = TypeSchemas(tool, serialization=True)
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
    # A synchronous function runs in a thread: its call always suspends.
    return _Body(tool, fn, is_async, params, encode)


class _Body(KnownBody):
    """A typed function as a definition's ``execute``: decode, call, encode."""

    __slots__ = ("_encode", "_fn", "_is_async", "_params", "_tool")

    def __init__(
        self,
        tool: str,
        fn: ToolFunction,
        is_async: bool,
        params: tuple[_Param, ...],
        encode: Convert | None,
    ) -> None:
        super().__init__(not is_async or coroutine_may_suspend(fn))
        self._tool = tool
        self._fn = fn
        self._is_async = is_async
        self._params = params
        self._encode = encode

    def __repr__(self) -> str:
        return f"<execute of {self._tool!r}: {self._fn!r}>"

    def _keywords(self, args: Any, ctx: ToolRunContext) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise TypeError(f"tool arguments must be an object, got {type(args).__name__}")
        out: dict[str, Any] = {}
        for param in self._params:
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
                    raise ToolArgsError(
                        f"invalid arguments for {self._tool}: {described}"
                    ) from None
        return out

    async def __call__(self, args: Any, ctx: ToolRunContext, /) -> Any:
        kwargs = self._keywords(args, ctx)
        fn = self._fn
        if self._is_async:
            value = await fn(**kwargs)
        else:
            # Never abandon the thread: a cancelled call returns only once the
            # function has, so no tool code outlives its call.
            value = await anyio.to_thread.run_sync(partial(fn, **kwargs), abandon_on_cancel=False)
            if inspect.isawaitable(value):
                # A sync wrapper around a coroutine function (a decorator without
                # functools' async awareness): finish its work on the event loop.
                value = await value
        encode = self._encode
        return value if encode is None else _encode(self._tool, encode, value)


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
