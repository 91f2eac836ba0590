"""``ptc run`` shows what the program prints on stderr as it happens (a real subprocess)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
import os

import anyio

from registry import ToolRegistry

registry = ToolRegistry()


@registry.tool(concurrency_safe=True)
async def wait_for(path: str) -> str:
    """Wait until a file exists at path."""
    while not os.path.exists(path):
        await anyio.sleep(0.01)
    return "seen"
'''


def _tools(tmp_path: Path) -> str:
    path = tmp_path / "live_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return f"{path}:registry"


def _ptc(*args: str, stdin: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ptc", *args],
        cwd=ROOT,
        input=stdin.encode(),
        capture_output=True,
        timeout=120,
    )


def test_a_line_reaches_stderr_while_the_program_still_runs(tmp_path: Path) -> None:
    release = tmp_path / "release"
    program = tmp_path / "prog.py"
    program.write_text(
        "print('first line')\n"
        f"got = await tools.wait_for({{'path': {str(release)!r}}})\n"
        "print('second line')\n"
        "return got\n",
        encoding="utf-8",
    )
    with subprocess.Popen(
        [sys.executable, "-m", "ptc", "run", str(program), "--tools", _tools(tmp_path)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        lines: queue.Queue[bytes] = queue.Queue()
        stderr = process.stderr
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stderr])
        reader.start()
        try:
            # The program is blocked in wait_for until the file exists: the
            # line can only have come while it runs.
            assert lines.get(timeout=60) == b"first line\n"
            assert process.poll() is None
            release.touch()
            stdout = process.stdout.read()  # (read at the end: it comes at the end)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
            reader.join(timeout=60)
    assert lines.get_nowait() == b"second line\n"
    assert lines.empty()
    # What stdout says is what it always said: the same bytes as with --quiet.
    quiet = _ptc("run", str(program), "--tools", _tools(tmp_path), "-q", stdin="")
    assert quiet.returncode == 0 and quiet.stderr == b""
    assert stdout == quiet.stdout == b"first line\nsecond line\nseen\n"


def test_quiet_and_json_show_nothing_live(tmp_path: Path) -> None:
    code = "print('a')\nprint('b')\nreturn 1\n"
    tools = _tools(tmp_path)
    loud = _ptc("run", "-", "--tools", tools, stdin=code)
    assert (loud.returncode, loud.stdout, loud.stderr) == (0, b"a\nb\n1\n", b"a\nb\n")
    for flag in ("--quiet", "-q"):
        quiet = _ptc("run", "-", "--tools", tools, flag, stdin=code)
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"a\nb\n1\n", b"")
    as_json = _ptc("run", "-", "--tools", tools, "--json", stdin=code)
    assert as_json.returncode == 0 and as_json.stderr == b""
    payload = json.loads(as_json.stdout)
    assert payload["value"] == {"logs": ["a", "b"], "result": 1}
    # The events are all there, the live lines among them.
    logged = [(e["type"], e.get("text")) for e in payload["events"]]
    assert logged == [
        ("tool/call", None),
        ("tool/ptc-log", "a"),
        ("tool/ptc-log", "b"),
        ("tool/result", None),
    ]


def test_lines_over_the_rate_are_counted_on_stderr(tmp_path: Path) -> None:
    out = _ptc(
        "run", "-", "--tools", _tools(tmp_path), stdin="for i in range(200):\n    print(i)\n"
    )
    assert out.returncode == 0
    assert out.stdout == "".join(f"{i}\n" for i in range(200)).encode()  # every line
    *shown, note = out.stderr.decode().splitlines()
    # A burst of 50, then 20 a second: the first 50 at least, in order.
    assert shown[:50] == [str(i) for i in range(50)]
    numbers = [int(line) for line in shown]
    assert numbers == sorted(set(numbers))
    dropped = 200 - len(shown)
    assert dropped > 0
    assert note == f"ptc: {dropped} lines of output not shown live (over the rate limit)"
