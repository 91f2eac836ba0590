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


def _classes(text: str) -> list[ast.ClassDef]:
    return [node for node in _module(text).body if isinstance(node, ast.ClassDef)]


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
    phrases = ("asyncio.gather", "ToolCallError", "print(", "return", 'tools["my-tool"]')
    for phrase in (*phrases, "`await tools.git.status(args)`"):
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


def test_duplicates_equal_but_for_key_order_still_give_one_text() -> None:
    # The text shows a schema as written (key order included): of two duplicates
    # that differ only in key order, the one kept must not depend on input order.
    # (Found by the property test below: an invalid schema is shown as a comment.)
    schema = {"enum": False, "nullable": 0.0, "description": [None], "type": "string"}
    reordered = dict(reversed(list(schema.items())))
    first = {"name": "my-tool", "parameters": schema}
    second = {"name": "my-tool", "parameters": reordered}
    other = {"name": "t", "parameters": False}
    expected = render_sdk([other, first, second])
    for order in ([other, second, first], [second, other, first], [first, second, other]):
        assert render_sdk(order) == expected
    assert "1 malformed or duplicate entries left out" in expected


def test_tools_are_in_lexicographic_order() -> None:
    text = render_sdk([_tool(n) for n in ("zeta", "Alpha", "beta", "alpha")])
    names = list(_method_docs(text))
    assert names == ["Alpha", "alpha", "beta", "zeta"]


