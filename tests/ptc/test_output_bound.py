"""The output limit bounds what the caller finally receives, in bytes.

``Limits.max_output_bytes`` counts UTF-8 bytes as JSON escapes them (4-byte
characters, quotes, control characters escaped to 6 bytes) plus 4 bytes per
line, on the host. So the ``{logs, result}`` value serialised as JSON and the
rendered content stay within the limit, and a failure's text within the limit
plus the failure's own few words. ``ptc run --json`` prints the output three
times: as its value (compact JSON) and as the rendered text in its content
and in the ``tool/result`` event (each a JSON string, where a JSON result's
quotes are escaped once more, up to twice their size): within five times the
limit plus its fixed parts.
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

import ptc._run
from ptc import CodeExecutor
from ptc._run import RunOptions, run_program
from registry import ToolRegistry
from runtime import Limits, SubprocessRuntime

pytestmark = pytest.mark.anyio

LIMIT = 20_000
# A failure's text adds its kind and message ("code run failed (output_limit):
# the program's output exceeded 20000 bytes", "Captured output:") to the logs.
FAILURE_WORDS = 256

# Each passed the old count (characters, one per line) or made more of itself
# once rendered; each must now stay within the limit, as a success or a failure.
PROGRAMS = {
    "four-byte characters": "for i in range(19):\n    print('\U0001f600' * 1000)",
    "four-byte flood": "while True:\n    print('\U0001f600' * 1000)",
    "newlines": "print('\\n' * 19_000)",
    "newline flood": "while True:\n    print('\\n' * 100_000)",
    "quotes": "for i in range(11):\n    print('\"' * 1000)",
    "control characters": "for i in range(9):\n    print('\\x01\\x1f' * 500)",
    "control-character result": "return '\\x02' * 10_000",
    "large result": "return ['x' * 8] * 10_000",
    "nested result": "return [[[[[[[0]]]]]]] * 1_000",
    "escape-heavy keys": "return {'\"\\x03' * 4 + str(i): '\\\\' for i in range(1_000)}",
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def executor() -> AsyncIterator[CodeExecutor]:
    async with SubprocessRuntime() as runtime:
        yield CodeExecutor(ToolRegistry(), runtime=runtime, limits=Limits(max_output_bytes=LIMIT))


def text_of(content: list[dict[str, Any]]) -> str:
    return "\n".join(block["text"] for block in content if block.get("type") == "text")


@pytest.mark.parametrize("code", PROGRAMS.values(), ids=PROGRAMS.keys())
async def test_what_the_caller_receives_stays_within_the_limit(
    executor: CodeExecutor, code: str
) -> None:
    result = await executor.run_code(code)
    text = text_of(result.content)
    if result.is_error:
        assert "code run failed (output_limit)" in text, text[:300]
        assert len(text.encode()) <= LIMIT + FAILURE_WORDS
        assert len(result.error.message.encode()) <= LIMIT + FAILURE_WORDS
    else:
        assert len(orjson.dumps(result.value)) <= LIMIT
        assert len(text.encode()) <= LIMIT


async def test_output_within_the_limit_still_comes_back_whole(executor: CodeExecutor) -> None:
    result = await executor.run_code(
        "for i in range(100):\n    print('\U0001f600\\x01\"' * 10)\nreturn [[[['\\x02']]]] * 100"
    )
    assert not result.is_error, result
    assert result.value["logs"] == ['\U0001f600\x01"' * 10] * 100
    assert result.value["result"] == [[[["\x02"]]]] * 100
    # Small enough to be shown pretty-printed, as ever.
    assert '[\n  [\n    [\n      [\n        "\\u0002"' in text_of(result.content)


@pytest.mark.parametrize("name", ["four-byte characters", "newlines", "nested result"])
def test_ptc_run_json_stays_within_its_bound(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ptc._run, "Limits", functools.partial(Limits, max_output_bytes=LIMIT))
    code = PROGRAMS[name]
    # In a thread of its own: this module's async fixture keeps an event loop
    # running in the test thread, where `ptc run`'s own anyio.run cannot start.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(run_program, ToolRegistry(), code, RunOptions(as_json=True)).result()
    printed = capsys.readouterr().out
    payload = orjson.loads(printed)
    # Its fixed parts: the keys, the events' ids and times, and the program itself.
    fixed = 2048 + 2 * len(code)
    assert len(printed.encode()) <= 5 * LIMIT + fixed
    if payload["is_error"]:
        assert len(payload["error"]["message"].encode()) <= LIMIT + FAILURE_WORDS
    else:
        assert len(orjson.dumps(payload["value"])) <= LIMIT
    assert len(text_of(payload["content"]).encode()) <= LIMIT + FAILURE_WORDS
