"""The policy pipeline one call goes through (see ``_policy`` for the order)."""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import anyio

from ._exceptions import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    APPROVAL_CANCELLED,
    APPROVAL_REJECTED,
    APPROVAL_UNAVAILABLE,
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    TOOL_DENIED,
    UNKNOWN_TOOL,
    ToolError,
)
from ._json import NotJsonError, clone_json, dumps_pretty, snapshot_json
from ._policy import Accept, Allow, Ask, Block, Cancel, Deny, GuardDenial, PostDecision, PreDecision
from ._signal import AbortSignal
from ._types import (
    ContentBlock,
    DispatchExecution,
    ErrorInfo,
    ExecutionMode,
    ExecutionToken,
    FailureDetail,
    ToolCall,
    ToolExecution,
    ToolFailure,
    ToolResult,
    ToolReturn,
    ToolRunContext,
    ToolSuccess,
    text_block,
)
from ._validation import CompiledTool, describe_violation

if TYPE_CHECKING:
    from ._registry import PolicySet, ToolRegistry

__all__ = ["CheckedCall", "check_arguments", "run_pipeline"]

logger = logging.getLogger("registry")

_POLICY_ERROR = "POLICY_ERROR"
_MAX_LISTED_NAMES = 30


def _failure(message: str, name: str | None = None, code: str | None = None) -> ToolFailure:
    info = None if code is None or name is None else ErrorInfo(name=name, code=code)
    return ToolFailure.of(message, info)


def _aborted(before_dispatch: bool, message: str | None = None) -> ToolFailure:
    if before_dispatch:
        return _failure(
            message or "the call was cancelled before it ran", "AbortError", ABORTED_BEFORE_DISPATCH
        )
    return _failure(message or "the call was cancelled", "AbortError", ABORTED)


