"""render_sdk: determinism, names, safety of untrusted text, degradation, size."""

from __future__ import annotations

import ast
import random
from typing import Any

import pytest

from sdkgen import SDK_INSTRUCTIONS, render_sdk, sdk_stats


def _tool(name: str, description: str = "", **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": sorted(properties)},
    }


def _module(text: str) -> ast.Module:
    return ast.parse(compile(text, "<sdk>", "exec", flags=ast.PyCF_ONLY_AST))


def _tools_class(text: str) -> ast.ClassDef:
    for node in _module(text).body:
        if isinstance(node, ast.ClassDef) and node.name == "Tools":
            return node
    raise AssertionError("no Tools class")


def _method_docs(text: str) -> dict[str, str | None]:
    """Method (or ``__getitem__`` literal) name -> its docstring."""
    docs: dict[str, str | None] = {}
    for node in _tools_class(text).body:
        if isinstance(node, ast.AsyncFunctionDef):
            docs[node.name] = ast.get_docstring(node, clean=False)
        elif isinstance(node, ast.FunctionDef) and node.name == "__getitem__":
            literal = node.args.args[1].annotation
            assert isinstance(literal, ast.Subscript)
            assert isinstance(literal.slice, ast.Constant)
            docs[literal.slice.value] = ast.get_docstring(node, clean=False)
    return docs


def test_instructions_are_the_module_docstring() -> None:
    with_text = render_sdk([_tool("a")])
    without = render_sdk([_tool("a")], instructions=False)
    # a multi-line docstring closes on its own line
    assert ast.get_docstring(_module(with_text), clean=False) == SDK_INSTRUCTIONS + "\n"
    assert ast.get_docstring(_module(without)) is None
    assert with_text.endswith(without)
    for phrase in ("asyncio.gather", "ToolCallError", "print(", "return", 'tools["my-tool"]'):
        assert phrase in SDK_INSTRUCTIONS


def test_output_is_independent_of_input_order_and_duplicates() -> None:
    tools = [_tool(f"t{i}", f"Tool {i}.", x={"type": "integer"}) for i in range(20)]
    twin = _tool("t3", "Another t3.", y={"type": "string"})
    expected = render_sdk([*tools, twin])
    rng = random.Random(7)
    for _ in range(10):
        shuffled = [*tools, twin]
        rng.shuffle(shuffled)
        assert render_sdk(shuffled) == expected
    assert sdk_stats(expected)["tools"] == 20
    assert "1 malformed or duplicate entries left out" in expected


def test_tools_are_in_lexicographic_order() -> None:
    text = render_sdk([_tool(n) for n in ("zeta", "Alpha", "beta", "alpha")])
    names = list(_method_docs(text))
    assert names == ["Alpha", "alpha", "beta", "zeta"]


@pytest.mark.parametrize(
    "name",
    [
        "my-tool",
        "math.factorial",
        "class",
        "None",
        "print",
        "list",
        "café",
        "__init__",
        "_x",
        "",
        "Any",
    ],
)
def test_exotic_names_are_reached_by_subscript(name: str) -> None:
    text = render_sdk([_tool(name, "Exotic."), _tool("plain", "Plain.")])
    docs = _method_docs(text)
    assert docs[name] == "Exotic."
    assert docs["plain"] == "Plain."
    methods = {n.name for n in _tools_class(text).body if isinstance(n, ast.AsyncFunctionDef)}
    assert methods == {"plain"}


def test_names_that_pascal_case_alike_get_distinct_types() -> None:
    text = render_sdk(
        [
            _tool("my-tool", x={"type": "integer"}),
            _tool("my_tool", y={"type": "string"}),
            _tool("MyTool", z={"type": "boolean"}),
        ]
    )
    classes = {
        node.name: [
            f.target.id
            for f in node.body
            if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)
        ]
        for node in _module(text).body
        if isinstance(node, ast.ClassDef) and node.name != "Tools"
    }
    fields = sorted(v for k, v in classes.items() if k.endswith("Args"))
    assert fields == [["x"], ["y"], ["z"]]
    assert len({k for k in classes if k.endswith("Args")}) == 3


INJECTIONS = [
    'Ends the docstring """; import os; os.system("rm -rf /") #',
    "Backslash at the end \\",
    'Quote at the end "',
    'Four quotes """"',
    "Nul \x00 byte and\r\ncarriage return\x1b[31m escape",
    "Line\u2028separator\u2029and\x85next line\x0bvt\x0cff",
    "Lone \ud800 surrogate",
    "\\N{BULLET} \\x41 \\u0041 not escapes",
]


@pytest.mark.parametrize("description", INJECTIONS)
def test_untrusted_text_cannot_break_out(description: str) -> None:
    tool = {
        "name": "evil",
        "description": description,
        "parameters": {
            "type": "object",
            "description": description,
            "properties": {
                "x": {"type": "string", "description": description, "default": description},
                "from": {"type": "string", "description": description, "enum": [description]},
            },
        },
    }
    exotic = {**tool, "name": description}
    text = render_sdk([tool, exotic])
    module = _module(text)
    # nothing but declarations: no statement calls anything except TypedDict("...", {...})
    for node in ast.walk(module):
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name) and node.func.id == "TypedDict"
        assert not isinstance(node, (ast.Import, ast.Delete, ast.Global, ast.With, ast.For))
    docs = _method_docs(text)
    assert set(docs) == {"evil", description}
    for doc in docs.values():
        assert doc is not None
        assert "\x00" not in doc and "\r" not in doc and "\ud800" not in doc
    text.encode("utf-8")  # no lone surrogate survived anywhere


