"""Golden files: representative tool sets and the exact SDK text they render to.

Each ``golden/<case>.json`` holds a tool list; ``golden/<case>.py`` is its SDK.
Regenerate with ``PTC_REGEN_GOLDEN=1 pytest tests/sdkgen/test_golden.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sdkgen import render_sdk

GOLDEN_DIR = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN_DIR.glob("*.json"))
WITH_INSTRUCTIONS = {"basic"}  # one case carries the fixed instructions, the rest not

# Programs written against a golden SDK: mypy --strict must accept them.
PROGRAMS = {
    "basic": """
from __future__ import annotations

from sdk import SearchIssuesArgs, ToolCallError, Tools


async def main(tools: Tools) -> None:
    args: SearchIssuesArgs = {"query": "is:open", "per_page": 5, "order": "asc"}
    page = await tools.search_issues(args)
    titles = [item["title"] for item in page["items"] if item.get("state") == "open"]
    cursor: str | None = page.get("next_cursor")
    user = await tools.get_user({"login": "octocat"})
    pong = await tools.ping({})
    try:
        await tools.echo({"anything": [1, "two"]})
    except ToolCallError as exc:
        print(exc.tool_name, exc.message)
    print(titles, cursor, user["login"], pong == "pong")
""",
    "exotic_names": """
from __future__ import annotations

from sdk import Tools


async def main(tools: Tools) -> None:
    a = await tools["my-tool"]({"x": 1})
    b = await tools.math.factorial({"x": 5})
    c = await tools["class"]({"x": 2})
    d = await tools["café"]({"x": 3})
    e = await tools.my_tool({"x": 4})
    f = await tools["new\\nline"]({"x": 6})
    print(a, b, c, d, e, f)
""",
    "namespaces": """
from __future__ import annotations

import asyncio

from sdk import GitStatusArgs, GitStatusResult, GitTools2, Tools


async def main(tools: Tools) -> None:
    args: GitStatusArgs = {"repo_path": "."}
    status: GitStatusResult = await tools.git.status(args)
    git: GitTools2 = tools.git
    log, now, current = await asyncio.gather(
        git.log({"repo_path": ".", "max_count": 3}),
        tools.time.now({}),
        tools.time.get_current_time({"timezone": "UTC"}),
    )
    a = await tools.my_ns.a({})
    b = await tools.myNs.b({})
    tiny = await tools["everything.get-tiny-image"]({})
    mine = await tools["git.my-tool"]({})
    value = await tools["git.JsonValue"]({})
    dotted = await tools["git.a.b"]({})
    memory = await tools.memory({})
    read = await tools["memory.read"]({"key": "k"})
    listed = await tools["list.x"]({})
    reserved = await tools["Tools.x"]({})
    plain = await tools.GitTools({})
    found = await tools["search"]({"q": "x"})
    schema = await tools["describe.schema"]({})
    rest = await tools.git.search({})
    print(status["clean"], log, now, current, a, b, tiny, mine, value, dotted)
    print(memory, read, listed, reserved, plain, await tools.echo({"text": "hi"}))
    print(found, schema, rest)
""",
    "refs": """
from __future__ import annotations

from sdk import Tools, WalkTreeNode


async def main(tools: Tools) -> None:
    leaf: WalkTreeNode = {"name": "leaf"}
    page = await tools.walk_tree(
        {"root": {"name": "root", "children": [leaf]}, "nested": ["a", ["b", ["c"]]], "old_style": "red"}
    )
    nxt = page.get("next")
    while nxt is not None:
        print(nxt["count"])
        nxt = nxt.get("next")
""",
    "combinators": """
from __future__ import annotations

from sdk import Tools


async def main(tools: Tools) -> None:
    await tools.draw(
        {
            "shape": {"kind": "circle", "r": 2},
            "typelist": None,
            "merged": {"a": "x", "b": True},
            "based": {"b": 1, "common": "c"},
            "tuple_items": ["a", 1],
            "map_of_lists": {"k": [1.5]},
            "open_with_props": {"a": "z"},
        }
    )
