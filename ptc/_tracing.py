"""OpenTelemetry spans for ``run_code`` runs and their tool calls, through the API only.

Optional and lazy: ``opentelemetry-api`` is imported at an executor's first
call that could be traced, never at import; when it is not installed nothing
is done. A call could be traced once a ``tracer_provider`` was given, the
process has imported ``opentelemetry.trace`` (as setting a global provider,
or starting any span, does) or ``OTEL_PYTHON_TRACER_PROVIDER`` names a
provider; before that, every span would be the API's no-op with no span to be
the child of, and a plain ``ptc run`` does not import the API at all. With
the API but no SDK configured, every span is the API's no-op. Tracing never
changes a result, and a failure inside it is contained (logged).

The spans (each a child of the span current where the caller called
``run_code`` or ``execute``; a sub-call's parent is passed explicitly, since it
runs in a task of its own):

- ``ptc.run_code``: one outer ``run_code`` call, from its ``tool/call`` to its
  ``tool/result``. Attributes: ``ptc.call.id``, ``ptc.call.kind`` (``run_code``),
  ``ptc.scope``, ``ptc.mode``, ``ptc.outcome`` (``ok``, ``error`` or
  ``aborted``), ``ptc.error.code``, ``ptc.run.kind`` (``ok`` or the program's
  failure kind: ``exception``, ``timeout``, ``memory``, ...; only when the
  program ran), ``ptc.code.chars``, ``ptc.logs.lines``, ``ptc.logs.chars``,
  ``ptc.result.chars`` (when it returned a value: a string's length, else its
  compact JSON's), ``ptc.tool_calls``, ``ptc.runtime``, ``ptc.isolation``,
  ``ptc.media.count`` (images shown), ``ptc.output.cut`` (characters the output
  budget cut), ``ptc.abandoned_sub_calls``.
- ``ptc.tool <name>``: one sub-call of a program (``ptc.call.kind`` ``sub``,
  with ``ptc.parent.id`` the run's call id, ``ptc.tool.mode`` ``parallel`` or
  ``exclusive``, ``ptc.abandoned`` when its run stopped waiting for it) or one
  native call of a batch (``native``). Attributes: ``ptc.tool.name``,
  ``ptc.call.id``, ``ptc.outcome``, ``ptc.error.code``.

Every span also has the generic ``gen_ai.operation.name`` (``execute_tool``),
``gen_ai.tool.name`` and ``gen_ai.tool.call.id``. A failed call's span has the
status ``ERROR`` with its message (cut to :data:`MAX_STATUS_CHARS`) and
``error.type`` (its code); a cancelled one ``ERROR`` with ``ptc.outcome``
``aborted``.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from registry import ABORTED, ToolResult

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["TRACER_NAME", "ActiveSpan", "Tracing"]

logger = logging.getLogger("ptc")

#: The instrumentation scope of every span.
TRACER_NAME = "ptc-runner"
#: The longest status description a span gets (a failure's message is cut there).
MAX_STATUS_CHARS = 1000

#: Attribute values: what OpenTelemetry takes.
Attributes = dict[str, "str | bool | int | float"]


@dataclass(slots=True)
class _Api:
    trace: Any  # the opentelemetry.trace module
    context: Any  # the opentelemetry.context module


def _api_may_record(provider: TracerProvider | None) -> bool:
    """Whether a span could record now: else the API need not be loaded (yet).

    Without ``opentelemetry.trace`` imported, no global provider is set and no
    span is current (both are the module's state); only the environment can
    still name a provider, which the API loads at its first use.
    """
    return (
        provider is not None
        or "opentelemetry.trace" in sys.modules
        or "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
    )


def _load_api() -> _Api | None:
    """The OpenTelemetry API's modules, or ``None`` when the API is not installed."""
    try:
        trace = import_module("opentelemetry.trace")
        context = import_module("opentelemetry.context")
    except ImportError:
        return None
    return _Api(trace=trace, context=context)


@dataclass(slots=True)
class ActiveSpan:
    """A started span, current in the task that started it until :meth:`Tracing.end`."""

    span: Span
    context: Context  # the context with this span current: a child's parent
    token: object  # the attach token (detached in the same task)
    recording: bool


class Tracing:
    """The spans of one executor: from ``provider``, or the global provider when ``None``.

    The API is loaded at the first span that could record, not before:
    ``import ptc`` never imports OpenTelemetry, nor does a run while nothing
    in the process uses it (see the module's docstring).
    """

    __slots__ = ("_api", "_loaded", "_provider", "_tracer")

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._provider = provider
        self._loaded = False
        self._api: _Api | None = None
        self._tracer: Tracer | None = None

    def _ready(self) -> bool:
        if not self._loaded:
            if not _api_may_record(self._provider):
                return False  # asked again at the next span: the API may be in use by then
            self._loaded = True
            self._api = _load_api()
            if self._api is not None:
                # Without a provider, a proxy that follows the global one (set later, too).
                self._tracer = self._api.trace.get_tracer(
                    TRACER_NAME, tracer_provider=self._provider
                )
        return self._tracer is not None

    def recording(self) -> bool:
        """Whether a span started now could be recorded: ``False`` when it would be a no-op.

        Without the API, or with no SDK's provider (none given, and no global
        one set), every span is the API's no-op, which only passes its parent
        on: a caller may then do without it.
        """
        if not self._ready():
            return False
        assert self._api is not None
        trace = self._api.trace
        provider = self._provider if self._provider is not None else trace.get_tracer_provider()
        return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)

    def current(self) -> Context | None:
        """The current context (a parent to pass on), or ``None`` without the API."""
        if not self._ready():
            return None
        assert self._api is not None
        current: Context = self._api.context.get_current()
        return current

    def start(
        self, name: str, parent: Context | None, attributes: Attributes | None = None
    ) -> ActiveSpan | None:
        """Start ``name`` under ``parent`` and make it current in this task.

        ``None`` without the API (or if tracing itself failed).
        """
        if not self._ready():
            return None
        assert self._api is not None and self._tracer is not None
        try:
            span = self._tracer.start_span(name, context=parent, attributes=attributes)
            context = self._api.trace.set_span_in_context(span, parent)
            token = self._api.context.attach(context)
            return ActiveSpan(
                span=span, context=context, token=token, recording=span.is_recording()
            )
        except Exception:
            logger.exception("starting the span %s failed", name)
            return None

    def end(
        self,
        active: ActiveSpan | None,
        result: ToolResult | None,
        attributes: Attributes | None = None,
    ) -> None:
        """End ``active`` with ``result``'s outcome (``None``: the call ended abnormally)."""
        if active is None:
            return
        assert self._api is not None
        try:
            if active.recording:
                self._set_outcome(active.span, result, attributes)
        except Exception:
            logger.exception("recording a span's outcome failed")
        self._api.context.detach(active.token)  # (logs, never raises)
        try:
            active.span.end()
        except Exception:  # a span processor's failure is not the call's
            logger.exception("ending a span failed")

    def _set_outcome(
        self, span: Span, result: ToolResult | None, attributes: Attributes | None
    ) -> None:
        assert self._api is not None
        if attributes:
            span.set_attributes(attributes)
        if result is not None and not result.is_error:
            span.set_attribute("ptc.outcome", "ok")
            return
        code: str | None = None
        message = "the call ended abnormally"
        if result is not None:
            info = result.error.info
            code = None if info is None else info.code
            message = result.error.message
        span.set_attribute("ptc.outcome", "aborted" if code == ABORTED else "error")
        if code is not None:
            span.set_attribute("ptc.error.code", code)
            span.set_attribute("error.type", code)
        trace = self._api.trace
        span.set_status(trace.Status(trace.StatusCode.ERROR, message[:MAX_STATUS_CHARS]))


def call_attributes(name: str, call_id: str, kind: str) -> Attributes:
    """The attributes every span of a call starts with."""
    return {
        "ptc.tool.name": name,
        "ptc.call.id": call_id,
        "ptc.call.kind": kind,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
    }