def _fast_constructor(cls: type[Any]) -> Callable[..., Any]:
    """A positional constructor for a frozen slots dataclass on the hot path.

    A frozen dataclass ``__init__`` sets every field through ``object.__setattr__``;
    the slot descriptors set them at about half the cost. Fields in declaration
    order; the instance is exactly what ``__init__`` would build (no defaults, no
    ``__post_init__``), and it stays frozen for everyone else. The body is
    generated once per class, as ``dataclasses`` does, so no loop runs per call.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    if {"instance", "new", "cls"} & set(names):
        raise TypeError(f"{cls.__name__} has a field name the generated constructor uses")
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    namespace.update({f"set_{name}": getattr(cls, name).__set__ for name in names})
    lines = [f"def construct({', '.join(names)}):", "    instance = new(cls)"]
    lines += [f"    set_{name}(instance, {name})" for name in names]
    lines.append("    return instance")
    exec("\n".join(lines), namespace)  # field names of our own dataclass
    construct: Callable[..., Any] = namespace["construct"]
    return construct


_new_execution: Callable[..., ToolExecution] = _fast_constructor(ToolExecution)
_new_success: Callable[..., ToolSuccess] = _fast_constructor(ToolSuccess)
_new_failure: Callable[..., ToolFailure] = _fast_constructor(ToolFailure)


def _execution_copy(execution: ToolExecution) -> ToolExecution:
    """The same execution (token and all) with its own copy of the arguments."""
    return _new_execution(
        execution.token,
        execution.call_id,
        execution.root_call_id,
        execution.name,
        clone_json(execution.arguments),
        execution.scope,
        execution.parent,
        execution.signal,
        execution.definition,
    )


def _result_copy(result: ToolResult) -> ToolResult:
    """An equal result with its own value, content, meta and contexts."""
    contexts = result.additional_contexts
    if contexts:
        contexts = tuple(clone_json(list(contexts)))
    if isinstance(result, ToolSuccess):
        return _new_success(
            clone_json(result.value), clone_json(result.content), clone_json(result.meta), contexts
        )
    return _new_failure(result.error, clone_json(result.content), clone_json(result.meta), contexts)


class _Run:
    """State of one call through the pipeline."""

    __slots__ = (
        "body_started",
        "compiled",
        "copy_for_body",
        "ctx",
        "execution",
        "policy",
        "registry",
        "view",
        "wrappers",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        execution: ToolExecution,
        compiled: CompiledTool,
        policy: PolicySet,
    ) -> None:
        self.registry = registry
        self.execution = execution
        self.compiled = compiled
        self.policy = policy
        # The built-in timeout wrapper has nothing to enforce without a timeout.
        self.wrappers = (
            policy.wrappers
            if compiled.definition.timeout is not None
            else policy.wrappers_without_timeout
        )
        # ``execution`` holds the validated arguments: what the body runs with and
        # what the renderer, post-execute listeners and observers see. The hooks
        # that see the call before its body (pre-execute listeners, the approval
        # callback, guards, wrappers) get a copy of their own, so a listener that
        # mutates ``execution.arguments`` cannot change what runs or what is logged.
        self.view = _execution_copy(execution) if policy.sees_execution_first else execution
        # The body gets its own copy when it could run twice (a retrying wrapper) or
        # when its mutations would show to a hook or renderer that reads the
        # arguments after it.
        self.copy_for_body = (
            bool(self.wrappers) or policy.sees_execution_after or compiled.reads_arguments_after
        )
        self.body_started = False
        self.ctx: ToolRunContext | None = None


class CheckedCall:
    """One call whose execution mode is decided, with the arguments it was decided on.

    Made by :meth:`ToolRegistry.check`. ``ToolRegistry.execute(call,
    checked=...)`` runs the call with the snapshot and validation taken here
    instead of taking them again, once, and only while the call's name still
    resolves to the tool they were checked against (otherwise, and on any
    later execution, it takes them again).
    """

    __slots__ = ("_arguments", "_bad_args", "_compiled", "_violation", "call", "mode")

    def __init__(
        self,
        call: ToolCall,
        mode: ExecutionMode,
        compiled: CompiledTool | None = None,
        arguments: Any = None,
        bad_args: str | None = None,
        violation: str | None = None,
    ) -> None:
        self.call = call
        self.mode: ExecutionMode = mode
        # ``compiled`` is None when nothing was checked (no such tool, or one
        # that is exclusive whatever its arguments): the pipeline does it all.
        self._compiled = compiled
        self._arguments = arguments  # the snapshot, never handed to anyone else
        self._bad_args = bad_args
        self._violation = violation

    def __repr__(self) -> str:
        return f"<CheckedCall {self.call.name!r} {self.mode}>"


def check_arguments(call: ToolCall, compiled: CompiledTool) -> tuple[Any, str | None, str | None]:
    """``call``'s arguments snapshotted, why they are not JSON, why ``compiled`` refuses them.

    At most one of the two reasons is given; the snapshot is ``None`` when
    the arguments are not JSON.
    """
    arguments, bad_args = _snapshot_arguments(call)
    if bad_args is not None:
        return None, bad_args, None
    return arguments, None, describe_violation(compiled.parameters, arguments)


def _snapshot_arguments(call: ToolCall) -> tuple[Any, str | None]:
    try:
        return snapshot_json(call.arguments), None
    except NotJsonError as exc:
        return None, f"arguments of {call.name} are not lossless JSON: {exc}"


async def run_pipeline(
    registry: ToolRegistry,
    call: ToolCall,
    transport: CompiledTool | None,
    checked: CheckedCall | None = None,
) -> ToolResult:
    """Run ``call`` through every stage and return its final, observed result.

    ``checked``: the same call's arguments, checked before (see :class:`CheckedCall`).
    """
    signal = call.signal
    if signal is None:
        signal = AbortSignal()
    compiled = transport if transport is not None else registry._view(call.scope).get(call.name)
    violation: str | None = None
    validated = checked is not None and compiled is not None and checked._compiled is compiled
    if validated:
        assert checked is not None
        arguments, bad_args, violation = checked._arguments, checked._bad_args, checked._violation
        checked._compiled = None  # used once: the snapshot is now this execution's own
    else:
        arguments, bad_args = _snapshot_arguments(call)
    execution = _new_execution(
        ExecutionToken(),
        call.call_id,
        call.root_call_id if call.root_call_id is not None else call.call_id,
        call.name,
        arguments,
        call.scope,
        call.parent,
        signal,
        None if compiled is None else compiled.definition,
    )
    policy = registry.policy(call.scope)
    result: ToolResult
    if bad_args is not None:
        result = _failure(bad_args, "ToolArgsError", INVALID_ARGS)
    elif signal.aborted:
        result = _aborted(True)
    elif compiled is None:
        result = _unknown(registry, call)
    else:
        if not validated:
            violation = describe_violation(compiled.parameters, arguments)
        if violation is not None:
            result = _failure(
                f"invalid arguments for {call.name}: {violation}", "ToolArgsError", INVALID_ARGS
            )
        else:
            run = _Run(registry, execution, compiled, policy)
            if policy.hooks_around_body or run.wrappers:
                result = await _policed(run)
            else:  # the body alone: a coroutine less per call
                result = _cancellation_wins(run, await _invoke_body(run, signal))
    if result.additional_contexts or (
        compiled is not None and compiled.definition.finalize_content
    ):
        result = _finalize(execution, result)
    if policy.observers:
        await _observe(policy, execution, result)
    return result


def _unknown(registry: ToolRegistry, call: ToolCall) -> ToolFailure:
    names = sorted(registry._view(call.scope))
    listed = ", ".join(names[:_MAX_LISTED_NAMES]) + (
        ", …" if len(names) > _MAX_LISTED_NAMES else ""
    )
    hint = f"; available tools: {listed}" if names else "; no tools are available"
    return _failure(f"unknown tool {call.name!r}{hint}", "ToolNotFoundError", UNKNOWN_TOOL)


async def _policed(run: _Run) -> ToolResult:
    policy = run.policy
    signal = run.execution.signal
    if policy.pre:
        denial = await _pre_execute(run)
        if denial is not None:
            return denial
        if signal.aborted:
            return _aborted(True)
    if policy.guards:
        denial = _check_guards(run)
        if denial is not None:
            return denial
    if run.wrappers:
        result = await _dispatch(run)
    else:
        result = await _invoke_body(run, signal)
    if policy.post:
        result = await _post_execute(run, result)
    return _cancellation_wins(run, result)


def _cancellation_wins(run: _Run, result: ToolResult) -> ToolResult:
    """``result``, or the call's cancellation if its signal fired and it is a success."""
    if run.execution.signal.aborted and not result.is_error:
        # Cancellation wins over a success, but the contexts stay deliverable.
        return _replace(
            _aborted(not run.body_started), additional_contexts=result.additional_contexts
        )
    return result


