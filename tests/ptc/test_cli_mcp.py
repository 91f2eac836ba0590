"""``--tools`` with ``mcpServers`` files: the ``ptc`` command line against a real MCP server.

The server is ``mcp-server-time`` from PyPI, started by ``ptc`` itself from a config
file written here. Its command line carries a marker (``-X ptc_test_marker=<uuid>``, an
option CPython accepts and ignores), so a test can tell from ``/proc`` whether a server
process is still alive once ``ptc`` has exited.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from ptc._cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TOOLS = "examples/tools.py:registry"
SCHEMAS = ROOT / "tests" / "data" / "github-mcp-server.json"
TIME_ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


def ptc(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptc", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def cli(*args: str) -> tuple[int, str, str]:
    """``ptc`` in this process (for cases that start no server): exit code, stdout, stderr."""
    out = CliRunner().invoke(app, list(args))
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    return out.exit_code, out.stdout, out.stderr


def server_pids(marker: str) -> list[int]:
    """The live processes whose command line holds ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # it ended while we looked
            continue
        if marker.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def time_entry(marker: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [
            "-X",
            f"ptc_test_marker={marker}",
            "-m",
            "mcp_server_time",
            "--local-timezone",
            "UTC",
        ],
    }


def write_config(path: Path, servers: dict[str, Any]) -> str:
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return str(path)


@pytest.fixture
def marker() -> Iterator[str]:
    """A marker for this test's servers; none of them may outlive the test's ``ptc``."""
    value = uuid.uuid4().hex
    yield value
    left = server_pids(value)
    for pid in left:  # don't leak into later tests, but fail this one
        os.kill(pid, signal.SIGKILL)
    assert left == [], "an MCP server process outlived ptc"


@pytest.fixture
def mcp_json(tmp_path: Path, marker: str) -> str:
    """An ``mcpServers`` file with the time server (local zone UTC) as ``time``."""
    return write_config(tmp_path / "mcp.json", {"time": time_entry(marker)})


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("ptc: error: ")
    return out.stderr.rstrip("\n")


# --------------------------------------------------------------------------- ptc tools


def test_tools_json_lists_the_time_servers_tools(mcp_json: str, marker: str) -> None:
    out = ptc("tools", "--tools", mcp_json, "--json")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    tools = json.loads(out.stdout)
    assert [t["name"] for t in tools] == ["time.convert_time", "time.get_current_time"]
    current = tools[1]
    assert current["description"] == "Get current time in a specific timezone"
    assert current["parameters"]["required"] == ["timezone"]
    assert current["output"]["required"] == ["timezone", "datetime", "day_of_week", "is_dst"]
    for tool in tools:
        assert set(tool) == {
            "name", "description", "parameters", "output", "concurrency", "annotations"
        }  # fmt: skip
        assert tool["concurrency"] == "parallel"  # because the server says readOnlyHint
        assert tool["annotations"] == TIME_ANNOTATIONS
    assert server_pids(marker) == []


def test_tools_text_shows_concurrency_and_annotations(mcp_json: str) -> None:
    out = ptc("tools", "--tools", EXAMPLE_TOOLS, "--tools", mcp_json)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "add_comment", "close_issue", "create_issue", "get_doc", "get_issue", "list_issues",
        "search_docs", "time.convert_time", "time.get_current_time",
    ]  # fmt: skip
    current = lines[-1]
    assert current.split()[1] == "parallel"
    assert "Get current time in a specific timezone" in current
    assert current.endswith("  [read-only, non-destructive, idempotent, closed-world]")
    # The annotations form one aligned column; tools without annotations have none.
    assert lines[-2].index("[") == current.index("[")
    assert "[" not in lines[0] and lines[0].split()[1] == "exclusive"


