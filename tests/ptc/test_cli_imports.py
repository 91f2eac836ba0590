"""What the command line imports: a cold ``ptc run`` loads none of the optional parts.

The MCP client (``registry._mcp`` and the ``mcp`` SDK), OpenTelemetry, the SDK
renderer (``sdkgen``), the Pyodide backend and ``jsonschema`` each load only
when they are used: a ``ptc run`` on a Python tool set, with no tracer and no
schema to check beyond the fast pre-checks, uses none of them. Each case runs
in a fresh interpreter; nothing here is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Modules (and their submodules) a cold ``ptc run`` must not import.
OPTIONAL = (
    "mcp",
    "registry._mcp",
    "opentelemetry",
    "sdkgen",
    "runtime._pyodide",
    "jsonschema",
    "referencing",
)

_LOADED = f"""
import gc, json, sys
def loaded():
    return sorted(
        name for name in sys.modules
        if any(name == part or name.startswith(part + ".") for part in {OPTIONAL!r})
    )
"""


def _python(code: str, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED + code],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_importing_the_commands_loads_no_optional_part() -> None:
    assert json.loads(_python("import ptc._commands\nprint(json.dumps(loaded()))")) == []


@pytest.mark.parametrize(
    "args",
    [
        ["run", "-", "--tools", "examples/tools.py:registry", "-q"],
        ["tools", "--tools", "examples/tools.py:registry"],
    ],
    ids=["run", "tools"],
)
def test_a_command_loads_no_optional_part_and_leaves_the_gc_on(args: list[str]) -> None:
    # The entry point pauses the cyclic GC while it imports: it must be on again after.
    out = _python(
        f"sys.argv = ['ptc', *{args!r}]\n"
        "from ptc._cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "print(json.dumps([loaded(), gc.isenabled()]))\n",
        stdin="return 1\n",
    )
    assert json.loads(out) == [[], True]
