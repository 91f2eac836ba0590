"""Checking definitions at registration and values at call time (jsonschema)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._exceptions import RegistrationError
from ._fastcheck import Check, compile_fast_check
from ._json import NotJsonError, snapshot_json
from ._metaschema import plainly_valid
from ._suspension import body_may_suspend
from ._types import ToolAnnotations, ToolDefinition

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# ``jsonschema`` (and ``referencing``) load only when a schema or a value needs
# them: a plain schema is proven valid by ``_metaschema`` and most values pass
# the fast check, so a tool set registers and runs without paying their import.

__all__ = ["CompiledTool", "compile_definition", "describe_violation", "validate_name"]

RESERVED_NAMES = frozenset({"run_code"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_NAME = 128


class CompiledSchema:
    """A JSON Schema compiled once: a fast pre-check, and the ``jsonschema`` validator.

    The validator is built the first time a value needs it.
    """

    __slots__ = ("_validator", "fast", "schema")

    def __init__(self, schema: Any, fast: Check | None, validator: Validator | None = None) -> None:
        self.schema = schema
        self.fast = fast
        self._validator = validator

    @property
    def validator(self) -> Validator:
        """The ``jsonschema`` validator of :attr:`schema` (draft 2020-12 unless it says)."""
        if self._validator is None:
            import jsonschema

            cls = jsonschema.validators.validator_for(
                self.schema, default=jsonschema.Draft202012Validator
            )
            self._validator = cls(self.schema)
        return self._validator

    def is_valid(self, instance: Any) -> bool:
        if self.fast is not None and self.fast(instance):
            return True
        try:
            return bool(self.validator.is_valid(instance))
        except Exception:  # an unevaluable schema never validates anything
            return False


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A registered definition with its validators compiled once."""

    definition: ToolDefinition
    parameters: CompiledSchema
    output: CompiledSchema
    #: Whether the body may suspend (see ``_suspension``): if not, it runs without a cancel scope.
    body_may_suspend: bool = True

    @property
    def reads_arguments_after(self) -> bool:
        """Whether the definition's own hooks read the arguments after the body ran."""
        definition = self.definition
        output = definition.output
        return (
            output.render is not None
            or output.meta is not None
            or definition.finalize_content is not None
        )


def validate_name(name: object) -> str:
    """Return ``name`` if it can name a tool, else raise :class:`RegistrationError`."""
    if not isinstance(name, str) or not name or not name.strip():
        raise RegistrationError(name, "the name must be a non-empty string")
    if name != name.strip() or _CONTROL.search(name):
        raise RegistrationError(
            name, "the name must not have surrounding space or control characters"
        )
    if len(name) > _MAX_NAME:
        raise RegistrationError(name, f"the name is longer than {_MAX_NAME} characters")
    return name


def _compile_schema(name: str, what: str, schema: object) -> CompiledSchema:
    if not isinstance(schema, Mapping):
        raise RegistrationError(name, f"the {what} schema must be a JSON object")
    try:
        plain = snapshot_json(dict(schema))
    except NotJsonError as exc:
        raise RegistrationError(name, f"the {what} schema is not lossless JSON: {exc}") from exc
    if plainly_valid(plain):
        return CompiledSchema(plain, compile_fast_check(plain))
    import jsonschema

    cls = jsonschema.validators.validator_for(plain, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(plain)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise RegistrationError(
            name, f"the {what} schema is invalid at {where}: {exc.message}"
        ) from exc
    unresolved = _unresolvable_ref(plain)
    if unresolved is not None:
        # jsonschema resolves ``$ref`` lazily and would raise at call time instead.
        raise RegistrationError(name, f"the {what} schema has an unresolvable $ref {unresolved!r}")
    return CompiledSchema(plain, compile_fast_check(plain), cls(plain))


def _unresolvable_ref(schema: Any) -> str | None:
    """The first ``$ref`` that jsonschema could not resolve (no remote retrieval), if any."""
    import referencing.exceptions
    import referencing.jsonschema
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]

    dialect = schema.get("$schema", "") if isinstance(schema, dict) else ""
    specification = referencing.jsonschema.specification_with(
        dialect, default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(schema)
    base = root.id() or ""
    resolver = SPECIFICATIONS.with_resource(base, root).resolver(base_uri=base)
    pending = [(resolver, root)]
    while pending:
        parent, resource = pending.pop()
        here = parent.in_subresource(resource)
        ref = resource.contents.get("$ref") if isinstance(resource.contents, dict) else None
        if isinstance(ref, str):
            try:
                here.lookup(ref)
            except referencing.exceptions.Unresolvable:
                return ref
        pending.extend((here, sub) for sub in resource.subresources())
    return None


def compile_definition(definition: object, *, transport: bool = False) -> CompiledTool:
    """Validate a definition and compile its schemas; raise on anything wrong.

    ``transport=True`` admits a reserved name (the ``run_code`` transport that
    ``ptc`` runs through the pipeline without registering it).
    """
    if not isinstance(definition, ToolDefinition):
        raise RegistrationError(
            getattr(definition, "name", definition), "expected a ToolDefinition"
        )
    name = validate_name(definition.name)
    if name in RESERVED_NAMES and not transport:
        raise RegistrationError(name, "the name is reserved for the code-mode transport")
    if not isinstance(definition.description, str):
        raise RegistrationError(name, "the description must be a string")
    parameters = _compile_schema(name, "parameters", definition.parameters)
    root_type = parameters.schema.get("type", "object")
    if root_type != "object":
        raise RegistrationError(name, "the parameters schema must describe an object")
    output = getattr(definition, "output", None)
    if output is None or getattr(output, "schema", None) is None:
        raise RegistrationError(name, "a canonical output declaration with a schema is required")
    output_validator = _compile_schema(name, "output", output.schema)
    if output.render is not None and not callable(output.render):
        raise RegistrationError(name, "output.render must be callable")
    if not callable(definition.execute):
        raise RegistrationError(name, "execute must be an async callable")
    timeout = definition.timeout
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise RegistrationError(name, f"timeout must be a positive finite number, got {timeout!r}")
    safe = definition.concurrency_safe
    if not isinstance(safe, bool) and not callable(safe):
        raise RegistrationError(name, "concurrency_safe must be a bool or a callable")
    if definition.finalize_content is not None and not callable(definition.finalize_content):
        raise RegistrationError(name, "finalize_content must be callable")
    annotations = definition.annotations
    if annotations is not None and not isinstance(annotations, ToolAnnotations):
        raise RegistrationError(name, "annotations must be a ToolAnnotations")
    return CompiledTool(
        definition=definition,
        parameters=parameters,
        output=output_validator,
        body_may_suspend=body_may_suspend(definition.execute),
    )


def describe_violation(compiled: CompiledSchema, instance: Any) -> str | None:
    """``None`` when ``instance`` is valid, else one precise sentence about the worst error."""
    if compiled.fast is not None and compiled.fast(instance):
        return None
    from jsonschema.exceptions import best_match

    try:
        error = best_match(compiled.validator.iter_errors(instance))
    except Exception as exc:  # e.g. a reference only resolvable at validation time
        return f"the schema could not be evaluated: {type(exc).__name__}: {exc}"
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    location = "at $" + where if where else "at the root"
    return f"{error.message} ({location})"