def test_tools_json_of_a_python_tool_set_says_classified_and_its_annotations(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "classified.py"
    spec.write_text(
        "from registry import ToolAnnotations, ToolDefinition, ToolOutput, ToolRegistry\n"
        "async def body(args, ctx):\n"
        "    return None\n"
        "registry = ToolRegistry()\n"
        "for name, safe, annotations in [\n"
        "    ('delete', False, ToolAnnotations(title='Delete it', destructive=True)),\n"
        "    ('maybe', lambda args: args.get('dry', False), None),\n"
        "]:\n"
        "    registry.register(ToolDefinition(\n"
        "        name=name, description=name.title() + '.', parameters={'type': 'object'},\n"
        "        output=ToolOutput(schema={'type': 'null'}), execute=body,\n"
        "        concurrency_safe=safe, annotations=annotations))\n",
        encoding="utf-8",
    )
    code, stdout, stderr = cli("tools", "--tools", f"{spec}:registry", "--json")
    assert code == 0, stderr
    assert json.loads(stdout) == [
        {
            "name": "delete",
            "description": "Delete.",
            "parameters": {"type": "object"},
            "output": {"type": "null"},
            "concurrency": "exclusive",
            "annotations": {"title": "Delete it", "destructiveHint": True},
        },
        {
            "name": "maybe",
            "description": "Maybe.",
            "parameters": {"type": "object"},
            "output": {"type": "null"},
            "concurrency": "classified",
        },
    ]
    code, stdout, _ = cli("tools", "--tools", f"{spec}:registry")
    assert code == 0
    assert stdout.splitlines() == [
        'delete  exclusive   Delete.  ["Delete it", destructive]',
        "maybe   classified  Maybe.",
    ]


def test_a_python_tool_that_takes_an_mcp_tools_name_is_kept_with_a_warning(
    tmp_path: Path, mcp_json: str
) -> None:
    spec = tmp_path / "clash.py"
    spec.write_text(
        "from registry import ToolRegistry\n"
        "registry = ToolRegistry()\n"
        "@registry.tool(name='time.get_current_time')\n"
        "async def mine(timezone: str) -> str:\n"
        "    '''Mine, not the server's.'''\n"
        "    return timezone\n",
        encoding="utf-8",
    )
    out = ptc("tools", "--tools", f"{spec}:registry", "--tools", mcp_json)
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == [
        "time.convert_time",
        "time.get_current_time",
    ]
    assert "Mine, not the server's." in out.stdout.splitlines()[1]
    warning = out.stderr.splitlines()
    assert len(warning) == 1, out.stderr
    assert warning[0].startswith("ptc: warning: MCP server 'time': tool 'time.get_current_time'")


# --------------------------------------------------------------------------- ptc sdk


def test_sdk_renders_the_mcp_servers_tools(mcp_json: str) -> None:
    out = ptc("sdk", "--tools", mcp_json, "--no-instructions")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    compile(text, "<sdk>", "exec")
    assert "# Tool SDK (2 tools)." in text
    assert "async def get_current_time(self, args: TimeGetCurrentTimeArgs)" in text
    assert "async def convert_time(self, args: TimeConvertTimeArgs)" in text
    assert "    time: TimeTools\n" in text


# --------------------------------------------------------------------------- ptc run


def test_run_calls_a_python_tool_and_an_mcp_tool(tmp_path: Path, mcp_json: str) -> None:
    program = tmp_path / "both.py"
    program.write_text(
        "import asyncio\n"
        "now, doc = await asyncio.gather(\n"
        '    tools["time.get_current_time"]({"timezone": "UTC"}),\n'
        '    tools.get_doc({"doc_id": "timeouts"}),\n'
        ")\n"
        'return {"zone": now["timezone"], "utc": now["datetime"].endswith("+00:00"),\n'
        '        "doc": doc["title"]}\n',
        encoding="utf-8",
    )
    out = ptc("run", str(program), "--tools", EXAMPLE_TOOLS, "--tools", mcp_json, "--json")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["value"]["result"] == {
        "zone": "UTC",
        "utc": True,
        "doc": "Timeouts and deadlines",
    }
    settled = [e for e in payload["events"] if e["type"] == "tool/ptc-dispatch"]
    assert sorted(e["name"] for e in settled) == ["get_doc", "time.get_current_time"]
    assert not any(e["is_error"] for e in settled)


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        pytest.param(signal.SIGINT, 130, id="ctrl-c"),
        pytest.param(signal.SIGTERM, 143, id="sigterm"),
    ],
)
def test_ctrl_c_or_sigterm_during_a_run_closes_the_servers(
    tmp_path: Path, mcp_json: str, marker: str, sent: signal.Signals, status: int
) -> None:
    program = tmp_path / "spin.py"
    program.write_text(
        'await tools.time.get_current_time({"timezone": "UTC"})\nwhile True:\n    pass\n',
        encoding="utf-8",
    )
    events = tmp_path / "events.jsonl"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ptc",
            "run",
            str(program),
            "--tools",
            mcp_json,
            "--events",
            str(events),
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Wait until the program's MCP call has settled: the server is up and serving.
        deadline = time.monotonic() + 60
        while '"tool/ptc-dispatch"' not in (events.read_text() if events.exists() else ""):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the MCP call never settled"
            time.sleep(0.05)
        assert len(server_pids(marker)) == 1
        process.send_signal(sent)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == status, stdout + stderr
    assert "Traceback" not in stderr
    assert server_pids(marker) == []  # ended by ptc before it exited, not orphaned


