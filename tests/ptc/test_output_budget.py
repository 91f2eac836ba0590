"""The output budget through the executor: what reaches the model, what the host keeps.

A ``run_code`` result longer than the budget reaches the model cut to its head
and tail around a marker; the value follows the value rule; the spill hook gets
the whole result; events carry what the model got. Every entry point applies
it: ``run_code``, ``execute`` and ``ptc run``.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio.lowlevel
import jsonschema
import orjson
import pytest

from ptc import (
    DEFAULT_OUTPUT_BUDGET,
    CodeExecutor,
    ExecutorConfigError,
    ModelCall,
    OutputSpill,
)
from ptc._executor import RUN_RESULT_SCHEMA
from registry import ToolDefinition, ToolOutput, ToolRegistry, ToolRunContext, ToolSuccess
from runtime import SubprocessRuntime
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(
    r"\[… (?P<cut>[\d,]+) of (?P<total>[\d,]+) characters cut \(budget (?P<budget>[\d,]+)\)\. "
    r"Print less: filter or summarise inside the program and return only what you need\."
    r"(?P<note> [^\]]*)?\]"
)
#: 100,000 lines of 75 characters and a newline: 7.6 MB.
BIG_PRINT = "for i in range(100_000):\n    print(f'{i:06d} ' + 'y' * 68)"
BIG_LINES = [f"{i:06d} " + "y" * 68 for i in range(100_000)]
BIG_TEXT = "\n".join(BIG_LINES)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def text_of(content: list[dict[str, Any]]) -> str:
    return "\n".join(block["text"] for block in content if block.get("type") == "text")


def split_cut(text: str) -> tuple[str, re.Match[str], str]:
    """(head, marker, tail) of a text cut once, the marker on a line of its own."""
    lines = text.split("\n")
    found = [i for i, line in enumerate(lines) if MARKER.fullmatch(line)]
    assert len(found) == 1, text[:300]
    match = MARKER.fullmatch(lines[found[0]])
    assert match is not None
    return "\n".join(lines[: found[0]]), match, "\n".join(lines[found[0] + 1 :])


def recording(**kwargs: Any) -> tuple[CodeExecutor, list[dict[str, Any]], list[OutputSpill]]:
    events: list[dict[str, Any]] = []
    spills: list[OutputSpill] = []
    kwargs.setdefault("runtime", InProcessRuntime())
    ex = CodeExecutor(ToolRegistry(), on_event=events.append, on_spill=spills.append, **kwargs)
    return ex, events, spills


def result_event(events: list[dict[str, Any]]) -> dict[str, Any]:
    (event,) = [e for e in events if e["type"] == "tool/result"]
    return event


# ----------------------------------------------------------------------------- the real worker


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def subprocess_runtime() -> AsyncIterator[SubprocessRuntime]:
    async with SubprocessRuntime() as runtime:
        yield runtime


async def test_a_7_6_mb_print_reaches_the_model_cut_to_the_budget(
    subprocess_runtime: SubprocessRuntime,
) -> None:
    ex, events, spills = recording(runtime=subprocess_runtime)
    async with ex:
        result = await ex.run_code(BIG_PRINT, call_id="big")
    assert isinstance(result, ToolSuccess)
    text = text_of(result.content)
    assert len(text) <= DEFAULT_OUTPUT_BUDGET
    head, marker, tail = split_cut(text)
    # Whole lines of the head and the tail, about 2/3 and 1/3 of the room.
    head_lines, tail_lines = head.split("\n"), tail.split("\n")
    assert head_lines == BIG_LINES[: len(head_lines)]
    assert tail_lines == BIG_LINES[-len(tail_lines) :]
    assert 19_000 <= len(head) <= 20_000 and 9_500 <= len(tail) <= 10_000
    assert number(marker["total"]) == len(BIG_TEXT) == 7_599_999
    assert number(marker["cut"]) == len(BIG_TEXT) - len(head) - len(tail)
    assert number(marker["budget"]) == 30_000
    # The value: its logs cut the same way, one marker line among them.
    value = result.value
    jsonschema.validate(value, RUN_RESULT_SCHEMA)
    assert "result" not in value
    assert len("\n".join(value["logs"])) <= DEFAULT_OUTPUT_BUDGET
    assert sum(bool(MARKER.fullmatch(line)) for line in value["logs"]) == 1
    assert value["logs"][0] == BIG_LINES[0] and value["logs"][-1] == BIG_LINES[-1]
    assert value["truncated"]["chars"] == len(BIG_TEXT)
    assert value["truncated"]["budget"] == 30_000
    # The host: the spill hook got all of it, and the event says what the model got.
    (spill,) = spills
    assert spill.call_id == "big" and spill.budget == 30_000
    assert isinstance(spill.result, ToolSuccess)
    assert spill.result.value == {"logs": BIG_LINES}
    assert spill.text == BIG_TEXT
    event = result_event(events)
    assert event["content"] == result.content
    assert event["truncated"] == {
        "chars": len(BIG_TEXT),
        "cut": number(marker["cut"]),
        "budget": 30_000,
    }
    assert result.meta["truncated"] == event["truncated"]


async def test_a_failure_with_a_large_captured_output_is_cut_too(
    subprocess_runtime: SubprocessRuntime,
) -> None:
    ex, events, spills = recording(runtime=subprocess_runtime, output_budget=5_000)
    async with ex:
        result = await ex.run_code(BIG_PRINT + "\nraise ValueError('at the end')")
    assert result.is_error and result.error.info is not None
    assert result.error.info.code == "CODE_RUN_FAILED"
    for text in (text_of(result.content), result.error.message):
        assert len(text) <= 5_000
        head, _, tail = split_cut(text)
        # The kind, the traceback and the first lines come first; the last lines last.
        assert "code run failed (exception): Traceback" in head
        assert "ValueError: at the end\nCaptured output:\n000000 " in head
        assert tail.endswith("\n".join(BIG_LINES[-3:]))
    (spill,) = spills
    assert spill.result.is_error
    assert "\n".join(BIG_LINES[-3:]) in spill.result.error.message
    assert len(spill.text) > 7_600_000
    assert result_event(events)["content"] == result.content


async def test_output_within_the_budget_is_untouched_byte_for_byte(
    subprocess_runtime: SubprocessRuntime,
) -> None:
    code = (
        "print('é\\U0001f600\"\\\\ \\x01')\n"
        "print('e\\u0301' * 100)\n"
        "return {'k': ['\\x02', 1.5, None, 'x' * 500], 'n': 2 ** 53}"
    )
    plain = CodeExecutor(ToolRegistry(), runtime=subprocess_runtime, output_budget=math.inf)
    ex, events, spills = recording(runtime=subprocess_runtime, output_budget=2_000)
    reference = await plain.run_code(code)
    result = await ex.run_code(code)
    assert isinstance(result, ToolSuccess) and isinstance(reference, ToolSuccess)
    assert orjson.dumps(result.value) == orjson.dumps(reference.value)
    assert orjson.dumps(result.content) == orjson.dumps(reference.content)
    assert "truncated" not in result.value and "truncated" not in result_event(events)
    assert "truncated" not in (result.meta or {})
    assert spills == []


# ----------------------------------------------------------------------------- configuration


async def test_the_budget_is_exactly_inclusive() -> None:
    ex, _, spills = recording(output_budget=1_000)
    exact = await ex.run_code("print('x' * 1000)")
    assert text_of(exact.content) == "x" * 1000 and spills == []
    over = await ex.run_code("print('x' * 1001)")
    assert MARKER.search(text_of(over.content)) and len(spills) == 1


async def test_a_calls_budget_beats_the_executors() -> None:
    ex, _, _ = recording(output_budget=1_000)
    assert text_of((await ex.run_code("print('x' * 5000)", output_budget=5_000)).content) == (
        "x" * 5000
    )
    unlimited = await ex.run_code("print('x' * 100_000)", output_budget=math.inf)
    assert text_of(unlimited.content) == "x" * 100_000
    assert len(text_of((await ex.run_code("print('x' * 5000)")).content)) <= 1_000
    strict = await ex.run_code("print('x' * 5000)", output_budget=400)
    assert len(text_of(strict.content)) <= 400


async def test_no_budget_for_the_executor_but_one_for_a_call() -> None:
    ex, _, _ = recording(output_budget=math.inf)
    assert text_of((await ex.run_code("print('x' * 100_000)")).content) == "x" * 100_000
    cut = await ex.run_code("print('x' * 100_000)", output_budget=500)
    assert len(text_of(cut.content)) <= 500


async def test_execute_applies_its_budget_to_the_batchs_run_code_calls() -> None:
    reg = ToolRegistry()

    async def big(args: dict[str, Any], ctx: ToolRunContext) -> str:
        return "n" * 50_000

    reg.register(
        ToolDefinition(
            name="big",
            description="A long string.",
            parameters={"type": "object"},
            output=ToolOutput(schema={"type": "string"}),
            execute=big,
        )
    )
    ex = CodeExecutor(reg, runtime=InProcessRuntime(), mode="both", output_budget=10_000)
    program = {"code": "print('p' * 50_000)", "description": "print"}
    batch = await ex.execute(
        [
            ModelCall(call_id="a", name="run_code", arguments=program),
            ModelCall(call_id="b", name="big", arguments={}),
        ],
        output_budget=3_000,
    )
    run, native = (item.result for item in batch.results)
    assert len(text_of(run.content)) <= 3_000 and MARKER.search(text_of(run.content))
    # A native tool's result is not run_code output: the budget leaves it alone.
    assert text_of(native.content) == "n" * 50_000
    default = await ex.execute([ModelCall(call_id="c", name="run_code", arguments=program)])
    assert 2_000 < len(text_of(default.results[0].result.content)) <= 10_000


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "1000"])
async def test_a_bad_budget_raises_before_anything_runs(bad: Any) -> None:
    with pytest.raises(ExecutorConfigError, match="output_budget must be a positive number"):
        CodeExecutor(ToolRegistry(), runtime=InProcessRuntime(), output_budget=bad)
    ex, events, _ = recording()
    with pytest.raises(ExecutorConfigError, match=r"math\.inf for no budget"):
        await ex.run_code("print(1)", output_budget=bad)
    with pytest.raises(ExecutorConfigError):
        await ex.execute(
            [ModelCall(call_id="x", name="run_code", arguments={"code": "", "description": ""})],
            output_budget=bad,
        )
    assert events == []


async def test_the_default_budget_applies_without_configuration() -> None:
    ex = CodeExecutor(ToolRegistry(), runtime=InProcessRuntime())
    assert ex.output_budget == DEFAULT_OUTPUT_BUDGET == 30_000
    result = await ex.run_code("print('x' * 40_000)")
    assert 29_000 < len(text_of(result.content)) <= 30_000


# ----------------------------------------------------------------------------- the value and rendering


async def test_a_large_result_is_its_json_text_cut_and_the_logs_stay_whole() -> None:
    ex, _, spills = recording(output_budget=2_000)
    result = await ex.run_code(
        "print('found them')\nreturn [{'id': i, 'tags': ['a', 'b']} for i in range(3000)]"
    )
    assert isinstance(result, ToolSuccess)
    value = result.value
    jsonschema.validate(value, RUN_RESULT_SCHEMA)
    assert value["logs"] == ["found them"]
    full = orjson.dumps([{"id": i, "tags": ["a", "b"]} for i in range(3000)]).decode()
    head, _, tail = split_cut(value["result"])
    assert full.startswith(head) and full.endswith(tail)
    assert value["truncated"]["result"] == "json"
    assert value["truncated"]["chars"] == len("found them") + len(full)
    assert isinstance(spills[0].result, ToolSuccess)
    assert spills[0].result.value["result"][2999] == {"id": 2999, "tags": ["a", "b"]}


async def test_a_result_pretty_past_the_budget_is_shown_compact_when_that_fits() -> None:
    ex, _, spills = recording(output_budget=20_000)
    result = await ex.run_code("return list(range(3000))")
    assert isinstance(result, ToolSuccess)
    text = text_of(result.content)
    assert text == orjson.dumps(list(range(3000))).decode()  # compact, whole
    assert result.value == {"logs": [], "result": list(range(3000))}
    assert spills == []
    # Within the budget pretty, it stays pretty.
    small = await ex.run_code("return list(range(10))")
    assert text_of(small.content).startswith("[\n  0,\n  1,")


# ----------------------------------------------------------------------------- the spill hook


async def test_an_async_spill_hooks_note_reaches_the_marker_and_the_value() -> None:
    seen: list[OutputSpill] = []

    async def spill(s: OutputSpill) -> str:
        await anyio.lowlevel.checkpoint()
        seen.append(s)
        return f"The whole output is in /tmp/{s.call_id}.txt\n(read it with tools)."

    ex = CodeExecutor(
        ToolRegistry(), runtime=InProcessRuntime(), output_budget=1_000, on_spill=spill
    )
    result = await ex.run_code("print('x' * 5000)", call_id="c1")
    assert isinstance(result, ToolSuccess)
    _, marker, _ = split_cut(text_of(result.content))
    # One line: the note's whitespace is folded.
    assert marker["note"] == " The whole output is in /tmp/c1.txt (read it with tools)."
    assert result.value["truncated"]["note"] == marker["note"].strip()
    assert len(text_of(result.content)) <= 1_000
    assert seen[0].text == "x" * 5000


async def test_a_spill_hook_that_raises_or_returns_junk_changes_nothing_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(s: OutputSpill) -> str:
        raise RuntimeError("disk full")

    def junk(s: OutputSpill) -> Any:
        return 42

    for hook in (broken, junk):
        ex = CodeExecutor(
            ToolRegistry(), runtime=InProcessRuntime(), output_budget=1_000, on_spill=hook
        )
        result = await ex.run_code("print('x' * 5000)")
        assert isinstance(result, ToolSuccess)
        _, marker, _ = split_cut(text_of(result.content))
        assert marker["note"] is None and "note" not in result.value["truncated"]
    assert "the on_spill hook raised" in caplog.text
    assert "not a str" in caplog.text


# ----------------------------------------------------------------------------- ptc run


def ptc_run(*args: str, program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptc", "run", "-", "--tools", "examples/tools.py:registry", *args],
        cwd=ROOT,
        input=program,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ptc_run_output_budget_cuts_what_it_prints() -> None:
    program = "for i in range(2000):\n    print(f'line {i:04d}')"
    out = ptc_run("--output-budget", "1000", "--quiet", program=program)
    assert out.returncode == 0, out.stderr
    text = out.stdout.removesuffix("\n")
    assert len(text) <= 1_000
    head, marker, tail = split_cut(text)
    assert head.startswith("line 0000\n") and tail.endswith("line 1999")
    assert number(marker["budget"]) == 1_000
    whole = ptc_run("--output-budget", "off", "--quiet", program=program)
    assert whole.stdout == "\n".join(f"line {i:04d}" for i in range(2000)) + "\n"


def test_ptc_run_json_shows_the_cut_value_and_event() -> None:
    out = ptc_run("--output-budget", "500", "--json", program="print('x' * 5000)\nreturn 7")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["value"]["result"] == 7
    assert payload["value"]["truncated"]["budget"] == 500
    (event,) = [e for e in payload["events"] if e["type"] == "tool/result"]
    assert event["truncated"]["budget"] == 500 and event["content"] == payload["content"]
    assert len(text_of(payload["content"])) <= 500


@pytest.mark.parametrize("bad", ["0", "-1", "lots"])
def test_ptc_run_rejects_a_bad_budget_in_one_line(bad: str) -> None:
    out = ptc_run("--output-budget", bad, program="print(1)")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "--output-budget must be a positive number of characters or 'off'" in out.stderr
