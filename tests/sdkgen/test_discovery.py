"""Discovery mode: ToolCatalog's search, describe and index text, and their sizes.

Golden files: ``golden/namespaces.index.py`` (the index text of the namespaced
case) and ``golden/namespaces.describe.txt`` (every tool's describe()).
Regenerate with ``PTC_REGEN_GOLDEN=1 pytest tests/sdkgen/test_discovery.py``.
"""

from __future__ import annotations

import ast
import json
import random
import re
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sdkgen import (
    DISCOVERY_INSTRUCTIONS,
    SDK_INSTRUCTIONS,
    ToolCatalog,
    render_discovery,
    render_sdk,
    sdk_stats,
)
from sdkgen._discovery import INDEX_BUDGET
from sdkgen._render import IMPORTS

GOLDEN_DIR = Path(__file__).parent / "golden"
Synthetic = Callable[[int, int], list[dict[str, Any]]]


def _tool(name: str, description: str = "", **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": sorted(properties)},
    }


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


@pytest.fixture(scope="module")
def corpus(corpus_path: Path) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(corpus_path.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def github(corpus: list[dict[str, Any]]) -> ToolCatalog:
    return ToolCatalog(corpus)


def _golden_tools(case: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((GOLDEN_DIR / f"{case}.json").read_text("utf-8"))
    return loaded


# ---------------------------------------------------------------------- the catalog


def test_catalog_has_the_tools_render_sdk_declares() -> None:
    tools = [_tool("b"), _tool("a"), {"description": "no name"}, 7, _tool("a", "twin")]
    catalog = ToolCatalog(tools)
    assert catalog.names == ("a", "b")
    assert len(catalog) == 2 == sdk_stats(render_sdk(tools))["tools"]
    assert "a" in catalog and "c" not in catalog and 1 not in catalog
    # the same duplicate is kept as in render_sdk (chosen by content, not by order)
    _check_described(catalog, render_sdk(tools))
    _check_described(ToolCatalog(list(reversed(tools))), render_sdk(tools))
    assert "3 malformed or duplicate entries left out" in catalog.index_text()
    assert ToolCatalog([]).index_text().count("Tool index (0 tools)") == 1
    assert ToolCatalog({"tools": [_tool("x")]}).names == ("x",)  # an MCP tools/list result


def test_render_discovery_is_the_index_text(corpus: list[dict[str, Any]]) -> None:
    assert render_discovery(corpus) == ToolCatalog(corpus).index_text()


def test_index_text_starts_with_the_instructions_and_compiles(github: ToolCatalog) -> None:
    text = github.index_text()
    module = ast.parse(text)
    assert ast.get_docstring(module, clean=False) == DISCOVERY_INSTRUCTIONS + "\n"
    assert IMPORTS in text  # JsonValue and ToolCallError, as in the full SDK
    namespace: dict[str, object] = {}
    exec(compile(text, "<index>", "exec"), namespace)
    assert "ToolCallError" in namespace and "JsonValue" in namespace
    for phrase in (
        'await tools.search("query", limit=10)',
        '`{"name": ..., "summary": ...}`',
        'await tools.describe("name")',
        "as a str",
        "can be called without describing it",
        "ToolCallError",
        "asyncio.gather",
        'tools["my-tool"]',
        "`return` and/or `print(...)`",
    ):
        assert phrase in DISCOVERY_INSTRUCTIONS, phrase
    # the rules both modes share are the same words
    shared = [line for line in SDK_INSTRUCTIONS.splitlines() if line.startswith("- ")]
    assert sum(line in DISCOVERY_INSTRUCTIONS for line in shared) >= len(shared) - 1


def test_output_is_independent_of_input_order(corpus: list[dict[str, Any]]) -> None:
    expected = ToolCatalog(corpus)
    shuffled = list(corpus)
    random.Random(3).shuffle(shuffled)
    again = ToolCatalog(shuffled)
    assert again.index_text() == expected.index_text()
    for name in ("get_me", "search_issues", "actions_list"):
        assert again.describe(name) == expected.describe(name)
    assert again.search("pull request review", 20) == expected.search("pull request review", 20)


# ---------------------------------------------------------------------- search


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("create issue", "create_issue"),
        ("list pull requests", "list_pull_requests"),
        ("star a repo", "star_repository"),  # a prefix of a word finds it
        ("get file contents", "get_file_contents"),
        ("latest release", "get_latest_release"),
        ("list dependabot alerts", "list_dependabot_alerts"),
        ("merge", "merge_pull_request"),
        ("pull_request_read", "pull_request_read"),  # a tool's own name comes first
        ("List ISSUES", "list_issues"),  # case and plurals do not matter
        # an operation (a value of a required enum argument) reads as part of the name
        ("pull request reviews", "pull_request_read"),  # method: get_reviews
        ("issue comments", "issue_read"),  # method: get_comments
        ("workflow runs", "actions_list"),  # method: list_workflow_runs
        ("close issue as duplicate", "update_issue_state"),  # state: closed
        # a name in the query's own form first: a plural asks for a list
        ("starred repositories", "list_starred_repositories"),
        ("dependabot alerts", "list_dependabot_alerts"),
        ("dependabot alert", "get_dependabot_alert"),
        # short forms and British spellings
        ("organisation security advisories", "list_org_repository_security_advisories"),
    ],
)
def test_search_ranks_the_right_tool_first(github: ToolCatalog, query: str, best: str) -> None:
    assert github.search(query, 5)[0]["name"] == best