def test_mcp_fanout_example_runs_as_documented() -> None:
    # `ptc run examples/programs/mcp_fanout.py --tools examples/mcp.json`, as typed in a
    # shell whose venv is active: examples/mcp.json starts the server with `python3`.
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = "ptc" if (bin_dir / "ptc").exists() else None
    argv = ["run", "examples/programs/mcp_fanout.py", "--tools", "examples/mcp.json"]
    expected = {_paris_0930_in_tokyo()}
    if command is not None:
        out = subprocess.run(
            [command, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    else:  # an install without the console script
        out = ptc(*argv, env=env)
    expected.add(_paris_0930_in_tokyo())  # the date may have changed meanwhile
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines[:4]] == [
        "UTC",
        "Europe/Paris",
        "Asia/Tokyo",
        "America/New_York",
    ]
    result = json.loads("\n".join(lines[5:]))
    assert result["zones"] == 4 and result["paris_0930_in_tokyo"] in expected
    assert lines[4].startswith(f"09:30 in Paris is {result['paris_0930_in_tokyo']} in Tokyo (+")


def _paris_0930_in_tokyo() -> str:
    paris = ZoneInfo("Europe/Paris")
    today = dt.datetime.now(paris).date()
    meeting = dt.datetime.combine(today, dt.time(9, 30), tzinfo=paris)
    return meeting.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%H:%M")


# --------------------------------------------------------------------------- failures: one line, exit 2


def test_a_server_that_cannot_start_is_one_line_and_the_others_are_closed(
    tmp_path: Path, marker: str
) -> None:
    config = write_config(
        tmp_path / "mcp.json",
        {"time": time_entry(marker), "broken": {"command": "no-such-mcp-server-xyz"}},
    )
    for command in (
        ["tools", "--tools", config],
        ["run", "-", "--tools", EXAMPLE_TOOLS, "--tools", config],
    ):
        line = one_error_line(ptc(*command, stdin="return 1"))
        assert line == (
            f"ptc: error: MCP server 'broken' ({config}): "
            "cannot start 'no-such-mcp-server-xyz': no such command"
        )
        assert server_pids(marker) == []


def test_a_server_that_exits_at_start_is_one_line_with_its_stderr(tmp_path: Path) -> None:
    script = "import sys; print('cannot open the database', file=sys.stderr); sys.exit(3)"
    config = write_config(
        tmp_path / "mcp.json", {"db": {"command": sys.executable, "args": ["-c", script]}}
    )
    line = one_error_line(ptc("sdk", "--tools", config))
    assert line.startswith(f"ptc: error: MCP server 'db' ({config}): ")
    assert line.endswith("its stderr ends: cannot open the database")


def test_an_http_server_with_nothing_listening_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}/mcp"
        config = write_config(tmp_path / "remote.json", {"remote": {"url": url}})
        line = one_error_line(ptc("tools", "--tools", config, "--json"))
    assert line.startswith(f"ptc: error: MCP server 'remote' ({config}, {url}): ")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ('{"mcpServers": {"x": {"args": []}}}', "server 'x': command must be a non-empty string"),
        ('{"mcpServers": {"x": {"command": "y", "args": "z"}}}', "server 'x': args must be a list"),
        ('{"mcpServers": {"x": {"type": "sse", "url": "http://h"}}}', "server 'x': the SSE"),
        ('{"mcpServers": {"no spaces": {"command": "y"}}}', "server name 'no spaces': use 1 to"),
        ('{"mcpServers": {"x": {"command": "${PTC_NO_SUCH_VARIABLE}"}}}', "PTC_NO_SUCH_VARIABLE"),
        ('{"mcpServers": []}', 'expected an object with an "mcpServers" object'),
    ],
)
@pytest.mark.parametrize("command", ["tools", "sdk", "run"])
def test_a_malformed_mcp_servers_file_is_one_line_naming_the_file_and_entry(
    tmp_path: Path, document: str, message: str, command: str
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(document, encoding="utf-8")
    args = ["run", "-"] if command == "run" else [command]
    code, stdout, stderr = cli(*args, "--tools", str(config))
    assert (code, stdout) == (2, "")
    assert len(stderr.splitlines()) == 1
    assert stderr.startswith(f"ptc: error: {config}: ") and message in stderr


def test_without_the_mcp_package_it_is_one_line_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path / "mcp.json", {"time": time_entry("unused")})
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError
    code, stdout, stderr = cli("tools", "--tools", EXAMPLE_TOOLS, "--tools", config)
    assert (code, stdout) == (2, "")
    assert stderr == (
        f"ptc: error: MCP server 'time' ({config}): MCP servers need the mcp package: "
        "pip install 'ptc-runner[mcp]'\n"
    )


