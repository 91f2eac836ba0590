"""``ptc run`` spawns its zygote before its imports, hands it to the run, and leaks none.

Each case runs the real entry point (``ptc._cli.main``) in a subprocess whose
``spawn_zygote`` is wrapped to record every zygote spawned; at exit it reports
each one's process (reaped or not), its directory and whether a runtime adopted it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = "examples/tools.py:registry"

_RECORDING_ENTRY = """
import atexit, json, os, sys
import runtime._host._launch as launch

spawned = []
spawn = launch.spawn_zygote

def recording(settings):
    zygote = spawn(settings)
    spawned.append(zygote)
    return zygote

launch.spawn_zygote = recording

@atexit.register
def report():
    with open(os.environ["PTC_TEST_REPORT"], "w") as out:
        json.dump([
            {
                "returncode": zygote.process.returncode,
                "alive": zygote.process.poll() is None,
                "tmp_left": os.path.exists(zygote.tmp),
                "taken": zygote.taken,
            }
            for zygote in spawned
        ], out)

sys.argv = ["ptc", *sys.argv[1:]]
from ptc._cli import main
main()
"""


def _ptc(
    tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-c", _RECORDING_ENTRY, *args],
        cwd=ROOT,
        env={**os.environ, "PTC_TEST_REPORT": str(report)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, json.loads(report.read_text())


@pytest.fixture
def program(tmp_path: Path) -> str:
    path = tmp_path / "program.py"
    path.write_text("return 1\n")
    return str(path)


def _ended(zygote: dict[str, Any]) -> bool:
    """Reaped by the command, and its directory removed."""
    return not zygote["alive"] and zygote["returncode"] is not None and not zygote["tmp_left"]


def test_a_run_spawns_one_zygote_ahead_and_its_runtime_adopts_it(
    tmp_path: Path, program: str
) -> None:
    done, spawned = _ptc(tmp_path, "run", program, "--tools", TOOLS, "-q")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"
    # One zygote in all: the runtime ran on the one spawned ahead, then ended it.
    assert len(spawned) == 1
    assert spawned[0]["taken"] and _ended(spawned[0])


@pytest.mark.parametrize(
    "args",
    [
        ["tools", "--tools", TOOLS],
        ["sdk", "--tools", TOOLS],
        ["run", "--help"],
        ["run", "-", "--tools", "no-such.py:x", "--runtime", "pyodide"],
        ["run", "-", "--tools", "no-such.py:x", "--runtime=pyodide"],
        ["doctor"],
    ],
)
def test_other_commands_spawn_no_zygote(tmp_path: Path, args: list[str]) -> None:
    done, spawned = _ptc(tmp_path, *args)
    assert spawned == [], done.stderr


def test_a_tool_set_that_cannot_be_loaded_ends_the_zygote(tmp_path: Path, program: str) -> None:
    # The runtime is made (adopting the zygote, whose first worker forks while the
    # tool set loads) before the tool set: its failure closes the runtime.
    done, spawned = _ptc(tmp_path, "run", program, "--tools", "no-such-file.py:registry")
    assert done.returncode == 2
    assert "no such file" in done.stderr
    assert len(spawned) == 1
    assert spawned[0]["taken"] and _ended(spawned[0])


def test_a_run_that_fails_before_its_runtime_exists_ends_the_zygote(
    tmp_path: Path, program: str
) -> None:
    done, spawned = _ptc(tmp_path, "run", program, "--tools", TOOLS, "--max-parallel", "0")
    assert done.returncode == 2
    assert "--max-parallel must be at least 1" in done.stderr
    assert len(spawned) == 1
    assert not spawned[0]["taken"] and _ended(spawned[0])


def test_an_events_file_that_cannot_be_opened_ends_the_zygote(tmp_path: Path, program: str) -> None:
    events = str(tmp_path / "no-such-dir" / "events.jsonl")
    done, spawned = _ptc(tmp_path, "run", program, "--tools", TOOLS, "--events", events)
    assert done.returncode == 2
    assert "cannot open" in done.stderr
    assert len(spawned) == 1 and _ended(spawned[0])


def test_a_tool_set_that_fails_to_open_after_the_runtime_adopted_it_ends_the_zygote(
    tmp_path: Path, program: str
) -> None:
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"broken": {"command": "no-such-mcp-server"}}}))
    done, spawned = _ptc(tmp_path, "run", program, "--tools", TOOLS, "--tools", str(servers))
    assert done.returncode == 2
    assert "no-such-mcp-server" in done.stderr
    assert len(spawned) == 1
    assert spawned[0]["taken"] and _ended(spawned[0])