def test_search_finds_parameters_and_splits_names() -> None:
    catalog = ToolCatalog(
        [
            _tool("fetchUserProfile", "Profiles."),
            _tool("repo.get-tag", "Tags."),
            _tool("pr_comment", "Comments.", pullNumber={"type": "integer"}),
            _tool(
                "deploy",
                "Deploys.",
                target={"type": "string", "description": "A Kubernetes cluster."},
            ),
            _tool("unrelated", "Nothing to see."),
        ]
    )
    assert [r["name"] for r in catalog.search("user profile")] == ["fetchUserProfile"]
    assert [r["name"] for r in catalog.search("tag")] == ["repo.get-tag"]
    assert [r["name"] for r in catalog.search("pull number")] == ["pr_comment"]
    assert [r["name"] for r in catalog.search("kubernetes")] == ["deploy"]
    assert catalog.search("zebra") == []  # nothing matches: nothing is returned
    # a tool's exact name is found even when it is no searchable word
    assert ToolCatalog([_tool("a", "Letter.")]).search("a") == [{"name": "a", "summary": "Letter."}]


def test_search_breaks_ties_by_name_and_honours_limit() -> None:
    twins = [_tool(f"t{i:02d}", "Send an email.") for i in range(30)]
    random.Random(5).shuffle(twins)
    catalog = ToolCatalog(twins)
    found = [r["name"] for r in catalog.search("email", 7)]
    assert found == [f"t{i:02d}" for i in range(7)]
    assert len(catalog.search("email", 100)) == 30
    assert len(catalog.search("email")) == 10  # the default limit


def test_search_prefers_tools_matching_more_words() -> None:
    catalog = ToolCatalog(
        [
            _tool("a_gist", "Create a gist."),  # one rare word
            _tool("b_issue", "Create an issue, close an issue, label an issue."),
            _tool("c", "Issue tracker."),
            _tool("d", "Issue things."),
        ]
    )
    assert catalog.search("create issue")[0]["name"] == "b_issue"


def test_search_results_are_name_and_one_line_summary() -> None:
    long = "Word " * 60
    catalog = ToolCatalog(
        [
            _tool("a", "Get the thing.\nThen do more.  And more."),
            _tool("b", f"{long}end."),
            _tool("c", "Works e.g. with   tabs\tand  spaces. Second sentence."),
            _tool("d"),
        ]
    )
    by_name = {r["name"]: r["summary"] for r in catalog.search("thing word works d", 10)}
    assert set(next(iter(catalog.search("thing")))) == {"name", "summary"}
    assert by_name["a"] == "Get the thing."
    assert len(by_name["b"]) <= 100 and by_name["b"].endswith("…")
    assert by_name["c"] == "Works e.g. with tabs and spaces."
    assert by_name["d"] == ""