# --------------------------------------------------------------------------- pre-execute


async def _pre_execute(run: _Run) -> ToolResult | None:
    listeners = run.policy.pre
    execution = run.view

    def link(index: int) -> Callable[[], Awaitable[PreDecision]]:
        async def call_next() -> PreDecision:
            if index == len(listeners):
                return Allow()
            return await listeners[index](execution, link(index + 1))

        return call_next

    decision: object
    try:
        decision = await link(0)()
    except Exception as exc:
        logger.exception("a pre-execute listener raised for %s", execution.name)
        return _failure(f"pre-execute policy failed: {exc}", "PolicyError", _POLICY_ERROR)
    if isinstance(decision, Allow):
        return None
    if isinstance(decision, Deny):
        # More specific than a cancellation that came meanwhile: it stays a denial.
        info = decision.info or ErrorInfo(name="ToolDeniedError", code=TOOL_DENIED)
        return ToolFailure.of(decision.reason, info)
    if isinstance(decision, Cancel) or (isinstance(decision, Ask) and execution.signal.aborted):
        return _aborted(True)  # nobody is asked to approve a call that was cancelled
    if isinstance(decision, Ask):
        return await _ask(run, decision)
    return _failure(
        f"pre-execute policy returned {decision!r}, not a decision; the call is denied",
        "PolicyError",
        _POLICY_ERROR,
    )