def test_long_descriptions_keep_the_first_paragraph_within_limits() -> None:
    description = "First line.\nSecond line of the first paragraph.\n\nSecond paragraph is dropped."
    long = "word " * 200
    text = render_sdk(
        [_tool("a", description), _tool("b", long), _tool("c", "x", f={"description": long})]
    )
    docs = _method_docs(text)
    assert docs["a"] is not None and "Second paragraph" not in docs["a"]
    assert "Second line of the first paragraph." in docs["a"]
    assert docs["b"] is not None and len(docs["b"]) <= 301 and docs["b"].endswith("…")
    field_line = next(line for line in text.splitlines() if line.startswith("    f: "))
    assert len(field_line) < 400 and field_line.endswith("…")


def test_field_comments_carry_descriptions_and_constraints() -> None:
    tool = _tool(
        "page",
        per_page={
            "type": "integer",
            "description": "Results per page",
            "minimum": 1,
            "maximum": 100,
            "default": 30,
        },
        sort={"type": "string", "enum": ["asc", "desc"], "default": "asc"},
        login={"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
    )
    lines = render_sdk([tool]).splitlines()
    assert "    per_page: int  # Results per page (default 30, min 1, max 100)" in lines
    assert '    sort: Literal["asc", "desc"]  # (default "asc")' in lines
    assert '    login: str  # (maxLength 5, pattern "^[a-z]+$")' in lines


def test_constraints_already_in_the_description_are_not_repeated() -> None:
    tool = _tool(
        "page",
        per_page={
            "type": "integer",
            "description": "Per page (min 1, max 100)",
            "minimum": 1,
            "maximum": 100,
        },
        flag={"type": "boolean", "description": "A flag (default: true).", "default": True},
    )
    lines = render_sdk([tool]).splitlines()
    assert "    per_page: int  # Per page (min 1, max 100)" in lines
    assert "    flag: bool  # A flag (default: true)." in lines


def test_required_first_then_optional_as_not_required() -> None:
    tool = {
        "name": "t",
        "parameters": {
            "type": "object",
            "properties": {
                "b": {"type": "string"},
                "a": {"type": "string"},
                "c": {"type": "integer"},
            },
            "required": ["c"],
        },
    }
    text = render_sdk([tool])
    body = text[text.index("class TArgs(TypedDict):") :].splitlines()[1:4]
    assert body == ["    c: int", "    a: NotRequired[str]", "    b: NotRequired[str]"]


def test_illegal_field_names_keep_full_typing() -> None:
    text = render_sdk([_tool("t", **{"from": {"type": "integer"}, "my-key": {"type": "string"}})])
    assert 'TArgs = TypedDict("TArgs", {' in text
    assert '    "from": int,' in text
    assert '    "my-key": str,' in text


def test_identical_nested_shapes_share_one_definition() -> None:
    owner = {"type": "object", "properties": {"login": {"type": "string"}}, "required": ["login"]}
    text = render_sdk([_tool("a", owner=owner), _tool("b", author=owner)])
    assert text.count("    login: str") == 1
    assert "    author: AArgsOwner" in text


def test_python_cycles_and_huge_schemas_stay_bounded() -> None:
    cyclic: dict[str, Any] = {"type": "object", "properties": {}}
    cyclic["properties"]["left"] = cyclic
    cyclic["properties"]["right"] = cyclic
    deep: Any = {"type": "string"}
    for _ in range(5_000):
        deep = {"type": "array", "items": deep}
    merged: dict[str, Any] = {"type": "object"}
    merged["allOf"] = [merged, merged]  # would double at every level if re-merged
    self_ref = {"allOf": [{"$ref": "#"}, {"$ref": "#"}], "properties": {"a": {"type": "string"}}}
    text = render_sdk(
        [
            {"name": "cyc", "parameters": cyclic},
            {"name": "deep", "parameters": deep},
            {"name": "merged", "parameters": merged},
            {"name": "self_ref", "parameters": self_ref},
        ]
    )
    assert "class SelfRefArgs(TypedDict):\n    a: NotRequired[str]\n" in text
    compile(text, "<sdk>", "exec")
    assert "schema too large or too deep" in text
    assert len(text) < 2_000_000


@pytest.mark.parametrize("garbage", [None, 5, "abc", [None, 1, "x", {"name": 3}], {"tools": "no"}])
def test_garbage_input_gives_an_empty_sdk(garbage: Any) -> None:
    text = render_sdk(garbage)
    compile(text, "<sdk>", "exec")
    assert sdk_stats(text)["tools"] == 0


def test_output_schema_becomes_the_return_type() -> None:
    tool = {**_tool("count"), "output": {"type": "integer"}}
    text = render_sdk([tool, _tool("other")])
    assert "CountResult: TypeAlias = int" in text
    assert "async def count(self, args: CountArgs) -> CountResult:" in text
    assert "async def other(self, args: OtherArgs) -> JsonValue:" in text


def test_sdk_stats_counts_methods_and_subscript_tools() -> None:
    text = render_sdk([_tool("a"), _tool("b-c"), _tool("d.e")])
    stats = sdk_stats(text)
    assert stats == {"chars": len(text), "approx_tokens": (len(text) + 3) // 4, "tools": 3}
