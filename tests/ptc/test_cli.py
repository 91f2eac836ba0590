"""The ``ptc`` command line, run as a user would (a real subprocess)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "github-mcp-server.json"


def ptc(
    *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptc", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_tools_lists_the_example_tool_set() -> None:
    out = ptc("tools", "--tools", "examples/tools.py:registry")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "add_comment",
        "close_issue",
        "create_issue",
        "get_doc",
        "get_issue",
        "list_issues",
        "search_docs",
    ]
    search = next(line for line in lines if line.startswith("search_docs"))
    assert search.split()[1] == "parallel"
    assert "Full-text search over the team's engineering docs" in search
    assert next(line for line in lines if line.startswith("create_issue")).split()[1] == "exclusive"


def test_tools_accepts_a_module_spec_and_default_attribute() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ptc", "tools", "--tools", "tools"],
        cwd=ROOT / "examples",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "search_docs" in out.stdout


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("examples/nope.py:registry", "no such file: examples/nope.py"),
        ("examples/tools.py:nothing", "has no attribute 'nothing'"),
        ("examples/tools.py:LATENCY", "is a float, not a ToolRegistry"),
        ("no_such_module_xyz:registry", "no such module: no_such_module_xyz"),
    ],
)
def test_tools_bad_spec_is_one_clear_line(spec: str, message: str) -> None:
    out = ptc("tools", "--tools", spec)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert message in out.stderr


def test_sdk_for_the_corpus_json() -> None:
    out = ptc("sdk", "--tools", str(CORPUS), "--stats")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tools: 117 ")
    text = ptc("sdk", "--tools", str(CORPUS), "--no-instructions")
    assert text.returncode == 0
    compile(text.stdout, "<sdk>", "exec")
    assert "Writing code for run_code" not in text.stdout


def test_sdk_for_a_registry_respects_scope(tmp_path: Path) -> None:
    spec = tmp_path / "scoped.py"
    spec.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'examples')!r})\n"
        "from tools import make_registry\n"
        "registry = make_registry()\n"
        "registry.restrict('reader', allow=['search_docs', 'get_doc'])\n",
        encoding="utf-8",
    )
    out = ptc("sdk", "--tools", f"{spec}:registry", "--scope", "reader")
    assert out.returncode == 0, out.stderr
    assert "async def search_docs" in out.stdout and "async def get_doc" in out.stdout
    assert "create_issue" not in out.stdout


def test_sdk_bad_json_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    out = ptc("sdk", "--tools", str(bad))
    assert (
        out.returncode == 2 and "is not valid JSON" in out.stderr and "Traceback" not in out.stderr
    )
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"hello": 1}', encoding="utf-8")
    out = ptc("sdk", "--tools", str(wrong))
    assert (
        out.returncode == 2
        and out.stderr.startswith("ptc: error: ")
        and "Traceback" not in out.stderr
    )


# --------------------------------------------------------------------------- ptc run, end to end


def test_run_fanout_example_with_json_and_events(tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    out = ptc(
        "run",
        "examples/programs/fanout_search.py",
        "--tools",
        "examples/tools.py:registry",
        "--json",
        "--events",
        str(events_file),
    )
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["is_error"] is False
    assert payload["value"]["result"] == {"queries": 4, "distinct_docs": 3}
    assert payload["value"]["logs"][0].startswith("caching: Caching guidelines")
    kinds = [e["type"] for e in payload["events"]]
    # 4 searches + 3 fetches, each started and settled once, inside one outer call.
    assert kinds.count("tool/ptc-dispatch-start") == 7 and kinds.count("tool/ptc-dispatch") == 7
    assert kinds[0] == "tool/call" and kinds[-1] == "tool/result"
    logged = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines()]
    assert logged == payload["events"]


def test_run_triage_example_runs_writes_in_order() -> None:
    out = ptc(
        "run", "examples/programs/triage_workflow.py", "--tools", "examples/tools.py", "--json"
    )
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["value"]["result"] == {"triaged": [1], "created": 4}
    names = [e["name"] for e in payload["events"] if e["type"] == "tool/ptc-dispatch-start"]
    assert names == ["list_issues", "add_comment", "create_issue"]


def test_run_error_handling_example_prints_model_facing_text() -> None:
    out = ptc("run", "examples/programs/handle_errors.py", "--tools", "examples/tools.py")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("could not close #3: issue 3 is already closed\n{")
    assert "get_doc: no doc with id 'no-such-doc'" in out.stdout


def test_run_failed_program_exits_1_with_captured_output() -> None:
    out = ptc("run", "-", "--tools", "examples/tools.py", stdin="print('step 1')\n1/0\n")
    assert out.returncode == 1
    assert out.stdout.startswith("Error: code run failed (exception): ")
    assert "ZeroDivisionError" in out.stdout
    assert out.stdout.rstrip().endswith("Captured output:\nstep 1")


def test_run_timeout_is_a_failed_run() -> None:
    out = ptc(
        "run",
        "-",
        "--tools",
        "examples/tools.py",
        "--timeout",
        "0.5",
        stdin="while True:\n    pass\n",
    )
    assert out.returncode == 1
    assert out.stdout.startswith("Error: code run failed (timeout): ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "native"], "--mode must be code or both"),
        (["--max-parallel", "0"], "--max-parallel must be at least 1"),
        (["--runtime", "nope"], "nope"),
    ],
)
def test_run_usage_errors_exit_2(args: list[str], message: str) -> None:
    out = ptc("run", "-", "--tools", "examples/tools.py", *args, stdin="return 1")
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


def test_run_missing_program_file_exits_2() -> None:
    out = ptc("run", "examples/programs/nope.py", "--tools", "examples/tools.py")
    assert out.returncode == 2 and "cannot read examples/programs/nope.py" in out.stderr


def test_agent_loop_example() -> None:
    out = subprocess.run(
        [sys.executable, "examples/agent_loop.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("[call_1] error: Error: only `run_code` is callable directly")
    assert lines[1] == "[call_2] ok: Retry policy for outbound HTTP calls"
    assert out.stdout.rstrip().endswith(
        "Done. The program said:\nRetry policy for outbound HTTP calls\nTimeouts and deadlines\n2"
    )


# --------------------------------------------------------------------------- doctor, runtime install


def test_doctor_reports_every_layer() -> None:
    out = ptc("doctor", "--strict")
    assert out.returncode == 0, out.stdout + out.stderr
    for layer in (
        "environment",
        "user-namespace",
        "network-namespace",
        "mount-namespace",
        "pid-namespace",
        "privileges",
        "rlimits",
        "landlock",
        "seccomp",
    ):
        line = next(
            line for line in out.stdout.splitlines() if line.strip().startswith(layer + " ")
        )
        assert " active " in line, line
    assert "protects against:" in out.stdout
    assert "Pyodide worker" in out.stdout and "usable" in out.stdout


def test_runtime_install_unknown_name_exits_2() -> None:
    out = ptc("runtime", "install", "nodejs")
    assert out.returncode == 2 and "only pyodide needs installing" in out.stderr


def _pyodide_unusable() -> bool:
    # In CI the worker must be installed (never skip there); elsewhere say why it is skipped.
    from runtime import pyodide_status

    return not os.environ.get("CI") and pyodide_status()["usable"] != "yes"


@pytest.mark.pyodide
@pytest.mark.skipif(
    _pyodide_unusable(), reason="Pyodide not installed: ptc runtime install pyodide"
)
@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("fanout_search.py", {"queries": 4, "distinct_docs": 3}),
        ("triage_workflow.py", {"triaged": [1], "created": 4}),
        (
            "handle_errors.py",
            {
                "found": ["Timeouts and deadlines", "Caching guidelines"],
                "missing": ["get_doc: no doc with id 'no-such-doc'"],
            },
        ),
    ],
)
def test_run_examples_on_the_pyodide_worker(program: str, expected: object) -> None:
    out = ptc(
        "run",
        f"examples/programs/{program}",
        "--tools",
        "examples/tools.py",
        "--runtime",
        "pyodide",
        "--json",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["value"]["result"] == expected


# --------------------------------------------------------------------------- fail closed, the language layer

DENY_SYSCALLS = ROOT / "tests" / "runtime" / "deny_syscalls.py"


def test_doctor_says_the_worker_fails_closed_and_what_the_allow_list_is() -> None:
    out = ptc("doctor")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert 'fail closed: isolation="strict" (the default)' in text
    assert re.search(r"here   all \d+ layers active", text)
    # The probe is set up as a runtime's workers are: it joins a namespace template.
    assert "made once by the runtime, joined by each worker" in text
    assert "the runtime's network namespace, made once and shared" in text
    # The language layer is its own section, and says what it is not.
    assert "language layer (a convenience, not a security boundary)" in text
    assert "the OS layers above are the boundary" in text
    os_section = text.split("language layer")[0]
    assert "import allow-list" not in os_section
    # The Pyodide worker's section says storage is off and the realm locked down.
    pyodide_section = text.split("Pyodide worker (WebAssembly in Deno)")[1]
    assert re.search(r"^  storage +off \(no web storage", pyodide_section, re.M), pyodide_section
    assert re.search(r"^  realm +locked down", pyodide_section, re.M), pyodide_section


def test_doctor_on_a_host_without_user_namespaces_names_them_and_the_ways_out() -> None:
    out = subprocess.run(
        [sys.executable, str(DENY_SYSCALLS), "namespaces", "--", "-m", "ptc", "doctor", "--strict"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "user-namespace     UNAVAILABLE  unshare refused" in out.stdout
    assert "MISSING: user-namespace, mount-namespace" in out.stdout
    assert "Runs end as `sandbox` on this machine" in out.stdout
    assert 'isolation="best-effort"' in out.stdout and "Pyodide worker" in out.stdout


@pytest.mark.parametrize("isolation", [None, "best-effort"])
def test_run_reports_the_isolation_in_its_result_event(isolation: str | None) -> None:
    extra = [] if isolation is None else ["--isolation", isolation]
    out = ptc("run", "-", "--tools", "examples/tools.py", "--json", *extra, stdin="return 1")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["content"] == [{"type": "text", "text": "1"}]
    assert payload["events"][-1]["isolation"] == {
        "mode": isolation or "strict",
        "runtime": "subprocess",
        "missing": [],
        "off": [],
    }


def test_run_rejects_an_isolation_the_runtime_does_not_offer() -> None:
    out = ptc("run", "-", "--tools", "examples/tools.py", "--isolation", "none", stdin="return 1")
    assert out.returncode == 2 and "--isolation must be strict or best-effort" in out.stderr
    out = ptc(
        "run", "-", "--tools", "examples/tools.py", "--runtime", "pyodide",
        "--isolation", "best-effort", stdin="return 1",
    )  # fmt: skip
    assert out.returncode == 2 and "is for the subprocess runtime" in out.stderr


def test_sdk_discovery_prints_the_index_and_its_stats() -> None:
    from typer.testing import CliRunner

    from ptc._cli import app
    from sdkgen import normalize_tool_schemas, render_discovery

    expected = render_discovery(normalize_tool_schemas(json.loads(CORPUS.read_text())))
    out = CliRunner().invoke(app, ["sdk", "--tools", str(CORPUS), "--discovery"])
    assert out.exit_code == 0, out.output
    assert out.output.rstrip("\n") == expected.rstrip("\n")
    stats = CliRunner().invoke(app, ["sdk", "--tools", str(CORPUS), "--discovery", "--stats"])
    assert (
        stats.output.strip()
        == f"tools: 117  chars: {len(expected)}  approx tokens: {(len(expected) + 3) // 4}"
    )