async def _ask(run: _Run, decision: Ask) -> ToolResult | None:
    approval = run.registry.approval
    why = f": {decision.reason}" if decision.reason else ""
    if approval is None:
        return _failure(
            f"{run.execution.name} needs approval and no approval channel is available{why}",
            "ApprovalError",
            APPROVAL_UNAVAILABLE,
        )
    try:
        verdict = await approval(run.view, decision.reason)
    except Exception as exc:
        logger.exception("the approval callback raised for %s", run.execution.name)
        return _failure(
            f"approval for {run.execution.name} failed: {exc}",
            "ApprovalError",
            APPROVAL_UNAVAILABLE,
        )
    if verdict is True or verdict == "allow":
        return None  # a cancellation that came meanwhile is caught before dispatch
    if verdict == "cancel":
        return _failure(
            f"approval for {run.execution.name} was cancelled{why}",
            "ApprovalError",
            APPROVAL_CANCELLED,
        )
    return _failure(
        f"the user rejected {run.execution.name}{why}", "ApprovalError", APPROVAL_REJECTED
    )


def _check_guards(run: _Run) -> ToolResult | None:
    for guard in run.policy.guards:
        try:
            verdict = guard(run.view)
        except Exception as exc:
            logger.exception("a guard raised for %s", run.execution.name)
            verdict = f"guard failed: {exc}"
        if verdict is None:
            continue
        if isinstance(verdict, GuardDenial):
            info = verdict.info or ErrorInfo(name="ToolDeniedError", code=TOOL_DENIED)
            return ToolFailure.of(verdict.reason, info)
        return ToolFailure.of(str(verdict), ErrorInfo(name="ToolDeniedError", code=TOOL_DENIED))
    return None


# --------------------------------------------------------------------------- dispatch


async def _dispatch(run: _Run) -> ToolResult:
    wrappers = run.wrappers
    dispatch = DispatchExecution(run.view)
    produced: set[int] = set()

    async def innermost() -> ToolResult:
        result = await _invoke_body(run, dispatch.signal)
        produced.add(id(result))
        return result

    def link(index: int) -> Callable[[], Awaitable[ToolResult]]:
        if index == len(wrappers):
            return innermost

        async def call_next() -> ToolResult:
            return await wrappers[index](dispatch, link(index + 1))

        return call_next

    try:
        result: object = await link(0)()
    except Exception as exc:
        if run.execution.signal.aborted:
            return _with_deferred(run, _aborted(not run.body_started, str(exc) or None))
        logger.exception("an around-execute wrapper raised for %s", run.execution.name)
        return _with_deferred(run, _failure(f"{type(exc).__name__}: {exc}"))
    if not isinstance(result, ToolSuccess | ToolFailure):
        return _with_deferred(
            run,
            _failure(f"an around-execute wrapper returned {type(result).__name__}, not a result"),
        )
    if id(result) not in produced and isinstance(result, ToolSuccess):
        # A wrapper-authored success (a cache, a retry) is held to the same contract.
        result = _normalize(run, result.value)
    return result


async def _invoke_body(run: _Run, wrapper_signal: AbortSignal) -> ToolResult:
    execution = run.execution
    if wrapper_signal is execution.signal:
        signal, detach = wrapper_signal, _no_detach
    else:
        signal, detach = AbortSignal.any(execution.signal, wrapper_signal)
    try:
        if signal.aborted:
            # A wrapper may call ``call_next`` again after the body already ran.
            return _with_deferred(run, _aborted(not run.body_started))
        ctx = ToolRunContext(execution, signal, run.registry)
        run.ctx = ctx
        arguments = execution.arguments
        if run.copy_for_body:
            arguments = clone_json(arguments)
        if not run.compiled.body_may_suspend:
            # Nothing to cancel in a body that never waits: no scope (see ``_suspension``).
            run.body_started = True
            try:
                value = await run.compiled.definition.execute(arguments, ctx)
            except ToolError as exc:
                return _with_deferred(run, _tool_error(exc))
            except Exception as exc:
                return _with_deferred(run, _body_raised(execution, signal, exc))
            return _with_deferred(run, _normalize(run, value))
        outcome: ToolResult | None = None
        value = None
        returned = False
        with anyio.CancelScope() as scope:
            stop = signal.add_listener(scope.cancel)
            try:
                run.body_started = True
                pending = run.compiled.definition.execute(arguments, ctx)
                if type(pending) is CoroutineType or inspect.isawaitable(pending):
                    value = await pending
                else:
                    value = pending
                returned = True
            except ToolError as exc:
                outcome = _tool_error(exc)
            except Exception as exc:
                outcome = _body_raised(execution, signal, exc)
            finally:
                stop()
        if outcome is None:
            outcome = _normalize(run, value) if returned else _aborted(False)
        return _with_deferred(run, outcome)
    finally:
        detach()


