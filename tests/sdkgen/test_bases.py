"""Repeated field groups declared once in shared base TypedDicts (sdkgen._bases)."""

from __future__ import annotations

import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

import sdkgen._render
from sdkgen import render_sdk

# The GitHub corpus's SDK, in characters: 98,992 before shared bases (issue 19).
CORPUS_SDK_CHARS = 91_000
_FIELD = re.compile(r"^    [A-Za-z_][A-Za-z0-9_]*: .+$")


def _unshared(tools: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(sdkgen._render, "share_fields", lambda defs: None)
        return render_sdk(tools)


def _fields(text: str) -> set[str]:
    return {line for line in text.splitlines() if _FIELD.match(line) and " def " not in line}


def _module(text: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``text`` run as a module (registered: TypedDicts resolve their names there)."""
    module = types.ModuleType("sdkgen_bases_sdk")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(text, "<sdk>", "exec"), module.__dict__)
    return module.__dict__


def _load(corpus_path: Path) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads(corpus_path.read_text(encoding="utf-8"))
    return tools


def test_corpus_sdk_size_is_pinned(corpus_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = _load(corpus_path)
    text = render_sdk(tools)
    assert len(text) < CORPUS_SDK_CHARS, len(text)
    assert len(text) < 0.93 * len(_unshared(tools, monkeypatch))
    assert "class OwnerRepoFields(TypedDict):" in text


def test_every_field_line_survives(corpus_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each field's key, type, requiredness and comment is still written, once or more."""
    tools = _load(corpus_path)
    assert _fields(render_sdk(tools)) == _fields(_unshared(tools, monkeypatch))


def test_each_argument_type_keeps_its_keys_and_required_keys(
    corpus_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = _load(corpus_path)
    namespace = _module(render_sdk(tools), monkeypatch)
    for tool in tools:
        method = getattr(namespace["Tools"], tool["name"])
        args = typing.get_type_hints(method, globalns=namespace)["args"]
        schema = tool["inputSchema"]
        keys = set(schema.get("properties", {}))
        if not typing.is_typeddict(args):
            assert not keys, tool["name"]
            continue
        # (string annotations: NotRequired is read from the hints, through the bases)
        fields = typing.get_type_hints(args, include_extras=True)
        required = {k for k, v in fields.items() if typing.get_origin(v) is not typing.NotRequired}
        assert set(fields) == keys, tool["name"]
        assert required == set(schema.get("required", [])), tool["name"]


def test_small_or_varied_tool_sets_share_nothing() -> None:
    def tool(name: str, **props: Any) -> dict[str, Any]:
        return {"name": name, "parameters": {"type": "object", "properties": props}}

    same = {
        "owner": {"type": "string", "description": "The user or organization that owns the repo."},
        "repo": {"type": "string", "description": "The repository's name, without its owner."},
    }
    two = render_sdk([tool("a", **same), tool("b", **same)])
    assert "Fields(TypedDict)" not in two  # twice is not worth a base
    three = render_sdk([tool(n, **same, **{n: {"type": "integer"}}) for n in "abc"])
    assert "class OwnerRepoFields(TypedDict):" in three
    assert "class AArgs(OwnerRepoFields):\n    a: NotRequired[int]\n" in three
    assert "class CArgs(OwnerRepoFields):\n    c: NotRequired[int]\n" in three
    other = {**same, "owner": {"type": "string", "description": "Another owner."}}
    varied = render_sdk([tool("a", **same), tool("b", **same), tool("c", **other)])
    assert "Fields(TypedDict)" not in varied  # the same key with another comment differs
    tiny = {"owner": {"type": "string"}, "repo": {"type": "string"}}
    assert "Fields(TypedDict)" not in render_sdk([tool(n, **tiny) for n in "abc"])  # a trifle
