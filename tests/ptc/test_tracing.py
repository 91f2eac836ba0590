"""OpenTelemetry spans of ``run_code`` runs and their tool calls (``ptc._tracing``).

Each test gets a ``TracerProvider`` of its own with an in-memory exporter,
passed to the executor explicitly: nothing here touches the global provider
(the tests of the global one run in a subprocess of their own).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ptc._tracing
from ptc import CODE_RUN_FAILED, CodeExecutor, ModelCall
from registry import AbortSignal, ToolRegistry
from runtime import Limits, SubprocessRuntime
from runtime.testing import InProcessRuntime

from .conftest import Recorder

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def spans(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_run_is_a_child_of_the_callers_span_and_its_sub_calls_are_its_children(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    code = (
        "import asyncio\nprint('hi')\nprint('there')\n"
        "return await asyncio.gather(tools.read({'key': 'a'}), tools.read({'key': 'b'}))"
    )
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        with provider.get_tracer("agent").start_as_current_span("agent turn"):
            r = await ex.run_code(code, call_id="run-1")
    assert not r.is_error
    by_name = spans(exporter)
    (agent,) = by_name["agent turn"]
    (run,) = by_name["ptc.run_code"]
    subs = by_name["ptc.tool read"]
    assert parent_of(run) == span_id(agent)
    # The sub-calls run in tasks of the executor's own, yet hang under the run.
    assert len(subs) == 2 and {parent_of(s) for s in subs} == {span_id(run)}
    assert {s.context.trace_id for s in [agent, run, *subs] if s.context} == {
        agent.context.trace_id  # type: ignore[union-attr]
    }
    assert attrs(run) == {
        "ptc.tool.name": "run_code",
        "ptc.call.id": "run-1",
        "ptc.call.kind": "run_code",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "run_code",
        "gen_ai.tool.call.id": "run-1",
        "ptc.mode": "code",
        "ptc.code.chars": len(code),
        "ptc.run.kind": "ok",
        "ptc.logs.lines": 2,
        "ptc.logs.chars": len("hi\nthere"),
        "ptc.result.chars": len('["value-of-a","value-of-b"]'),
        "ptc.tool_calls": 2,
        "ptc.isolation": "none",
        "ptc.runtime": "in-process",
        "ptc.outcome": "ok",
    }
    assert run.status.status_code is StatusCode.UNSET
    assert sorted(attrs(s)["ptc.call.id"] for s in subs) == ["run-1:ptc:1", "run-1:ptc:2"]
    for sub in subs:
        assert {k: v for k, v in attrs(sub).items() if k != "ptc.call.id"} == {
            "ptc.tool.name": "read",
            "ptc.call.kind": "sub",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "read",
            "gen_ai.tool.call.id": attrs(sub)["ptc.call.id"],
            "ptc.parent.id": "run-1",
            "ptc.tool.mode": "parallel",
            "ptc.outcome": "ok",
        }
        # The span lasts the call: it ends after it starts, within the run's.
        assert run.start_time is not None and run.end_time is not None
        assert sub.start_time is not None and sub.end_time is not None
        assert run.start_time <= sub.start_time <= sub.end_time <= run.end_time


async def test_without_the_executors_block_the_sub_calls_still_hang_under_the_run(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    ex = CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider)
    try:
        r = await ex.run_code("return await tools.write({'key': 'k'})", scope=None)
    finally:
        await ex.aclose()
    assert not r.is_error
    by_name = spans(exporter)
    (run,) = by_name["ptc.run_code"]
    (sub,) = by_name["ptc.tool write"]
    assert run.parent is None  # no span was current: a root
    assert parent_of(sub) == span_id(run)
    assert attrs(sub)["ptc.tool.mode"] == "exclusive"


async def test_a_failed_sub_call_has_the_error_status_its_message_and_code(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    code = "try:\n    await tools.fail({'why': 'disk on fire'})\nexcept ToolCallError:\n    return 'caught'"
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        r = await ex.run_code(code)
    assert not r.is_error
    by_name = spans(exporter)
    (sub,) = by_name["ptc.tool fail"]
    assert sub.status.status_code is StatusCode.ERROR
    assert sub.status.description == "disk on fire"
    assert attrs(sub)["ptc.outcome"] == "error"
    assert attrs(sub)["ptc.error.code"] == "BROKEN"
    assert attrs(sub)["error.type"] == "BROKEN"
    (run,) = by_name["ptc.run_code"]
    assert run.status.status_code is StatusCode.UNSET  # the program handled it
    assert attrs(run)["ptc.outcome"] == "ok"


async def test_a_failed_run_has_its_failure_kind_and_the_error_status(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        r = await ex.run_code("print('before')\nraise ValueError('bad input')")
    assert r.is_error
    (run,) = spans(exporter)["ptc.run_code"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description is not None
    assert run.status.description.startswith("code run failed (exception):")
    assert "bad input" in run.status.description
    assert attrs(run)["ptc.run.kind"] == "exception"
    assert attrs(run)["ptc.outcome"] == "error"
    assert attrs(run)["ptc.error.code"] == CODE_RUN_FAILED
    assert attrs(run)["ptc.logs.lines"] == 1
    assert "ptc.result.chars" not in attrs(run)


async def test_a_long_failure_message_is_cut_in_the_status(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        await ex.run_code("print('x' * 5000)\nraise ValueError('bad')")
    (run,) = spans(exporter)["ptc.run_code"]
    assert run.status.description is not None
    assert len(run.status.description) == ptc._tracing.MAX_STATUS_CHARS


async def test_a_cancelled_run_and_its_sub_calls_end_aborted(
    tools: ToolRegistry,
    recorder: Recorder,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    running = recorder.when_running(2)
    code = (
        "import asyncio\n"
        "await asyncio.gather(*[tools.read({'key': str(i), 'gate': 'never'}) for i in range(2)])"
    )
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        with anyio.CancelScope() as scope:

            async def cancel_when_running() -> None:
                await running.wait()
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_running)
                await ex.run_code(code)
    assert scope.cancelled_caught
    by_name = spans(exporter)
    (run,) = by_name["ptc.run_code"]
    assert run.end_time is not None
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description == "the call was cancelled"
    assert attrs(run)["ptc.outcome"] == "aborted"
    assert attrs(run)["ptc.error.code"] == "ABORTED"
    subs = by_name["ptc.tool read"]
    assert len(subs) == 2
    for sub in subs:
        assert parent_of(sub) == span_id(run)
        assert sub.status.status_code is StatusCode.ERROR
        assert attrs(sub)["ptc.outcome"] == "aborted"


async def test_a_run_aborted_by_its_signal_says_cancelled(
    tools: ToolRegistry,
    recorder: Recorder,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    signal = AbortSignal()
    running = recorder.when_running(1)

    async def abort_when_running() -> None:
        await running.wait()
        signal.abort("user pressed stop")

    async with (
        CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(abort_when_running)
        r = await ex.run_code("await tools.read({'key': 'a', 'gate': 'never'})", signal=signal)
    assert r.is_error
    (run,) = spans(exporter)["ptc.run_code"]
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["ptc.outcome"] == "aborted"
    (sub,) = spans(exporter)["ptc.tool read"]
    assert attrs(sub)["ptc.outcome"] == "aborted"


async def test_an_abandoned_sub_call_ends_its_span_when_it_ends(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    reg = ToolRegistry()
    release = anyio.Event()

    @reg.tool()
    async def stuck() -> int:
        """Ignores the run's end until released."""
        with anyio.CancelScope(shield=True):
            await release.wait()
        return 1

    async with CodeExecutor(
        reg,
        runtime=InProcessRuntime(limits=Limits(timeout=0.2)),
        settle_grace=0.05,
        tracer_provider=provider,
    ) as ex:
        r = await ex.run_code("return await tools.stuck({})")
        assert r.is_error
        (run,) = spans(exporter)["ptc.run_code"]
        assert attrs(run)["ptc.run.kind"] == "timeout"
        assert attrs(run)["ptc.abandoned_sub_calls"] == 1
        assert "ptc.tool stuck" not in spans(exporter)  # still running
        release.set()
    (sub,) = spans(exporter)["ptc.tool stuck"]
    assert parent_of(sub) == span_id(run)
    assert attrs(sub)["ptc.abandoned"] is True
    assert attrs(sub)["ptc.outcome"] == "aborted"  # its run had ended: the registry says so


