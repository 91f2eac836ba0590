"""The host survives any frame: the frame parser and a whole run, fuzzed.

Every frame is parsed with bounded size and depth before any host code touches
it; anything else ends the run as ``protocol``. Hypothesis throws random and
adversarial frames at :func:`parse_worker_frame` and, over a socket pair, at a
whole run (``drive_run``): depth, size, duplicate and unknown keys, ids,
types, interleavings of every frame type, truncated headers, huge length
prefixes, exit statuses. Zero host exceptions; every run ends in one outcome,
within its limits. Then the bound end to end: a frame at exactly the bound
goes through ``ptc run --json``, one beyond it ends the run as ``protocol``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import FailureKind, Limits, RunOutcome, ToolAnswer
from runtime._host._pool import Worker
from runtime._host._session import drive_run
from runtime._worker._protocol import MAX_JSON_DEPTH, ProtocolError, parse_worker_frame
from runtime._worker._wire import MAX_FRAME_BRACKETS

ROOT = Path(__file__).resolve().parents[2]
READY = {"type": "ready", "layers": [["rlimits", True, "fake"]]}
KINDS = set(typing.get_args(FailureKind))
ERROR_KINDS = [*sorted(KINDS), "nope"]


def nest(levels: int) -> Any:
    """A list nested ``levels`` deep (``[]`` is one level)."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def deep_bytes(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def frame_bytes(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)
# Raw JSON text for what orjson cannot write: duplicate keys, nesting past the
# bounds (theirs and ours), a deep ``type``.
raw_payloads = st.sampled_from(
    [
        b'{"type":"log","text":"a","text":"b"}',
        b'{"type":"done","type":"error","kind":"timeout","message":"x"}',
        b'{"type":"call","id":1,"name":"echo","args":{},"args":' + deep_bytes(300) + b"}",
        b'{"type":"call","id":1,"name":"echo","args":' + deep_bytes(MAX_JSON_DEPTH) + b"}",
        b'{"type":"call","id":1,"name":"echo","args":' + deep_bytes(MAX_JSON_DEPTH + 1) + b"}",
        b'{"type":"done","result":' + deep_bytes(1023) + b"}",
        b'{"type":"done","result":' + deep_bytes(5000) + b"}",
        b'{"type":' + deep_bytes(1000) + b"}",
        b'{"type":"error","kind":' + deep_bytes(900) + b',"message":""}',
        b'{"type":"log","text":"\\ud800"}',
        b'{"type":"log","text":"a\nb"}',
        b'{"type":"call","id":18446744073709551616,"name":"echo","args":{}}',
        b"[]",
        b"",
        b"\xff\xfe",
    ]
)
frames = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("call"),
            "id": st.integers(min_value=-1, max_value=6) | json_values,
            "name": st.sampled_from(["echo", "nope", ""]) | json_values,
            "args": json_values | st.integers(MAX_JSON_DEPTH - 2, 253).map(nest),
        }
    ),
    st.fixed_dictionaries({"type": st.just("log"), "text": st.text(max_size=40) | json_values}),
    st.fixed_dictionaries({"type": st.just("overflow"), "text": st.text(max_size=40)}),
    st.just({"type": "done"}),
    st.fixed_dictionaries(
        {"type": st.just("done"), "result": json_values | st.integers(240, 253).map(nest)}
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("error"),
            "kind": st.sampled_from(ERROR_KINDS) | json_values,
            "message": st.text(max_size=40)
            | st.just("Traceback (most recent call last):\nMemoryError")
            | json_values,
        }
    ),
    st.just(READY),
    st.fixed_dictionaries({"type": st.just("ready"), "layers": json_values}),
    st.fixed_dictionaries(
        {
            "type": st.just("answer"),
            "id": st.integers(0, 3),
            "ok": st.booleans(),
            "value": json_values,
        }
    ),
    st.dictionaries(
        st.sampled_from(["type", "id", "name", "args", "text", "kind", "message", "result", "x"]),
        json_values,
        max_size=5,
    ),
    json_values,
)
# Values nested around the bound and past orjson's own (which parses 1024 levels).
deep_payloads = st.builds(
    lambda head, levels: head + deep_bytes(levels) + b"}",
    st.sampled_from([b'{"type":"call","id":1,"name":"echo","args":', b'{"type":"done","result":']),
    st.integers(MAX_JSON_DEPTH - 2, 1100),
)
# (The standard library's encoder writes integers of any size, unlike orjson.)
payloads = (
    frames.map(lambda frame: json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode())
    | raw_payloads
    | deep_payloads
    | st.binary(max_size=48)
)
chunks = st.one_of(
    payloads.map(frame_bytes),
    st.binary(min_size=1, max_size=3),  # a torn header
    st.integers(min_value=1 << 20, max_value=(1 << 32) - 1).map(
        lambda size: struct.pack(">I", size)
    ),
)
exits = st.sampled_from(
    [
        (0, 0.0, 0),
        (3 << 8, 0.0, 0),
        (signal.SIGXCPU, 0.1, 0),
        (signal.SIGKILL, 2.0, 0),
        (signal.SIGKILL, 0.0, 400 << 20),
        (signal.SIGSEGV, 0.0, 0),
    ]
)
limits = st.builds(
    Limits,
    timeout=st.just(5.0),
    cpu_seconds=st.just(2.0),
    memory_bytes=st.just(512 << 20),
    max_output_bytes=st.integers(min_value=1, max_value=4096),
    max_tool_calls=st.integers(min_value=1, max_value=4),
    max_message_bytes=st.integers(min_value=64, max_value=1 << 16),
)


