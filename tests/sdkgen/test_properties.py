"""Property: no schema, valid or garbage, makes render_sdk raise or emit bad Python."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdkgen import ToolCatalog, json_schema_to_py, render_sdk, sdk_stats
from sdkgen._tools import coerce_tool

KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "enum", "const", "oneOf", "anyOf",
    "allOf", "$ref", "$defs", "definitions", "additionalProperties", "patternProperties",
    "nullable", "description", "default", "minimum", "maxLength", "pattern", "format", "title",
]  # fmt: skip
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object", "dict", "float",
         "tuple", "any", "wat", "", "String"]  # fmt: skip
REFS = ["#", "#/$defs/A", "#/$defs/B", "#/definitions/A", "#/properties/a", "#/$defs/a~1b", "#/x/0",
        "http://example.com/s.json", "A", ""]  # fmt: skip

texts = st.text(
    alphabet=st.characters(exclude_categories=())  # lone surrogates too
    | st.sampled_from(['"', "\\", "\n", "\r", "\x00", "'"]),
    max_size=12,
)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
field_names = (
    st.sampled_from(["a", "b", "from", "my-key", "class", "__x", "A", "", "x y", "é"]) | texts
)


def _schema_dict(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict made mostly of JSON Schema keywords, each with a plausible or junk value."""
    value_for = {
        "type": st.sampled_from(TYPES)
        | st.lists(st.sampled_from(TYPES), max_size=3)
        | json_scalars,
        "properties": st.dictionaries(field_names, children, max_size=4) | json_scalars,
        "required": st.lists(field_names, max_size=4) | json_scalars,
        "items": children | st.lists(children, max_size=3),
        "prefixItems": st.lists(children, max_size=3),
        "enum": st.lists(json_values, max_size=4) | json_scalars,
        "const": json_values,
        "oneOf": st.lists(children, max_size=3) | json_scalars,
        "anyOf": st.lists(children, max_size=3),
        "allOf": st.lists(children, max_size=3),
        "$ref": st.sampled_from(REFS) | json_scalars,
        "$defs": st.dictionaries(st.sampled_from(["A", "B", "a/b"]), children, max_size=2),
        "definitions": st.dictionaries(st.sampled_from(["A"]), children, max_size=1),
        "additionalProperties": st.booleans() | children,
        "patternProperties": st.dictionaries(texts, children, max_size=2),
        "nullable": st.booleans() | json_scalars,
    }
    return st.lists(st.sampled_from(KEYWORDS), max_size=5, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: value_for.get(k, json_values) for k in keys})
    )


schemas = st.recursive(
    st.booleans() | json_scalars | st.builds(dict, type=st.sampled_from(TYPES)),
    _schema_dict,
    max_leaves=12,
)
# Namespaced names and every kind of collision they can have.
NAMESPACED_NAMES = [
    "git", "git.status", "git.log", "git.my-tool", "git.a.b", "git.", "git.JsonValue", "git.list",
    "GitTools", "GitStatusArgs", "t.x", "T.x", "Tools.x", "list.x", "_p.x", "class.x", "é.x",
    "my_ns.a", "myNs.a", "MyNsTools", "time.now", "time.Tools",
    "search", "describe", "search.x", "describe.y", "git.search",
]  # fmt: skip
tool_names = (
    st.sampled_from(["t", "my-tool", "class", "print", "T", "a.b", "", "é", "Tools", "JsonValue"])
    | st.sampled_from(NAMESPACED_NAMES)
    | texts
)
tools = st.fixed_dictionaries(
    {"name": tool_names, "parameters": schemas},
    optional={"description": texts | json_scalars, "output": schemas},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tools | json_values, max_size=4), st.randoms(use_true_random=False))
def test_render_sdk_never_raises_and_always_compiles(
    entries: list[Any], rnd: random.Random
) -> None:
    text = render_sdk(entries)
    namespace: dict[str, Any] = {}
    exec(compile(text, "<sdk>", "exec"), namespace)  # valid Python that also runs
    assert "Tools" in namespace
    text.encode("utf-8")
    valid = {tool["name"] for tool in map(coerce_tool, entries) if not isinstance(tool, str)}
    assert sdk_stats(text)["tools"] == len(valid)  # every tool declared exactly once
    shuffled = list(entries)
    rnd.shuffle(shuffled)
    assert render_sdk(shuffled) == text


@settings(max_examples=300, deadline=None)
@given(schemas)
def test_json_schema_to_py_never_raises_and_is_an_annotation(schema: Any) -> None:
    expr = json_schema_to_py(schema)
    compile(f"x: {expr}\n", "<expr>", "exec")


def test_random_sdks_pass_mypy_strict(tmp_path: Path) -> None:
    """One mypy --strict run over SDKs rendered from a batch of random tool sets."""
    texts: list[str] = []

    @settings(max_examples=40, deadline=None, database=None, derandomize=True)
    @given(st.lists(tools, min_size=1, max_size=4))
    def collect(entries: list[Any]) -> None:
        texts.append(render_sdk(entries, instructions=False))

    collect()
    rng = random.Random(5)
    for size in (2, 4, 8, len(NAMESPACED_NAMES)):  # namespaced sets: collisions on purpose
        names = rng.sample(NAMESPACED_NAMES, size)
        texts.append(render_sdk([{"name": name} for name in names], instructions=False))
    files = []
    for i, text in enumerate(dict.fromkeys(texts)):
        (tmp_path / f"sdk_{i}.py").write_text(text, encoding="utf-8")
        files.append(f"sdk_{i}.py")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version", "3.11",
         "--cache-dir", str(tmp_path / ".mypy_cache"), *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tools | json_values, max_size=5), texts)
def test_discovery_never_breaks_on_any_tool_set(entries: list[Any], query: str) -> None:
    catalog = ToolCatalog(entries)
    text = catalog.index_text()
    exec(compile(text, "<index>", "exec"), {})  # the index is valid Python too
    sdk = render_sdk(entries)
    for name in catalog.names:
        described = catalog.describe(name)
        for block in described.rstrip("\n").split("\n\n")[1:-1]:
            assert block + "\n" in sdk
    try:
        found = catalog.search(query)
    except ValueError as exc:
        assert "no word to search for" in str(exc)
    else:
        assert all(hit["name"] in catalog for hit in found)
        assert all("\n" not in hit["summary"] for hit in found)