@pytest.mark.parametrize(
    ("query", "limit", "error", "hint"),
    [
        (None, 10, TypeError, "str"),
        (b"issue", 10, TypeError, "str"),
        ("issue", "5", TypeError, "int"),
        ("issue", True, TypeError, "int"),
        ("issue", 2.0, TypeError, "int"),
        ("issue", 0, ValueError, "from 1 to 100"),
        ("issue", 101, ValueError, "from 1 to 100"),
        ("", 10, ValueError, "keywords"),
        ("the and of", 10, ValueError, "keywords"),
        ("  ...  ", 10, ValueError, "keywords"),
        ("issue " * 500, 10, ValueError, "a few keywords"),
    ],
)
def test_search_refuses_bad_arguments_with_a_hint(
    github: ToolCatalog, query: Any, limit: Any, error: type[Exception], hint: str
) -> None:
    with pytest.raises(error, match=hint):
        github.search(query, limit)


# ---------------------------------------------------------------------- describe


def _check_described(catalog: ToolCatalog, sdk: str) -> None:
    """Each block of describe() is the full SDK's own text (see Sdk.describe)."""
    for name in catalog.names:
        text = catalog.describe(name)
        head, *blocks, method = text.rstrip("\n").split("\n\n")
        assert head.startswith("# ") and "\n" not in head and "await tools" in head
        for block in blocks:
            assert block + "\n" in sdk, (name, block)
        class_line, rest = method.split("\n", 1)
        assert f"\n{class_line}\n" in sdk, (name, class_line)
        # the method, as the SDK declares it (an overloaded item keeps no @overload)
        assert rest + "\n" in sdk and "@overload" not in rest, (name, rest)
        # the blocks, after the header, run: every type they use is declared
        module = types.ModuleType("sdkgen_described")
        sys.modules[module.__name__] = module  # TypedDicts resolve their names there
        try:
            exec(compile(IMPORTS + "\n" + text, f"<describe {name!r}>", "exec"), module.__dict__)
            for value in list(module.__dict__.values()):
                if typing.is_typeddict(value):
                    typing.get_type_hints(value)  # every name a field uses is declared
        finally:
            del sys.modules[module.__name__]


def test_describe_is_the_sdk_text_for_every_corpus_tool(
    github: ToolCatalog, corpus: list[dict[str, Any]]
) -> None:
    _check_described(github, render_sdk(corpus))


@pytest.mark.parametrize("case", sorted(p.stem for p in GOLDEN_DIR.glob("*.json")))
def test_describe_is_the_sdk_text_for_every_golden_tool(case: str) -> None:
    tools = _golden_tools(case)
    _check_described(ToolCatalog(tools), render_sdk(tools))


def test_describe_shows_only_the_types_a_tool_uses() -> None:
    shared = {"type": "object", "properties": {"x": {"type": "integer"}}}
    tools = [
        _tool("a", "A.", point=shared, label={"type": "string"}),
        _tool("b", "B.", point=shared),
        _tool("c", "C.", other={"type": "object", "properties": {"y": {"type": "string"}}}),
    ]
    catalog = ToolCatalog(tools)
    a, b, c = (catalog.describe(n) for n in "abc")
    assert "class AArgsPoint(TypedDict)" in a and "class AArgsPoint(TypedDict)" in b  # shared
    assert "COther" not in a + b and "AArgsPoint" not in c and "class COtherArgs" not in c
    assert a.startswith('# "a": `await tools.a(args)`\n')


def test_describe_says_how_each_tool_is_called() -> None:
    catalog = ToolCatalog(_golden_tools("namespaces"))
    calls = {name: catalog.describe(name).split("\n", 1)[0] for name in catalog.names}
    assert calls["git.log"] == '# "git.log": `await tools.git.log(args)`'
    assert calls["git.search"] == '# "git.search": `await tools.git.search(args)`'
    assert calls["search"] == '# "search": `await tools["search"](args)`'
    assert calls["describe.schema"] == '# "describe.schema": `await tools["describe.schema"](args)`'
    assert calls["memory.read"] == '# "memory.read": `await tools["memory.read"](args)`'
    assert calls["echo"] == '# "echo": `await tools.echo(args)`'


def test_describe_accepts_the_call_forms_and_refuses_unknown_names(github: ToolCatalog) -> None:
    assert github.describe("tools.get_me") == github.describe("get_me")
    with pytest.raises(KeyError, match="closest: list_issues"):
        github.describe("list_isues")
    with pytest.raises(KeyError, match="get_me"):
        github.describe("get me")
    with pytest.raises(KeyError, match=re.escape('tools.search("keywords")')):
        github.describe("zzzz")
    with pytest.raises(TypeError, match="str"):
        github.describe(3)  # type: ignore[arg-type]