# --------------------------------------------------------------------------- the parser


def parses_or_refuses(payload: bytes) -> None:
    try:
        frame = parse_worker_frame(payload)
    except ProtocolError:
        return
    # What it accepts, the rest of the host can serialise (events, JSON output)
    # even three levels further down.
    orjson.dumps({"a": [{"b": dict(frame)}]})


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(payloads)
def test_the_parser_accepts_a_frame_or_raises_protocol_error(payload: bytes) -> None:
    parses_or_refuses(payload)


@given(st.binary(max_size=256))
def test_the_parser_survives_any_bytes(payload: bytes) -> None:
    parses_or_refuses(payload)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"type":' + deep_bytes(1000) + b"}",  # its repr nests past the recursion limit
        b'{"type":{"a":1}}',
        b'{"type":"error","kind":[],"message":""}',  # unhashable
        b'{"type":"error","kind":{},"message":""}',
        b'{"type":"call","id":1,"name":"echo","args":' + deep_bytes(1024) + b"}",
        b'{"type":"call","id":1,"name":"echo","args":' + deep_bytes(100_000) + b"}",
    ],
)
def test_adversarial_frames_are_protocol_errors(payload: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_worker_frame(payload)


@pytest.mark.parametrize("key", ["args", "result"])
def test_values_nest_at_most_the_bound(key: str) -> None:
    head = (
        b'{"type":"call","id":1,"name":"echo","args":'
        if key == "args"
        else b'{"type":"done","result":'
    )
    assert parse_worker_frame(head + deep_bytes(MAX_JSON_DEPTH) + b"}")
    within = orjson.dumps({"type": "done", "result": {"k": [nest(MAX_JSON_DEPTH - 2), "[" * 400]}})
    assert parse_worker_frame(within)  # brackets in strings are not nesting
    with pytest.raises(ProtocolError, match="deeper than"):
        parse_worker_frame(head + deep_bytes(MAX_JSON_DEPTH + 1) + b"}")


# --------------------------------------------------------------------------- a whole run


class FakeWorker:
    """The worker side of a channel, written in one go by the test, and its exit."""

    def __init__(self) -> None:
        host, self.peer = socket.socketpair()
        status_r, self.status_w = os.pipe()
        os.set_blocking(status_r, False)
        self.worker = Worker(os.getpid(), host, status_r)
        self.worker._exited = True  # never signal the test process

    def play(self, data: bytes, status: int, cpu: float, rss: int) -> None:
        self.peer.sendall(data)
        self.peer.close()
        os.write(self.status_w, b"%d %.3f %d" % (status, cpu, rss // 1024))
        os.close(self.status_w)

    def close(self) -> None:
        self.worker.close()


async def fuzz_run(data: bytes, exit_status: tuple[int, float, int], run_limits: Limits) -> None:
    fake = FakeWorker()
    calls: list[tuple[str, Any]] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        calls.append((name, args))
        if len(calls) % 3 == 0:
            raise RuntimeError("the tool broke")  # a tool's failure is an answer
        return ToolAnswer.success({"echo": args})

    try:
        fake.play(data, *exit_status)
        with anyio.fail_after(10):
            outcome = await drive_run(
                fake.worker,
                code="return 1",
                tool_names=["echo"],
                call_tool=call_tool,
                limits=run_limits,
                cancel=None,
            )
    finally:
        fake.close()
    check_outcome(outcome, run_limits)
    assert len(calls) <= run_limits.max_tool_calls
    assert all(name == "echo" for name, _ in calls)


def check_outcome(outcome: RunOutcome, run_limits: Limits) -> None:
    assert isinstance(outcome, RunOutcome)
    assert outcome.kind is None or outcome.kind in KINDS
    assert all(type(line) is str for line in outcome.logs)
    assert 0 <= outcome.tool_calls <= run_limits.max_tool_calls
    # What the caller receives serialises, within the output limit: the
    # ``{logs, result}`` value of a run that ended well, the logs of any other.
    value: dict[str, Any] = {"logs": outcome.logs}
    if outcome.has_result:
        value["result"] = outcome.result
    if outcome.ok:
        assert len(orjson.dumps(value)) <= run_limits.max_output_bytes
    assert len(orjson.dumps(outcome.logs)) <= run_limits.max_output_bytes + 2  # "[]"
    orjson.dumps({"a": [{"b": value, "message": outcome.message}]})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.booleans(),
    st.lists(chunks, max_size=10),
    exits,
    limits,
)
def test_a_run_survives_any_stream_of_frames(
    greet: bool,
    parts: list[bytes],
    exit_status: tuple[int, float, int],
    run_limits: Limits,
) -> None:
    data = (frame_bytes(orjson.dumps(READY)) if greet else b"") + b"".join(parts)
    anyio.run(fuzz_run, data, exit_status, run_limits)


def test_a_run_survives_a_stream_past_every_bound() -> None:
    parts = [
        READY,
        {"type": "log", "text": "\n" * 500},
        {"type": "call", "id": 1, "name": "echo", "args": {"a": 1}},
    ]
    data = b"".join(frame_bytes(orjson.dumps(part)) for part in parts)
    deep = b'{"type":"call","id":2,"name":"echo","args":' + deep_bytes(1020) + b"}"
    anyio.run(fuzz_run, data + frame_bytes(deep), (0, 0.0, 0), Limits(timeout=5))


# --------------------------------------------------------------------------- end to end

_FORGE = """
run = tools.search_docs._run
payload = b'{{"type":"call","id":1,"name":"search_docs","args":' + b'[' * {depth} + b']' * {depth} + b'}}'
run.calls = 1
future = run.loop.create_future()
run.pending[1] = (future, 'search_docs')
run.sock.sendall(len(payload).to_bytes(4, 'big') + payload)
try:
    await future
except ToolCallError as exc:
    print('refused:', exc.message[:40])
value = []
for _ in range({depth} - 1):
    value = [value]
return value
"""


def ptc_run_json(tmp_path: Path, code: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    program = tmp_path / "program.py"
    program.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptc",
            "run",
            str(program),
            "--tools",
            "examples/tools.py:registry",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(done.stdout)


def test_a_frame_at_the_bound_goes_through_ptc_run_json(tmp_path: Path) -> None:
    done, payload = ptc_run_json(tmp_path, _FORGE.format(depth=MAX_JSON_DEPTH))
    assert done.returncode == 0, payload
    start = next(e for e in payload["events"] if e["type"] == "tool/ptc-dispatch-start")
    assert start["arguments"] == nest(MAX_JSON_DEPTH)
    assert payload["value"]["result"] == nest(MAX_JSON_DEPTH)


def test_a_frame_past_the_bound_ends_the_run_as_protocol(tmp_path: Path) -> None:
    # 1000 levels: past the bound, within orjson's own (which parses 1024).
    done, payload = ptc_run_json(tmp_path, _FORGE.format(depth=1000))
    assert done.returncode == 1
    assert "code run failed (protocol)" in payload["error"]["message"], payload["error"]
    assert not any(e["type"] == "tool/ptc-dispatch-start" for e in payload["events"])


def test_a_frame_of_too_many_arrays_is_refused_unparsed() -> None:
    # Each array costs the host far more to parse than its 3 bytes: a frame of
    # them is refused by a count in C, not parsed.
    many = b'{"type":"call","id":1,"name":"echo","args":[' + b"[]," * MAX_FRAME_BRACKETS + b"[]]}"
    with pytest.raises(ProtocolError, match="'\\[' and '\\{'"):
        parse_worker_frame(many)
    text = orjson.dumps({"type": "log", "text": "[" * (MAX_FRAME_BRACKETS - 8)})
    assert parse_worker_frame(text)["type"] == "log"  # at the bound