async def test_native_calls_of_a_batch_have_spans_under_the_callers(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    batch = [
        ModelCall(call_id="c1", name="read", arguments={"key": "a"}),
        ModelCall(call_id="c2", name="fail", arguments={}),
        ModelCall(call_id="c3", name="run_code", arguments={"code": "return 1", "description": ""}),
    ]
    ex = CodeExecutor(tools, runtime=InProcessRuntime(), mode="both", tracer_provider=provider)
    async with ex:
        with provider.get_tracer("agent").start_as_current_span("agent turn"):
            result = await ex.execute(batch)
    assert [r.result.is_error for r in result.results] == [False, True, False]
    by_name = spans(exporter)
    (agent,) = by_name["agent turn"]
    (read,) = by_name["ptc.tool read"]
    (fail,) = by_name["ptc.tool fail"]
    (run,) = by_name["ptc.run_code"]
    assert {parent_of(s) for s in (read, fail, run)} == {span_id(agent)}
    assert attrs(read)["ptc.call.kind"] == "native"
    assert attrs(read)["ptc.call.id"] == "c1"
    assert "ptc.parent.id" not in attrs(read)
    assert fail.status.status_code is StatusCode.ERROR
    assert attrs(fail)["ptc.error.code"] == "BROKEN"
    assert attrs(run)["ptc.mode"] == "both"
    assert attrs(run)["ptc.call.id"] == "c3"


async def test_a_cut_output_is_on_the_span(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        r = await ex.run_code("print('x' * 5000)", output_budget=1000)
    assert r.meta is not None
    (run,) = spans(exporter)["ptc.run_code"]
    assert attrs(run)["ptc.output.cut"] == r.meta["truncated"]["cut"] > 0


async def test_the_real_worker_reports_its_runtime_and_isolation(
    tools: ToolRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with (
        SubprocessRuntime() as runtime,
        CodeExecutor(tools, runtime=runtime, tracer_provider=provider) as ex,
    ):
        r = await ex.run_code("return await tools.read({'key': 'a'})")
    assert not r.is_error
    by_name = spans(exporter)
    (run,) = by_name["ptc.run_code"]
    (sub,) = by_name["ptc.tool read"]
    assert attrs(run)["ptc.runtime"] == "subprocess"
    assert attrs(run)["ptc.isolation"] == "strict"
    assert attrs(run)["ptc.tool_calls"] == 1
    assert parent_of(sub) == span_id(run)


class _Exploding(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("the processor broke on start")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("the processor broke on end")


class _ExplodingAtEnd(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("the processor broke on end")


@pytest.mark.parametrize("processor", [_Exploding(), _ExplodingAtEnd()])
async def test_a_broken_tracing_pipeline_never_breaks_a_run(
    tools: ToolRegistry, processor: SpanProcessor, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        r = await ex.run_code("return await tools.read({'key': 'a'})")
    assert not r.is_error and r.value == {"logs": [], "result": "value-of-a"}
    assert "the processor broke" in caplog.text


async def test_without_the_api_a_run_has_no_spans_and_the_same_result(
    tools: ToolRegistry,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    imported: list[str] = []
    real_import = ptc._tracing.import_module

    def no_otel(name: str, package: str | None = None) -> Any:
        imported.append(name)
        if name.split(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, package)

    monkeypatch.setattr(ptc._tracing, "import_module", no_otel)
    code = "import asyncio\nreturn await asyncio.gather(tools.read({'key': 'a'}), tools.fail({}))"
    async with CodeExecutor(tools, runtime=InProcessRuntime(), tracer_provider=provider) as ex:
        r = await ex.run_code(code)
        batch = await ex.execute([ModelCall(call_id="c", name="run_code", arguments={"code": "1"})])
    assert r.is_error and "it broke" in r.error.message
    assert batch.results[0].result.is_error  # (no description: a malformed call, as ever)
    assert exporter.get_finished_spans() == ()
    assert imported == ["opentelemetry.trace"]  # tried once per executor, then never again


def _python(script: str, *, block_otel: bool = False) -> str:
    prelude = "import sys\n"
    if block_otel:  # what an environment without opentelemetry-api looks like to `import`
        prelude += "sys.modules['opentelemetry'] = None\n"
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


_RUN_ONE = """
    import anyio
    from ptc import CodeExecutor
    from runtime.testing import InProcessRuntime
    from registry import ToolRegistry

    reg = ToolRegistry()

    @reg.tool(concurrency_safe=True)
    async def echo(x: int) -> int:
        '''Return x.'''
        return x

    async def main(ex):
        r = await ex.run_code("return await tools.echo({'x': 2})")
        assert not r.is_error and r.value["result"] == 2, r
"""


def test_importing_ptc_imports_no_opentelemetry() -> None:
    out = _python(
        "import ptc\nprint(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert out.strip() == "[]"


def test_without_opentelemetry_installed_a_run_works_and_imports_nothing() -> None:
    out = _python(
        _RUN_ONE
        + """
    anyio.run(main, CodeExecutor(reg, runtime=InProcessRuntime()))
    print(sorted(m for m in sys.modules if m.startswith('opentelemetry') and sys.modules[m]))
    """,
        block_otel=True,
    )
    assert out.strip() == "[]"


def test_a_run_imports_no_opentelemetry_while_no_span_could_record() -> None:
    # The API is installed, but nothing uses it: no provider given, none set (that
    # takes importing it) and none named in the environment.
    out = _python(
        _RUN_ONE
        + """
    anyio.run(main, CodeExecutor(reg, runtime=InProcessRuntime()))
    print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))
    """
    )
    assert out.strip() == "[]"


def test_the_global_provider_is_a_no_op_until_an_sdk_is_set_then_it_is_followed() -> None:
    out = _python(
        _RUN_ONE
        + """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    ex = CodeExecutor(reg, runtime=InProcessRuntime())
    anyio.run(main, ex)  # the API alone: its no-op
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    print(len(exporter.get_finished_spans()))
    anyio.run(main, ex)  # the same executor follows the provider set since
    print(sorted(s.name for s in exporter.get_finished_spans()))
    """
    )
    assert out.split("\n")[:2] == ["0", "['ptc.run_code', 'ptc.tool echo']"]


async def test_with_no_provider_a_sub_call_has_no_span_and_sees_the_callers_as_current() -> None:
    # The API's no-op span only passes its parent on: the sub-call goes without
    # one (``Tracing.recording``), and its body sees what it saw before.
    from opentelemetry import context, trace

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # none set here
    seen: list[trace.SpanContext] = []
    reg = ToolRegistry()

    @reg.tool(concurrency_safe=True)
    async def where() -> str:
        """Which span is current."""
        seen.append(trace.get_current_span().get_span_context())
        return "ok"

    caller = trace.SpanContext(
        trace_id=0x1234, span_id=0x5678, is_remote=True, trace_flags=trace.TraceFlags(1)
    )
    token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(caller)))
    try:
        async with CodeExecutor(reg, runtime=InProcessRuntime()) as ex:
            result = await ex.run_code("return [await tools.where({}), await tools.where({})]")
        plain = await CodeExecutor(reg, runtime=InProcessRuntime()).run_code(
            "return await tools.where({})"
        )
    finally:
        context.detach(token)
    assert not result.is_error and not plain.is_error
    assert [(c.trace_id, c.span_id) for c in seen] == [(0x1234, 0x5678)] * 3