def test_discovery_goldens(regen_golden: bool) -> None:
    catalog = ToolCatalog(_golden_tools("namespaces"))
    outputs = {
        "namespaces.index.py": catalog.index_text(),
        "namespaces.describe.txt": "".join(catalog.describe(n) + "\n" for n in catalog.names),
    }
    for filename, text in outputs.items():
        golden = GOLDEN_DIR / filename
        if regen_golden:
            golden.write_text(text, encoding="utf-8")
        assert golden.is_file(), f"no golden file {filename}: run with PTC_REGEN_GOLDEN=1"
        assert text == golden.read_text(encoding="utf-8"), filename


# ---------------------------------------------------------------------- the index


def test_index_for_the_corpus_lists_every_tool_in_under_3000_tokens(github: ToolCatalog) -> None:
    text = github.index_text()
    assert _tokens(text) < 3_000, _tokens(text)
    lines = text.splitlines()
    for name in github.names:
        assert any(line.startswith(f"# {name}: ") for line in lines), name
    summary = github.search("get_me", 1)[0]["summary"]
    assert f"# get_me: {summary}" in lines


def test_index_of_1000_tools_lists_their_names_in_under_6000_tokens(
    synthetic_tools: Synthetic,
) -> None:
    tools = synthetic_tools(20, 50)
    catalog = ToolCatalog(tools)
    text = catalog.index_text()
    assert len(catalog) == 1_000
    assert _tokens(text) < 6_000, _tokens(text)
    assert "names only" in text
    assert "# billing.* (50 tools): `await tools.billing.<name>(args)`" in text
    for tool in tools:
        rest = tool["name"].partition(".")[2]
        assert f" {rest}," in text or f" {rest}\n" in text, rest


def test_index_of_5000_tools_shows_groups_and_search_still_works(
    synthetic_tools: Synthetic,
) -> None:
    tools = synthetic_tools(100, 50)
    catalog = ToolCatalog(tools)
    text = catalog.index_text()
    assert _tokens(text) < 6_000, _tokens(text)
    assert "Tool index (5,000 tools) in 100 groups, too many to list" in text
    assert "# billing_eu.* (50 tools): `await tools.billing_eu.<name>(args)`; e.g. " in text
    found = catalog.search("export invoices billing eu", 3)
    assert found[0]["name"] == "billing_eu.export_invoices"
    assert catalog.describe(found[0]["name"]).startswith('# "billing_eu.export_invoices"')


def test_index_falls_back_to_fewer_words_as_the_tool_set_grows() -> None:
    line = "A tool that does one specific thing for a specific resource very well."
    small = ToolCatalog([_tool(f"tool_{i:04d}", line) for i in range(100)]).index_text()
    assert "# tool_0000: A tool that does" in small
    many = ToolCatalog([_tool(f"tool_{i:04d}", line) for i in range(1_500)]).index_text()
    assert "names only" in many and "# tool_0000, tool_0001," in many
    plain = ToolCatalog([_tool(f"{v}_{i:04d}", line) for v in ("get", "set") for i in range(2_000)])
    text = plain.index_text()
    assert "in 2 groups, too many to list" in text
    assert "# get_* (2,000 tools); e.g. get_0000, get_0666, get_1333" in text
    for catalog_text in (small, many, text):
        index = catalog_text.split("ToolCallError", 3)[-1]
        assert len(index) <= INDEX_BUDGET + 2_000


def test_index_of_very_many_groups_stays_within_budget() -> None:
    tools = [_tool(f"ns{i:05d}.t", "x") for i in range(6_000)]
    text = ToolCatalog(tools).index_text()
    assert "more groups (search finds their tools)" in text
    assert _tokens(text) < 6_000
    ast.parse(text)


def test_index_marks_subscript_names_and_namespaces() -> None:
    text = ToolCatalog(_golden_tools("namespaces")).index_text()
    lines = text.splitlines()
    assert (
        '# tools["search"]: A tool named like the discovery method: tools["search"] only.' in lines
    )
    assert "# describe.* (1 tool)" in lines  # not an attribute namespace: no call form
    assert '#   tools["describe.schema"]: In a namespace named like the discovery method.' in lines
    assert "# git.* (6 tools): `await tools.git.<name>(args)`" in lines
    assert "#   search: A rest named search is still an attribute of its namespace." in lines
    assert "# echo: A plain tool." in lines
