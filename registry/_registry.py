"""``ToolRegistry``: registration, scopes, restrictions, policy hooks and lookup."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ._exceptions import RegistrationError, RestrictionError, UnknownScopeError
from ._json import clone_json
from ._pipeline import CheckedCall, check_arguments, run_pipeline
from ._policy import (
    ApprovalFn,
    GuardFn,
    PostExecuteFn,
    PreExecuteFn,
    ResultObserver,
    WrapperFn,
)
from ._scopes import Layer, Listener, Restriction, next_key
from ._timeout import timeout_wrapper
from ._types import (
    ExecutionMode,
    ProgressFn,
    ToolAnnotations,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
)
from ._validation import RESERVED_NAMES, CompiledTool, compile_definition, validate_name

if TYPE_CHECKING:
    from ._define import ToolFunction

__all__ = ["ToolRegistry"]

logger = logging.getLogger("registry")

Disposer = Callable[[], None]
F = TypeVar("F", bound="ToolFunction")


@dataclass(frozen=True)
class PolicySet:
    """The hooks that apply to calls in one scope, in registration order."""

    pre: tuple[PreExecuteFn, ...]
    guards: tuple[GuardFn, ...]
    wrappers: tuple[WrapperFn, ...]
    post: tuple[PostExecuteFn, ...]
    observers: tuple[ResultObserver, ...]

    @functools.cached_property
    def wrappers_without_timeout(self) -> tuple[WrapperFn, ...]:
        """The wrappers for a tool with no ``timeout`` (the built-in one has nothing to do)."""
        return tuple(w for w in self.wrappers if w is not timeout_wrapper)

    @functools.cached_property
    def sees_execution_first(self) -> bool:
        """Whether any hook sees (and could mutate) an execution before its body runs."""
        return bool(self.pre or self.guards or self.wrappers_without_timeout)

    @functools.cached_property
    def hooks_around_body(self) -> bool:
        """Whether a pre-execute listener, guard or post-execute listener applies."""
        return bool(self.pre or self.guards or self.post)

    @functools.cached_property
    def sees_execution_after(self) -> bool:
        """Whether any hook sees an execution (and its arguments) after the body ran."""
        return bool(self.post or self.observers)


class ToolRegistry:
    """Tools, scopes, restrictions and the policy pipeline every call goes through.

    Args:
        approval: optional ``async (execution, reason) -> bool | "allow" | "reject" |
            "cancel"`` that services ``Ask`` decisions. Without it, ``Ask`` is denied
            as ``APPROVAL_UNAVAILABLE``.
        enforce_timeouts: install the built-in wrapper that fails a call running
            longer than its definition's ``timeout`` as ``TOOL_TIMEOUT``.

    Every ``register``/``reserve``/``restrict``/``guard``/listener method returns a
    disposer that undoes exactly what it did. Those that name a scope declare it;
    reading by a scope that was never declared (or was disposed) raises
    :class:`UnknownScopeError` instead of showing the global view.
    """

    def __init__(
        self, *, approval: ApprovalFn | None = None, enforce_timeouts: bool = True
    ) -> None:
        self.approval = approval
        self._global = Layer(name=None)
        self._scopes: dict[str, Layer] = {}
        self._pre: list[Listener] = []
        self._guards: list[Listener] = []
        self._wrappers: list[Listener] = []
        self._post: list[Listener] = []
        self._observers: list[Listener] = []
        self._progress: list[Listener] = []
        self._change: dict[int, Callable[[], None]] = {}
        self._version = 0
        self._views: dict[str | None, tuple[int, dict[str, CompiledTool]]] = {}
        self._policies: dict[str | None, tuple[int, PolicySet]] = {}
        self._transports: dict[int, tuple[ToolDefinition, CompiledTool]] = {}
        if enforce_timeouts:
            self.wrap_execute(timeout_wrapper)

    # ------------------------------------------------------------------ scopes

    def add_scope(self, name: str, *, parent: str | None = None) -> Disposer:
        """Declare a scope, optionally under ``parent`` (which must exist).

        Scopes are also created on first use by ``register``/``restrict``/``guard``;
        declaring an existing scope again is allowed only with the same parent.
        """
        if not isinstance(name, str) or not name:
            raise RestrictionError(f"a scope name must be a non-empty string, got {name!r}")
        if parent is not None and parent not in self._scopes:
            raise RestrictionError(f"parent scope {parent!r} of {name!r} does not exist")
        if parent == name:
            raise RestrictionError(f"scope {name!r} cannot be its own parent")
        existing = self._scopes.get(name)
        if existing is not None:
            if existing.parent != parent:
                raise RestrictionError(
                    f"scope {name!r} already exists with parent {existing.parent!r}"
                )
            return _noop
        layer = Layer(name=name, parent=parent)
        self._scopes[name] = layer

        def dispose() -> None:
            if self._scopes.get(name) is layer:
                if any(s.parent == name for s in self._scopes.values()):
                    raise RestrictionError(f"scope {name!r} still has child scopes")
                del self._scopes[name]
                self._changed()

        self._changed()
        return dispose

    def scope_chain(self, scope: str | None) -> list[str]:
        """``scope`` and its ancestors, nearest first (empty for the global view).

        Raises:
            UnknownScopeError: ``scope`` was never declared.
        """
        self.check_scope(scope)
        chain: list[str] = []
        while scope is not None:
            chain.append(scope)
            scope = self._scopes[scope].parent
        return chain

    def check_scope(self, scope: str | None) -> None:
        """Raise :class:`UnknownScopeError` unless ``scope`` is ``None`` or declared.

        Every read by scope (``view``, ``get``, ``definitions``, ``schemas``,
        ``policy``, ``is_admitted``, ``execution_mode``, ``execute``) checks it: a
        typo must not silently show the global view.
        """
        if scope is not None and scope not in self._scopes:
            raise UnknownScopeError(scope, self._scopes)

    def _layer(self, scope: str | None) -> Layer:
        if scope is None:
            return self._global
        if scope not in self._scopes:
            self.add_scope(scope)
        return self._scopes[scope]

    # ------------------------------------------------------------------ registration

    def register(self, definition: ToolDefinition, *, scope: str | None = None) -> Disposer:
        """Register a definition globally or for ``scope`` (shadowing a global one there).

        Raises:
            RegistrationError: the definition is invalid, its name is reserved, or
                the layer already has a tool of that name.
        """
        compiled = compile_definition(definition)
        name = compiled.definition.name
        layer = self._layer(scope)
        if name in layer.tools:
            where = "globally" if scope is None else f"in scope {scope!r}"
            raise RegistrationError(name, f"a tool of that name is already registered {where}")
        layer.tools[name] = compiled
        self._changed()

        def dispose() -> None:
            if layer.tools.get(name) is compiled:
                del layer.tools[name]
                self._changed()

        return dispose

    def tool(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        concurrency_safe: bool | Callable[[Any], bool] = False,
        timeout: float | None = None,
        scope: str | None = None,
        output_schema: dict[str, Any] | None = None,
        render: Any = None,
        annotations: ToolAnnotations | None = None,
    ) -> Any:
        """Decorator: register a typed function as a tool (see :func:`define_tool`).

        The parameter schema comes from the signature (and per-parameter
        descriptions from the docstring's ``Args:`` section), the output schema
        from the return annotation. Async functions are awaited; plain functions
        run in a worker thread. The function is returned unchanged.
        """
        from ._define import define_tool

        def decorate(func: F) -> F:
            self.register(
                define_tool(
                    func,
                    name=name,
                    description=description,
                    concurrency_safe=concurrency_safe,
                    timeout=timeout,
                    output_schema=output_schema,
                    render=render,
                    annotations=annotations,
                ),
                scope=scope,
            )
            return func

        if fn is not None:
            return decorate(fn)
        return decorate

    def reserve(self, name: str, *, scope: str | None = None) -> Disposer:
        """Make ``name`` known (restrictable) in a layer without a visible definition."""
        validate_name(name)
        if name in RESERVED_NAMES:
            raise RestrictionError(f"{name!r} is reserved for the code-mode transport")
        layer = self._layer(scope)
        if name in layer.reserved:
            raise RestrictionError(f"{name!r} is already reserved in this layer")
        key = next_key()
        layer.reserved[name] = key
        self._changed()

        def dispose() -> None:
            if layer.reserved.get(name) == key:
                del layer.reserved[name]
                self._changed()

        return dispose

    def restrict(
        self,
        scope: str,
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
    ) -> Disposer:
        """Mask what ``scope`` inherits (global tools and ancestors' tools).

        Masks intersect. A ``deny`` list admits tools registered later under other
        names; an ``allow`` list excludes them. The scope's own registrations stay
        visible.

        Raises:
            RestrictionError: no scope, an empty filter, or a name that is unknown to
                what the scope inherits, local to the scope, or reserved.
        """
        if scope is None or not isinstance(scope, str):
            raise RestrictionError("restrict() needs a scope; the global layer cannot be masked")
        if allow is None and deny is None:
            raise RestrictionError("an empty restriction: give a non-empty allow or deny list")
        allow_set = None if allow is None else frozenset(_names(allow, "allow"))
        deny_set = frozenset() if deny is None else frozenset(_names(deny, "deny"))
        if allow_set is not None and not allow_set:
            raise RestrictionError("an empty allow list: name at least one tool to keep")
        if deny is not None and not deny_set:
            raise RestrictionError("an empty deny list: name at least one tool to hide")
        layer = self._layer(scope)
        inherited = self._inherited_names(scope)
        for name in sorted((allow_set or frozenset()) | deny_set):
            if name in RESERVED_NAMES:
                raise RestrictionError(
                    f"{name!r} is the reserved transport and cannot be restricted"
                )
            if name not in inherited:
                if name in layer.tools or name in layer.reserved:
                    raise RestrictionError(
                        f"{name!r} is registered in scope {scope!r} itself; "
                        "restrictions apply only to inherited tools"
                    )
                raise RestrictionError(f"unknown tool name {name!r} in restriction of {scope!r}")
        restriction = Restriction(key=next_key(), allow=allow_set, deny=deny_set)
        layer.restrictions.append(restriction)
        self._changed()

        def dispose() -> None:
            if restriction in layer.restrictions:
                layer.restrictions.remove(restriction)
                self._changed()

        return dispose

    def _inherited_names(self, scope: str) -> set[str]:
        names = set(self._global.names())
        for ancestor in self.scope_chain(scope)[1:]:
            names.update(self._scopes[ancestor].names())
        return names

    # ------------------------------------------------------------------ policy hooks

    def on_pre_execute(self, fn: PreExecuteFn, *, scope: str | None = None) -> Disposer:
        """Add a pre-execute listener ``async (execution, next) -> Allow|Deny|Ask|Cancel``."""
        return self._add(self._pre, fn, scope)

    def guard(self, fn: GuardFn, *, scope: str | None = None) -> Disposer:
        """Add a monotonic guard ``(execution) -> reason | GuardDenial | None``."""
        return self._add(self._guards, fn, scope)

    def wrap_execute(self, fn: WrapperFn, *, scope: str | None = None) -> Disposer:
        """Add an around-execute wrapper ``async (dispatch, next) -> result``.

        Wrappers registered earlier are outer; a wrapper may replace only
        ``dispatch.signal``.
        """
        return self._add(self._wrappers, fn, scope)

    def on_post_execute(self, fn: PostExecuteFn, *, scope: str | None = None) -> Disposer:
        """Add a post-execute listener ``async (execution, result, next) -> Accept|Block``."""
        return self._add(self._post, fn, scope)

    def on_result(self, fn: ResultObserver, *, scope: str | None = None) -> Disposer:
        """Add an observer of final results; its failures are logged and ignored."""
        return self._add(self._observers, fn, scope)

    def on_progress(self, fn: ProgressFn, *, scope: str | None = None) -> Disposer:
        """Add a listener ``(execution, progress, total, message)`` of calls' progress reports.

        A tool body reports through ``ctx.report_progress``; the listener runs
        synchronously in the body's task (keep it short) and its failures are
        logged and ignored.
        """
        return self._add(self._progress, fn, scope)

    def _report_progress(
        self, execution: ToolExecution, progress: float, total: float | None, message: str | None
    ) -> None:
        listeners = self._progress
        if not listeners:
            return
        chain = set(self.scope_chain(execution.scope))
        for entry in list(listeners):
            if entry.scope is not None and entry.scope not in chain:
                continue
            try:
                entry.fn(execution, progress, total, message)
            except Exception:
                logger.exception("a progress listener raised")

    def on_change(self, fn: Callable[[], None]) -> Disposer:
        """Call ``fn`` after every change of registrations, scopes or restrictions."""
        key = next_key()
        self._change[key] = fn
        return lambda: self._change.pop(key, None) and None

    def _add(self, bucket: list[Listener], fn: Any, scope: str | None) -> Disposer:
        if not callable(fn):
            raise RestrictionError(f"listener {fn!r} is not callable")
        if scope is not None:
            self._layer(scope)
        listener = Listener(key=next_key(), fn=fn, scope=scope)
        bucket.append(listener)
        self._policies.clear()

        def dispose() -> None:
            if listener in bucket:
                bucket.remove(listener)
                self._policies.clear()

        return dispose

    def policy(self, scope: str | None) -> PolicySet:
        """The hooks that apply to a call made in ``scope``."""
        cached = self._policies.get(scope)
        if cached is not None and cached[0] == self._version:
            return cached[1]
        chain = set(self.scope_chain(scope))

        def pick(bucket: list[Listener]) -> tuple[Any, ...]:
            return tuple(
                entry.fn for entry in bucket if entry.scope is None or entry.scope in chain
            )

        policy = PolicySet(
            pre=pick(self._pre),
            guards=pick(self._guards),
            wrappers=pick(self._wrappers),
            post=pick(self._post),
            observers=pick(self._observers),
        )
        self._policies[scope] = (self._version, policy)
        return policy

    def _changed(self) -> None:
        self._version += 1
        self._views.clear()
        self._policies.clear()
        for fn in list(self._change.values()):
            try:
                fn()
            except Exception:
                logger.exception("a registry change listener raised")

    # ------------------------------------------------------------------ lookup

    def view(self, scope: str | None = None) -> Mapping[str, CompiledTool]:
        """Name -> compiled tool as ``scope`` sees it (a read-only view)."""
        return MappingProxyType(self._view(scope))

    def _view(self, scope: str | None) -> dict[str, CompiledTool]:
        cached = self._views.get(scope)
        if cached is not None and cached[0] == self._version:
            return cached[1]
        visible = dict(self._global.tools)
        for name in reversed(self.scope_chain(scope)):
            layer = self._scopes[name]
            for restriction in layer.restrictions:
                visible = {n: t for n, t in visible.items() if restriction.admits(n)}
            visible.update(layer.tools)
        self._views[scope] = (self._version, visible)
        return visible

    def get(self, name: str, scope: str | None = None) -> ToolDefinition | None:
        """The definition ``scope`` resolves for ``name``, or ``None``."""
        compiled = self._view(scope).get(name)
        return None if compiled is None else compiled.definition

    def is_admitted(self, name: str, scope: str | None = None) -> bool:
        """Whether a global name passes every restriction on ``scope``'s chain."""
        return all(
            restriction.admits(name)
            for layer_name in self.scope_chain(scope)
            for restriction in self._scopes[layer_name].restrictions
        )

    def definitions(self, scope: str | None = None) -> list[ToolDefinition]:
        """Visible definitions in lexicographic name order."""
        view = self._view(scope)
        return [view[name].definition for name in sorted(view)]

    def schemas(
        self, scope: str | None = None, *, with_output: bool = False
    ) -> list[dict[str, Any]]:
        """Model-facing schemas (deep copies), sorted by name.

        Only ``name``, ``description`` and ``parameters`` (plus ``output`` — the
        canonical output schema — when ``with_output``) are included; bodies,
        timeouts and classifiers never leak.
        """
        # Built from the snapshots taken at registration (what is enforced), so a
        # caller mutating its own dicts later cannot make the two disagree.
        view = self._view(scope)
        out: list[dict[str, Any]] = []
        for name in sorted(view):
            compiled = view[name]
            schema: dict[str, Any] = {
                "name": name,
                "description": compiled.definition.description,
                "parameters": clone_json(compiled.parameters.schema),
            }
            if with_output:
                schema["output"] = clone_json(compiled.output.schema)
            out.append(schema)
        return out

    # ------------------------------------------------------------------ execution

    def execution_mode(self, call: ToolCall) -> ExecutionMode:
        """``"parallel"`` only when the visible classifier returns exactly ``True``.

        Unknown or hidden tools, arguments that are not JSON or break the
        schema (the classifier is not asked then), a classifier that raises
        or returns anything else: ``"exclusive"``.
        """
        return self.check(call).mode

    def check(self, call: ToolCall) -> CheckedCall:
        """``call``'s execution mode, with the checked arguments ``execute`` can reuse.

        ``checked.mode`` is what :meth:`execution_mode` returns. Passing
        ``checked`` to ``execute(call, checked=checked)`` spares the call a
        second snapshot and validation of its arguments (a classifier gets a
        copy of its own, so nothing it does reaches the execution).
        """
        compiled = self._view(call.scope).get(call.name)
        if compiled is None:
            return CheckedCall(call, "exclusive")
        safe = compiled.definition.concurrency_safe
        if safe is False:
            return CheckedCall(call, "exclusive")  # the pipeline checks the arguments
        arguments, bad_args, violation = check_arguments(call, compiled)
        checked = CheckedCall(call, "exclusive", compiled, arguments, bad_args, violation)
        if bad_args is not None or violation is not None:
            return checked
        if safe is True:
            checked.mode = "parallel"
            return checked
        try:
            verdict = safe(clone_json(arguments))
        except Exception:
            return checked
        if verdict is True:
            checked.mode = "parallel"
        return checked

    async def execute(
        self,
        call: ToolCall,
        *,
        transport: ToolDefinition | None = None,
        checked: CheckedCall | None = None,
    ) -> ToolResult:
        """Run one call through the whole pipeline; always returns a result.

        A tool's failure is a result; a caller's mistake raises (an undeclared
        ``call.scope``: :class:`UnknownScopeError`).

        Args:
            call: the call.
            transport: run the call against this unregistered definition instead
                of looking ``call.name`` up (how ``ptc`` runs the reserved
                ``run_code`` transport through the same policy).
            checked: what :meth:`check` returned for this very ``call``; its
                snapshot and validation of the arguments are used instead of
                new ones (once; not with ``transport``).

        Raises:
            ValueError: ``checked`` is another call's, or given with ``transport``.
        """
        compiled = None
        if checked is not None and (checked.call is not call or transport is not None):
            raise ValueError(
                "checked must come from check() of this very call, and not with a transport"
            )
        if transport is not None:
            cached = self._transports.get(id(transport))
            if cached is None or cached[0] is not transport:
                cached = (transport, compile_definition(transport, transport=True))
                self._transports[id(transport)] = cached
            compiled = cached[1]
        return await run_pipeline(self, call, compiled, checked)


def _names(values: Iterable[str] | str, what: str) -> Sequence[str]:
    if isinstance(values, str):
        raise RestrictionError(f"{what} must be a list of names, not a string")
    names = list(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise RestrictionError(f"{what} holds a bad name {name!r}")
    return names


def _noop() -> None:
    return None