def test_two_python_tool_sets_are_an_error_naming_both(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {})
    code, stdout, stderr = cli(
        "run", "-", "--tools", EXAMPLE_TOOLS, "--tools", config, "--tools", "tools:registry"
    )
    assert (code, stdout) == (2, "")
    assert stderr == (
        f"ptc: error: --tools names two Python tool sets, {EXAMPLE_TOOLS} and tools:registry: "
        "give one (with any number of mcpServers .json files)\n"
    )


def test_a_server_configured_in_two_files_is_an_error_naming_both(tmp_path: Path) -> None:
    first = write_config(tmp_path / "a.json", {"time": {"command": "x"}})
    second = write_config(
        tmp_path / "b.json", {"other": {"command": "y"}, "time": {"command": "z"}}
    )
    code, stdout, stderr = cli("tools", "--tools", first, "--tools", second)
    assert (code, stdout) == (2, "")
    assert stderr == (
        f"ptc: error: MCP server 'time' is configured twice, in {first} and in {second}\n"
    )
    code, _, stderr = cli("sdk", "--tools", first, "--tools", first)
    assert (code, stderr) == (2, f"ptc: error: {first} is given twice as --tools\n")


def test_a_schema_file_is_still_not_a_tool_set_and_does_not_combine(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {})
    code, _, stderr = cli("tools", "--tools", config, "--tools", str(SCHEMAS))
    assert code == 2 and stderr.startswith(f"ptc: error: {SCHEMAS} is a file of tool schemas")
    code, _, stderr = cli("sdk", "--tools", str(SCHEMAS), "--tools", config)
    assert (code, stderr) == (
        2,
        f"ptc: error: {SCHEMAS} is a file of tool schemas: give it as the only --tools "
        "(it does not combine with a registry or mcpServers files)\n",
    )


def test_an_empty_mcp_servers_file_is_an_empty_tool_set(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {})
    assert cli("tools", "--tools", config) == (0, "(no visible tools)\n", "")
    assert cli("tools", "--tools", config, "--json") == (0, "[]\n", "")


@pytest.mark.parametrize("command", ["tools", "sdk", "run"])
def test_an_unknown_scope_is_reported_before_any_server_starts(
    tmp_path: Path, command: str
) -> None:
    started = tmp_path / "started"
    config = write_config(
        tmp_path / "mcp.json",
        {"x": {"command": sys.executable, "args": ["-c", f"open({str(started)!r}, 'w')"]}},
    )
    args = ["run", "-"] if command == "run" else [command]
    code, stdout, stderr = cli(*args, "--tools", config, "--scope", "nope")
    assert (code, stdout) == (2, "")
    assert stderr.startswith("ptc: error: unknown scope 'nope'")
    assert not started.exists()