""",
}

# Programs that misuse a golden SDK: mypy --strict must reject each of them.
BAD_PROGRAMS = {
    "missing_required": "await tools.search_issues({'per_page': 5})",
    "wrong_literal": "await tools.search_issues({'query': 'q', 'order': 'sideways'})",
    "unknown_key": "await tools.get_user({'login': 'a', 'nope': 1})",
    "wrong_type": "await tools.get_user({'login': 5})",
    "unknown_tool": "await tools.search_everything({})",
    "exotic_as_attribute": "await tools['get_user']({'login': 'a'})",
}

# The same against the namespaced golden SDK: what the SDK does not promise is rejected.
BAD_NAMESPACED_PROGRAMS = {
    "unknown_namespaced_tool": "await tools.git.push({'repo_path': '.'})",
    "namespaced_wrong_type": "await tools.git.status({'repo_path': 1})",
    "namespaced_missing_required": "await tools.git.log({'max_count': 2})",
    "exotic_rest_as_attribute": "await tools.everything.get_tiny_image({})",
    "colliding_namespace_as_attribute": "await tools.memory.read({'key': 'k'})",
    "builtin_namespace_as_attribute": "await tools.list.x({})",
    "namespaced_by_rest_alone": "await tools['status']({'repo_path': '.'})",
    "unknown_namespace": "await tools.github.get_me({})",
    # tools.search and tools.describe are the discovery methods, not these tools
    "discovery_name_as_attribute": "await tools.search({'q': 'x'})",
    "discovery_namespace_as_attribute": "await tools.describe.schema({})",
}


def _render_case(case: str) -> str:
    schemas = json.loads((GOLDEN_DIR / f"{case}.json").read_text(encoding="utf-8"))
    return render_sdk(schemas, instructions=case in WITH_INSTRUCTIONS)


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, regen_golden: bool) -> None:
    text = _render_case(case)
    golden = GOLDEN_DIR / f"{case}.py"
    if regen_golden:
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden file for {case}: run with PTC_REGEN_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", CASES)
def test_golden_compiles_and_runs(case: str) -> None:
    text = _render_case(case)
    namespace: dict[str, object] = {}
    exec(compile(text, f"<{case}>", "exec"), namespace)
    assert "Tools" in namespace
    assert "ToolCallError" in namespace


def test_goldens_typecheck_and_reject_misuse(tmp_path: Path) -> None:
    """One mypy --strict run: every golden SDK, a program per SDK, and misuses."""
    files: list[str] = []
    for case in CASES:
        (tmp_path / f"sdk_{case}.py").write_text(_render_case(case), encoding="utf-8")
        program = PROGRAMS.get(
            case, "from __future__ import annotations\n\nimport sdk\n\nprint(sdk.tools)\n"
        )
        (tmp_path / f"program_{case}.py").write_text(
            program.replace("from sdk import", f"from sdk_{case} import").replace(
                "import sdk\n", f"import sdk_{case} as sdk\n"
            ),
            encoding="utf-8",
        )
        files += [f"sdk_{case}.py", f"program_{case}.py"]
    bad = (
        "from __future__ import annotations\n\nfrom sdk_basic import Tools\n"
        "from sdk_namespaces import Tools as NamespacedTools\n"
        + "".join(
            f"\n\nasync def {name}(tools: Tools) -> None:\n    {line}\n"
            for name, line in BAD_PROGRAMS.items()
        )
        + "".join(
            f"\n\nasync def {name}(tools: NamespacedTools) -> None:\n    {line}\n"
            for name, line in BAD_NAMESPACED_PROGRAMS.items()
        )
    )
    (tmp_path / "bad.py").write_text(bad, encoding="utf-8")
    files.append("bad.py")
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
            *files,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert [e for e in errors if not e.startswith("bad.py:")] == [], result.stdout + result.stderr
    lines = bad.splitlines()
    for name in BAD_PROGRAMS:
        lineno = lines.index(f"async def {name}(tools: Tools) -> None:") + 2
        assert any(e.startswith(f"bad.py:{lineno}: error") for e in errors), (name, result.stdout)
    for name in BAD_NAMESPACED_PROGRAMS:
        lineno = lines.index(f"async def {name}(tools: NamespacedTools) -> None:") + 2
        assert any(e.startswith(f"bad.py:{lineno}: error") for e in errors), (name, result.stdout)
