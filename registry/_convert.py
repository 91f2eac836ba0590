"""Converting values at a typed tool's boundary: JSON -> Python for arguments, back for results.

A converter exists only for annotations that need one (``None`` is the
identity, so plain JSON tools pay nothing). Decoding builds what the body's
annotations promise — enum members, ``int`` for integral floats, ``datetime``
and the other typed values, dataclass and pydantic model instances — and an
argument that cannot become one raises :class:`ConversionError` with the path
of every bad value. Encoding turns those values back into their JSON form;
anything else passes through for the output schema to judge.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import typing
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Literal, TypeAlias, get_args, get_origin

from ._annotations import (
    ARRAYS,
    DECIMAL_PATTERN,
    OBJECTS,
    is_any_json,
    is_dataclass_type,
    is_enum,
    is_model,
    leaf_kind,
    scalar,
    strip,
)
from ._exceptions import ConversionError, NotJsonError, ValuePath
from ._json import snapshot_json

__all__ = ["NO_DEFAULT", "ConversionError", "Convert", "converter", "json_default"]

Convert: TypeAlias = Callable[[Any], Any]
Path: TypeAlias = ValuePath

_DECIMAL = re.compile(DECIMAL_PATTERN)
_RECORD_ERRORS = (ValueError, TypeError, AssertionError)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


# --------------------------------------------------------------------------- which types convert


def needs(tp: Any, decode: bool, seen: set[type]) -> bool:
    """Whether values of ``tp`` need converting (typed values and records both ways)."""
    tp = strip(tp)
    if is_enum(tp) or leaf_kind(tp) is not None or is_model(tp) or is_dataclass_type(tp):
        return True
    if typing.is_typeddict(tp):
        if tp in seen:
            return False
        seen.add(tp)
        return any(needs(h, decode, seen) for h in typing.get_type_hints(tp).values())
    if is_any_json(tp) or get_origin(tp) is Literal:
        return False
    if tp is int:
        return decode
    return any(needs(arg, decode, seen) for arg in get_args(tp))


def converter(tp: Any, *, decode: bool) -> Convert | None:
    """JSON -> Python (``decode``) or Python -> JSON for ``tp``; ``None`` when identity."""
    if not needs(tp, decode, set()):
        return None
    return _build(tp, decode, {})


def _to_int(value: Any) -> Any:
    # JSON Schema's "integer" admits 2.0; an ``int`` annotation promises an int.
    return int(value) if type(value) is float else value


def _build(tp: Any, decode: bool, memo: dict[type, list[Convert]]) -> Convert:
    tp = strip(tp)
    if tp is int:
        return _to_int
    if is_enum(tp):
        if decode:
            # The schema admitted only member values, so the lookup cannot fail.
            return tp
        enum_type = tp
        return lambda value: value.value if isinstance(value, enum_type) else value
    kind = leaf_kind(tp)
    if kind is not None:
        return _leaf_decoder(tp, kind) if decode else _leaf_encoder(kind)
    if is_model(tp):
        return _model_decoder(tp) if decode else _model_encoder(tp)
    if is_dataclass_type(tp):
        return _dataclass_converter(tp, decode, memo)
    origin, args = get_origin(tp), get_args(tp)
    if origin in ARRAYS:
        return _list_converter(_build(args[0], decode, memo))
    if origin in OBJECTS:
        return _dict_converter(_build(args[1], decode, memo))
    if typing.is_typeddict(tp):
        return _typeddict_converter(tp, decode, memo)
    return _union_converter(args, decode, memo)


def _list_converter(item: Convert) -> Convert:
    def convert_list(value: Any) -> Any:
        if not isinstance(value, list):
            return value
        out: list[Any] = []
        try:
            for x in value:
                out.append(item(x))
        except ConversionError as exc:
            raise exc.inside(len(out)) from None
        return out

    return convert_list


def _dict_converter(inner: Convert) -> Convert:
    def convert_dict(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        key = ""
        try:
            for key, x in value.items():
                out[key] = inner(x)
        except ConversionError as exc:
            raise exc.inside(key) from None
        return out

    return convert_dict


def _typeddict_converter(tp: type, decode: bool, memo: dict[type, list[Convert]]) -> Convert:
    cell = memo.get(tp)
    if cell is None:
        cell = memo[tp] = []
        fields = {
            key: _build(hint, decode, memo)
            for key, hint in typing.get_type_hints(tp).items()
            if needs(hint, decode, set())
        }

        def convert(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            out: dict[str, Any] = {}
            for key, x in value.items():
                field = fields.get(key)
                if field is None:
                    out[key] = x
                    continue
                try:
                    out[key] = field(x)
                except ConversionError as exc:
                    raise exc.inside(key) from None
            return out

        cell.append(convert)
    # Late-bound so a recursive record can refer to its own converter.
    return lambda value: cell[0](value)


# --------------------------------------------------------------------------- unions


def _union_converter(
    args: tuple[Any, ...], decode: bool, memo: dict[type, list[Convert]]
) -> Convert:
    # 2.0 stays a float when the union also admits float.
    has_float = any(strip(member) is float for member in args)
    members = [
        (_matcher(member, decode), _build(member, decode, memo))
        for member in args
        if needs(member, decode, set()) and not (has_float and strip(member) is int)
    ]
    plain = [strip(member) for member in args if not needs(member, decode, set())]

    def convert_union(value: Any) -> Any:
        failed: ConversionError | None = None
        for matches, convert in members:
            if matches(value):
                try:
                    return convert(value)
                except ConversionError as exc:
                    failed = failed or exc
        # ``UUID | str`` given "abc": not a UUID, but a fine str.
        if failed is not None and not any(_plain_accepts(p, value) for p in plain):
            raise failed
        return value

    return convert_union


def _matcher(member: Any, decode: bool) -> Callable[[Any], bool]:
    """Whether a value belongs to one union member (one that needs converting)."""
    member = strip(member)
    if member is int:
        return lambda value: type(value) is float
    if is_enum(member):
        if not decode:
            enum_type = member
            return lambda value: isinstance(value, enum_type)
        values = [m.value for m in member]
        return lambda value: type(value) in (str, int) and value in values
    kind = leaf_kind(member)
    if kind is not None:
        if not decode:
            exact: type = member
            if kind == "date":  # a datetime is a date too, but not one a date member takes
                return lambda value: isinstance(value, exact) and not isinstance(value, dt.datetime)
            return lambda value: isinstance(value, exact)
        if kind == "decimal":
            return lambda value: type(value) in (str, int, float)
        return lambda value: type(value) is str
    if is_model(member) or is_dataclass_type(member):
        if not decode:
            record: type = member
            return lambda value: isinstance(value, record)
        if getattr(member, "__pydantic_root_model__", False):
            return lambda value: True
    if get_origin(member) in ARRAYS:
        return lambda value: isinstance(value, list)
    return lambda value: isinstance(value, dict)


def _plain_accepts(member: Any, value: Any) -> bool:
    """Whether a union member that needs no conversion takes ``value`` as it is."""
    if is_any_json(member):
        return True
    kind = scalar(member)
    if kind is not None:
        t = type(value)
        return {
            "string": t is str,
            "integer": t is int,
            "number": t is int or t is float,
            "boolean": t is bool,
            "null": value is None,
        }[kind]
    origin = get_origin(member)
    if origin is Literal:
        return any(type(v) is type(value) and v == value for v in get_args(member))
    if member in ARRAYS or origin in ARRAYS:
        return isinstance(value, list)
    return isinstance(value, dict)


# --------------------------------------------------------------------------- typed values


def _leaf_decoder(tp: Any, kind: str) -> Convert:
    if kind == "decimal":
        return _decimal_decoder(tp)
    if kind == "path":

        def decode_path(value: Any) -> Any:
            if type(value) is not str:
                raise ConversionError(f"expected a path string, got {_kind(value)}")
            if not value or "\0" in value:
                raise ConversionError(f"{_show(value)} is not a path")
            return tp(value)

        return decode_path
    if kind == "uuid":

        def decode_uuid(value: Any) -> Any:
            if type(value) is not str:
                raise ConversionError(f"expected a UUID string, got {_kind(value)}")
            try:
                return tp(value)
            except ValueError:
                raise ConversionError(
                    f"{_show(value)} is not a UUID (e.g. '123e4567-e89b-12d3-a456-426614174000')"
                ) from None

        return decode_uuid
    what, example = {
        "datetime": ("a date-time", "2024-05-01T09:30:00+00:00"),
        "date": ("a date", "2024-05-01"),
        "time": ("a time", "09:30:00"),
    }[kind]
    parse = tp.fromisoformat

    def decode_iso(value: Any) -> Any:
        if type(value) is not str:
            raise ConversionError(f"expected {what} string, got {_kind(value)}")
        try:
            parsed = parse(value)
        except ValueError as exc:
            reason = str(exc)
            detail = "" if reason.startswith("Invalid isoformat") else f": {reason}"
            raise ConversionError(
                f"{_show(value)} is not {what}{detail} (ISO 8601, e.g. {example!r})"
            ) from None
        if kind == "datetime" and len(value) <= 10:
            # Every ISO 8601 date-time with a time is longer: this one is a bare date,
            # and midnight in which zone is exactly what the annotation asks to say.
            raise ConversionError(
                f"{_show(value)} is a date without a time; a date-time needs one (e.g. {example!r})"
            )
        return parsed

    return decode_iso


def _decimal_decoder(tp: Any) -> Convert:
    def decode_decimal(value: Any) -> Any:
        t = type(value)
        if t is str:
            if not _DECIMAL.match(value):
                raise ConversionError(f"{_show(value)} is not a decimal number (e.g. '12.50')")
            return tp(value)
        if t is int:
            return tp(value)
        if t is float:
            # The shortest repr is what the caller wrote: 0.1 -> Decimal("0.1").
            return tp(repr(value))
        raise ConversionError(f"expected a decimal number or string, got {_kind(value)}")

    return decode_decimal


def _leaf_encoder(kind: str) -> Convert:
    if kind == "datetime":
        return lambda value: value.isoformat() if isinstance(value, dt.datetime) else value
    if kind == "date":

        def encode_date(value: Any) -> Any:
            if isinstance(value, dt.datetime):
                raise ConversionError(
                    f"a datetime ({value.isoformat()}) where a date is declared; return its .date()"
                )
            return value.isoformat() if isinstance(value, dt.date) else value

        return encode_date
    if kind == "time":
        return lambda value: value.isoformat() if isinstance(value, dt.time) else value
    if kind == "uuid":
        return lambda value: str(value) if isinstance(value, uuid.UUID) else value
    if kind == "path":
        return lambda value: str(value) if isinstance(value, PurePath) else value

    def encode_decimal(value: Any) -> Any:
        if not isinstance(value, Decimal):
            return value
        if not value.is_finite():
            raise ConversionError(f"Decimal({str(value)!r}) has no JSON form")
        return format(value, "f")  # plain notation: Decimal("1E+3") -> "1000"

    return encode_decimal


# --------------------------------------------------------------------------- records


def _dataclass_converter(tp: type, decode: bool, memo: dict[type, list[Convert]]) -> Convert:
    known = memo.get(tp)
    if known is not None:
        return lambda value: known[0](value)
    cell: list[Convert] = []
    memo[tp] = cell
    hints = typing.get_type_hints(tp)
    fields = [
        (
            f.name,
            _build(hints[f.name], decode, memo) if needs(hints[f.name], decode, set()) else None,
        )
        for f in dataclasses.fields(tp)
        if f.init or not decode
    ]
    name = tp.__name__

    def decode_dataclass(value: Any) -> Any:
        if not isinstance(value, dict):
            raise ConversionError(f"expected an object for {name}, got {_kind(value)}")
        kwargs: dict[str, Any] = {}
        for key, convert in fields:
            if key in value:
                item = value[key]
                if convert is not None:
                    try:
                        item = convert(item)
                    except ConversionError as exc:
                        raise exc.inside(key) from None
                kwargs[key] = item
        if len(kwargs) < len(value):
            unknown = ", ".join(repr(k) for k in value if k not in kwargs)
            raise ConversionError(f"{name} has no field {unknown}")
        try:
            return tp(**kwargs)
        except _RECORD_ERRORS as exc:
            # __post_init__ checks are the dataclass's own validation (and a pydantic
            # dataclass's validators raise its ValidationError, with a path per error).
            if callable(getattr(exc, "errors", None)):
                raise ConversionError(issues=_pydantic_issues(exc)) from None
            raise ConversionError(f"{name}: {_describe(exc)}") from None

    def encode_dataclass(value: Any) -> Any:
        if not isinstance(value, tp):
            return value
        out: dict[str, Any] = {}
        for key, convert in fields:
            item = getattr(value, key)
            if convert is not None:
                try:
                    item = convert(item)
                except ConversionError as exc:
                    raise exc.inside(key) from None
            out[key] = item
        return out

    cell.append(decode_dataclass if decode else encode_dataclass)
    return lambda value: cell[0](value)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def _model_decoder(model: Any) -> Convert:
    validate = model.model_validate

    def decode_model(value: Any) -> Any:
        try:
            return validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ConversionError(issues=_pydantic_issues(exc)) from None
        except TypeError as exc:
            raise ConversionError(f"{model.__name__}: {_describe(exc)}") from None

    return decode_model


def _pydantic_issues(exc: Exception) -> list[tuple[Path, str]]:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return [((), _describe(exc))]
    issues: list[tuple[Path, str]] = []
    for error in errors(include_url=False):
        message = str(error.get("msg", "invalid"))
        given = error.get("input")
        if error.get("type") != "missing" and (
            given is None or type(given) in (str, int, float, bool)
        ):
            message = f"{message}, got {_show(given)}"
        loc = tuple(p for p in error.get("loc", ()) if isinstance(p, str | int))
        issues.append((loc, message))
    return issues or [((), _describe(exc))]


def _model_encoder(model: Any) -> Convert:
    def encode_model(value: Any) -> Any:
        if not isinstance(value, model):
            return value
        try:
            # by_alias: the output schema pydantic wrote names the aliases.
            return value.model_dump(mode="json", by_alias=True)
        except (ValueError, TypeError) as exc:
            raise ConversionError(f"{type(value).__name__}: {_describe(exc)}") from None

    return encode_model


# --------------------------------------------------------------------------- defaults

#: What :func:`json_default` gives for a default with no JSON form (not shown).
NO_DEFAULT: Any = object()


def json_default(value: object, encode: Convert | None) -> object:
    """The JSON form of a parameter's or field's default (``encode`` first), else :data:`NO_DEFAULT`."""
    try:
        return snapshot_json(value if encode is None else encode(value))
    except (NotJsonError, ConversionError):
        return NO_DEFAULT
