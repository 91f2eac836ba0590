"""The real tool set of the GitHub MCP server (117 tools) through the SDK renderer."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from sdkgen import render_sdk, sdk_stats

PROGRAM = """
from __future__ import annotations

import asyncio

from sdk import CreateBranchArgs, JsonValue, ToolCallError, Tools


async def main(tools: Tools) -> None:
    me, repos = await asyncio.gather(
        tools.get_me({}),
        tools.search_repositories({"query": "language:python", "perPage": 5, "order": "desc"}),
    )
    branch: CreateBranchArgs = {"owner": "octo", "repo": "demo", "branch": "ptc"}
    try:
        created: JsonValue = await tools.create_branch(branch)
    except ToolCallError as exc:
        print(f"{exc.tool_name} failed: {exc.message}")
        return
    print(me, repos, created)
"""

BAD_PROGRAM = """
from __future__ import annotations

from sdk import Tools


async def main(tools: Tools) -> None:
    await tools.create_branch({"owner": "octo", "repo": "demo"})
    await tools.search_repositories({"query": "x", "order": "sideways"})
    await tools.create_branch({"branch": "b", "repo": "demo"})
    await tools.list_commits({"owner": "o", "repo": "r", "perPage": "ten"})
"""


def _load(path: Path) -> list[dict[str, Any]]:
    tools = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(tools, list)
    assert len(tools) == 117
    return tools


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON with every object's keys (recursively) in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def test_corpus_renders_every_tool_and_compiles(corpus_path: Path) -> None:
    tools = _load(corpus_path)
    text = render_sdk(tools)
    compile(text, "<sdk>", "exec")
    namespace: dict[str, object] = {}
    exec(text, namespace)
    stats = sdk_stats(text)
    assert stats["tools"] == 117
    assert stats["chars"] == len(text)
    assert stats["approx_tokens"] == (len(text) + 3) // 4
    for tool in tools:
        assert f"    async def {tool['name']}(self, args: " in text
    # compact: no bigger than the JSON schemas it replaces
    assert len(text) < len(corpus_path.read_text(encoding="utf-8"))


def test_corpus_is_byte_identical_across_orders(corpus_path: Path) -> None:
    tools = _load(corpus_path)
    expected = render_sdk(tools)
    rng = random.Random(20260820)
    for _ in range(5):
        reordered = _shuffled(tools, rng)
        rng.shuffle(reordered)
        assert render_sdk(reordered) == expected


def test_corpus_typechecks_with_a_program(corpus_path: Path, tmp_path: Path) -> None:
    (tmp_path / "sdk.py").write_text(render_sdk(_load(corpus_path)), encoding="utf-8")
    (tmp_path / "program.py").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "bad.py").write_text(BAD_PROGRAM, encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--python-version",
            "3.11",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "sdk.py",
            "program.py",
            "bad.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert [e for e in errors if not e.startswith("bad.py:")] == [], result.stdout + result.stderr
    # the types carry meaning: a missing required key and a bad enum value are caught
    assert any(e.startswith("bad.py:8:") and "branch" in e for e in errors), result.stdout
    assert any(e.startswith("bad.py:9:") for e in errors), result.stdout
    # so are a required key and a wrong type that a shared base class declares
    assert any(e.startswith("bad.py:10:") and "owner" in e for e in errors), result.stdout
    assert any(e.startswith("bad.py:11:") and "perPage" in e for e in errors), result.stdout