def _no_detach() -> None:
    return None


def _tool_error(exc: ToolError) -> ToolFailure:
    return ToolFailure.of(exc.message, ErrorInfo(name=type(exc).__name__, code=exc.code))


def _body_raised(execution: ToolExecution, signal: AbortSignal, exc: Exception) -> ToolResult:
    if signal.aborted:
        return _aborted(False, f"{type(exc).__name__}: {exc}")
    logger.debug("tool %s raised", execution.name, exc_info=True)
    return ToolFailure.of(_describe_exception(exc))


def _describe_exception(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _with_deferred(run: _Run, result: ToolResult) -> ToolResult:
    if run.ctx is None or not run.ctx.deferred_contexts:
        return result
    return _replace(
        result, additional_contexts=run.ctx.deferred_contexts + result.additional_contexts
    )


def _replace(result: ToolResult, **changes: Any) -> ToolResult:
    fields: dict[str, Any] = {
        "content": result.content,
        "meta": result.meta,
        "additional_contexts": result.additional_contexts,
    }
    if isinstance(result, ToolSuccess):
        fields["value"] = result.value
    else:
        fields["error"] = result.error
    fields.update(changes)
    if "value" in fields:
        return ToolSuccess(**fields)
    return ToolFailure(**fields)


def _normalize(run: _Run, value: Any) -> ToolResult:
    """Snapshot, validate and render a body's (or policy's) canonical value."""
    name = run.execution.name
    given: object = None
    if type(value) is ToolReturn:
        value, given = value.value, value.content
    try:
        canonical = snapshot_json(value)
    except NotJsonError as exc:
        return _failure(
            f"{name} returned a value that is not lossless JSON: {exc}",
            "ToolOutputError",
            INVALID_TOOL_OUTPUT,
        )
    violation = describe_violation(run.compiled.output, canonical)
    if violation is not None:
        return _failure(
            f"{name} returned a value that breaks its output schema: {violation}",
            "ToolOutputError",
            INVALID_TOOL_OUTPUT,
        )
    output = run.compiled.definition.output
    try:
        if given is not None:
            content = _content(given)
        elif output.render is None:
            content = [
                text_block(canonical if isinstance(canonical, str) else dumps_pretty(canonical))
            ]
        else:
            content = _content(output.render(run.execution.arguments, canonical))
    except Exception as exc:
        return _failure(
            f"rendering the result of {name} failed: {_describe_exception(exc)}",
            "ToolOutputError",
            INVALID_TOOL_OUTPUT,
        )
    meta = None
    # Presentation metadata is for a UI showing a model's direct call: a nested
    # (Code Mode) dispatch has none, and a failing projection never fails a call.
    if output.meta is not None and run.execution.parent is None:
        try:
            meta = snapshot_json(output.meta(run.execution.arguments, canonical))
        except Exception:
            logger.exception("the meta projection of %s raised; the result has no meta", name)
    return _new_success(canonical, content, meta, ())


def _content(blocks: object) -> list[ContentBlock]:
    if isinstance(blocks, str):
        return [text_block(blocks)]
    if not isinstance(blocks, Sequence):
        raise TypeError(f"content must be a list of blocks, got {type(blocks).__name__}")
    out = snapshot_json(list(blocks))
    for block in out:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise TypeError("every content block must be an object with a string 'type'")
    return out  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- post-execute


async def _post_execute(run: _Run, result: ToolResult) -> ToolResult:
    listeners = run.policy.post
    if not listeners:
        return result
    # The listeners get copies: mutating what they see changes neither what was
    # validated (and is delivered) nor what observers are told ran. Only a
    # decision changes the result (a replaced value is validated again).
    execution = run.execution
    if run.policy.observers or run.compiled.reads_arguments_after:
        execution = _execution_copy(execution)  # someone reads the arguments after them
    seen = _result_copy(result)

    def link(index: int) -> Callable[[], Awaitable[PostDecision]]:
        async def call_next() -> PostDecision:
            if index == len(listeners):
                return Accept()
            return await listeners[index](execution, seen, link(index + 1))

        return call_next

    try:
        decision: object = await link(0)()
    except Exception as exc:
        logger.exception("a post-execute listener raised for %s", execution.name)
        return _failure(f"post-execute policy failed: {exc}", "PolicyError", _POLICY_ERROR)
    if isinstance(decision, Block):
        return _blocked(decision)
    if not isinstance(decision, Accept):
        return _failure(
            f"post-execute policy returned {decision!r}, not a decision; the result is withheld",
            "PolicyError",
            _POLICY_ERROR,
        )
    contexts = result.additional_contexts + tuple(decision.additional_contexts)
    if decision.replace_value and decision.content is not None:
        return _failure(
            "post-execute policy replaced both content and value", "PolicyError", _POLICY_ERROR
        )
    if decision.replace_value:
        replaced = _normalize(run, decision.value)
        return _replace(replaced, additional_contexts=contexts)
    if decision.content is not None:
        try:
            content = _content(decision.content)
        except (TypeError, NotJsonError) as exc:
            return _failure(
                f"post-execute policy returned bad content: {exc}", "PolicyError", _POLICY_ERROR
            )
        return _replace(result, content=content, additional_contexts=contexts)
    if contexts != result.additional_contexts:
        return _replace(result, additional_contexts=contexts)
    return result


def _blocked(decision: Block) -> ToolResult:
    feedback = decision.feedback
    if isinstance(feedback, str):
        failure = ToolFailure.of(feedback, decision.info)
    else:
        try:
            content = _content(feedback)
        except (TypeError, NotJsonError) as exc:
            return _failure(
                f"post-execute policy returned bad feedback: {exc}", "PolicyError", _POLICY_ERROR
            )
        message = "\n".join(
            b["text"] for b in content if b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        failure = ToolFailure(
            error=FailureDetail(message=message, info=decision.info), content=content
        )
    return _replace(failure, additional_contexts=tuple(decision.additional_contexts))


# --------------------------------------------------------------------------- finalize, observe


def _finalize(execution: ToolExecution, result: ToolResult) -> ToolResult:
    # Materialize first (contexts are snapshotted: a tool mutating one it deferred
    # changes nothing now), so finalize_content sees every failure, this one too.
    if result.additional_contexts:
        try:
            contexts = tuple(snapshot_json(list(result.additional_contexts)))
        except NotJsonError as exc:
            result = _failure(f"additional context of {execution.name} is not lossless JSON: {exc}")
        else:
            result = _replace(result, additional_contexts=contexts)
    definition = execution.definition
    finalize = None if definition is None else definition.finalize_content
    if finalize is not None:
        try:
            replacement = finalize(execution, result)
            if replacement is not None:
                result = _replace(result, content=_content(replacement))
        except Exception:
            logger.exception("finalize_content of %s raised; its content is kept", execution.name)
    return result


async def _observe(policy: PolicySet, execution: ToolExecution, result: ToolResult) -> None:
    # Observers see a copy of what is returned: nothing they do reaches the caller.
    seen = _result_copy(result)
    for observer in policy.observers:
        try:
            pending = observer(execution, seen)
            if inspect.isawaitable(pending):
                await pending
        except Exception:
            logger.exception("a result observer raised for %s", execution.name)