@pytest.mark.parametrize(
    "name",
    [
        "my-tool",
        "math.my-tool",  # a namespace with no attribute rest
        "math.list",
        "_math.factorial",  # not namespaces: private, keyword, non-ASCII, empty, builtin
        "class.factorial",
        "café.factorial",
        ".factorial",
        "list.factorial",
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
    assert [c.name for c in _classes(text) if c.name.endswith("Tools")] == ["Tools"]


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


# --------------------------------------------------------------------------- namespaces


def _members(text: str, class_name: str) -> list[str]:
    """A class's attributes and methods in order (``__getitem__`` as its literal)."""
    for node in _classes(text):
        if node.name == class_name:
            break
    else:
        raise AssertionError(f"no class {class_name}")
    names: list[str] = []
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.append(f"{item.target.id}: {ast.unparse(item.annotation)}")
        elif isinstance(item, ast.AsyncFunctionDef):
            names.append(item.name)
        elif isinstance(item, ast.FunctionDef):
            literal = item.args.args[1].annotation
            assert isinstance(literal, ast.Subscript) and isinstance(literal.slice, ast.Constant)
            names.append(f"[{literal.slice.value!r}]")
    return names


NAMESPACED = [
    _tool("git.status", "Working tree status.", repo_path={"type": "string"}),
    _tool("git.log", "Commit log."),
    _tool("git.my-tool", "Exotic rest."),
    _tool("time.get_current_time", "Current time."),
    _tool("everything.get-tiny-image", "Only an exotic rest."),
    _tool("echo", "Plain."),
]


def test_namespaced_tools_get_one_protocol_per_namespace() -> None:
    text = render_sdk(NAMESPACED, instructions=False)
    assert (
        "class GitTools(Protocol):\n"
        '    """Tools of `git`: `await tools.git.name(args)`."""\n'
        "\n"
        "    async def log(self, args: GitLogArgs) -> JsonValue:\n"
        '        """Commit log."""\n'
        "\n"
        "    async def status(self, args: GitStatusArgs) -> JsonValue:\n"
        '        """Working tree status."""\n'
    ) in text
    assert "class TimeTools(Protocol):\n" in text
    assert [c.name for c in _classes(text)][-3:] == ["GitTools", "TimeTools", "Tools"]
    assert _members(text, "Tools") == [
        "git: GitTools",
        "time: TimeTools",
        "echo",
        "['everything.get-tiny-image']",
        "['git.my-tool']",
    ]
    assert _members(text, "TimeTools") == ["get_current_time"]
    assert (
        '    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`; '
        'namespaced tools: `await tools.namespace.name(args)`."""\n'
    ) in text
    assert 'usage: await tools["git.my-tool"](args)' in text
    assert sdk_stats(text)["tools"] == len(NAMESPACED)
    exec(compile(text, "<sdk>", "exec"), {})


def test_namespaced_output_is_independent_of_input_order_and_duplicates() -> None:
    tools = [*NAMESPACED, _tool("git"), _tool("a.b"), _tool("a_.c"), _tool("A.d"), _tool("a.b.c")]
    twin = _tool("git.log", "Another log.", n={"type": "integer"})
    expected = render_sdk([*tools, twin])
    rng = random.Random(11)
    for _ in range(20):
        shuffled = [*tools, twin]
        rng.shuffle(shuffled)
        assert render_sdk(shuffled) == expected
    assert sdk_stats(expected)["tools"] == len(tools)
    assert "1 malformed or duplicate entries left out" in expected


def test_without_namespaces_the_tools_docstring_does_not_mention_them() -> None:
    text = render_sdk([_tool("a"), _tool("b-c"), _tool("_x.y"), _tool("ns.my-tool")])
    assert "namespaced tools:" not in text
    assert [c.name for c in _classes(text) if c.name.endswith("Tools")] == ["Tools"]


def test_a_namespace_colliding_with_a_tool_is_reached_by_full_names() -> None:
    # At run time `tools.git` is then the tool `git` and its namespace at once;
    # the SDK declares the tool and promises only `tools["git.status"]`.
    text = render_sdk([_tool("git"), _tool("git.status"), _tool("time.now")])
    assert _members(text, "Tools") == ["time: TimeTools", "git", "['git.status']"]
    assert "GitTools" not in text


@pytest.mark.parametrize("namespace", ["list", "print", "Tools", "JsonValue", "overload", "Any"])
def test_a_reserved_or_builtin_namespace_is_reached_by_full_names(namespace: str) -> None:
    text = render_sdk([_tool(f"{namespace}.x"), _tool("ok.x")])
    assert _members(text, "Tools") == ["ok: OkTools", f"[{namespace + '.x'!r}]"]


def test_a_namespace_named_like_a_type_is_reached_by_full_names() -> None:
    # `GitStatusArgs` is a type of this SDK: an attribute of that name would shadow it.
    text = render_sdk([_tool("git.status"), _tool("GitStatusArgs.x")])
    assert _members(text, "Tools") == ["git: GitTools", "['GitStatusArgs.x']"]


@pytest.mark.parametrize("rest", ["JsonValue", "GitLogArgs", "list", "print", "_x", "a.b", ""])
def test_a_rest_that_is_no_attribute_name_is_reached_by_full_name(rest: str) -> None:
    text = render_sdk([_tool("git.log"), _tool(f"git.{rest}")])
    assert _members(text, "GitTools") == ["log"]
    assert _members(text, "Tools") == ["git: GitTools", f"[{'git.' + rest!r}]"]


def test_namespace_class_names_never_collide() -> None:
    type_named_git_tools = {  # the tool `Git` declares the type `GitTools`
        "type": "object",
        "properties": {"t": {"$ref": "#/$defs/Tools"}},
        "$defs": {"Tools": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    text = render_sdk(
        [
            {"name": "Git", "description": "", "parameters": type_named_git_tools},
            _tool("git.a"),
            _tool("MyNsTools"),  # a Tools method of that name would shadow the class
            _tool("my_ns.b"),
            _tool("myNs.c"),
        ],
        instructions=False,
    )
    names = [c.name for c in _classes(text)]
    assert len(names) == len(set(names))
    assert "class GitTools(TypedDict):" in text
    assert _members(text, "Tools") == [
        "git: GitTools2",
        "myNs: MyNsTools2",
        "my_ns: MyNsTools3",
        "Git",
        "MyNsTools",
    ]
    assert _members(text, "GitTools2") == ["a"]
    assert _members(text, "MyNsTools2") == ["c"]
    assert _members(text, "MyNsTools3") == ["b"]
    exec(compile(text, "<sdk>", "exec"), {})


def test_a_titled_output_schema_shared_by_tools_is_declared_once() -> None:
    shared = {
        "title": "ToolText",
        "description": "The tool's text. Second paragraph.\n\nNot shown.",
        "anyOf": [{"type": "string"}, {"type": "array"}],
    }
    other = {**shared, "description": "Another meaning."}  # same title, not equal: its own
    schemas = [
        {"name": "b", "parameters": {"type": "object"}, "output": shared},
        {"name": "a", "parameters": {"type": "object"}, "output": dict(shared)},
        {"name": "c", "parameters": {"type": "object"}, "output": other},
        {"name": "d", "parameters": {"type": "object"}, "output": {"type": "string"}},
    ]
    text = render_sdk(schemas)
    assert text.count("ToolText: TypeAlias = str | list[JsonValue]") == 1
    assert "# The tool's text. Second paragraph.\nToolText: TypeAlias" in text
    assert "# Another meaning.\nToolText2: TypeAlias = str | list[JsonValue]" in text
    assert "async def a(self, args: AArgs) -> ToolText:" in text
    assert "async def b(self, args: BArgs) -> ToolText:" in text
    assert "async def c(self, args: CArgs) -> ToolText2:" in text
    assert "DResult: TypeAlias = str" in text  # untitled: per tool, as before
    assert render_sdk(list(reversed(schemas))) == text
