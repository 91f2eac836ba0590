"""The ``ptc`` command line, run as a user would (a real subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "schemas" / "github-mcp-server.json"


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
