"""The program's ``tools`` object in-process: plain names, namespaces, and what they hide.

The same ``runtime/_worker/_program.py`` runs in both workers; the conformance suite
checks the namespaced calls through every backend, these tests the object
itself, and that RestrictedPython keeps a program away from its private state.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import re
import textwrap
from typing import Any

import pytest

from runtime import DESCRIBE_CALL, SEARCH_CALL, SubprocessRuntime, ToolAnswer
from runtime._worker._program import Tools, is_namespace_part, namespace_of, pack_names
from runtime._worker._restricted import (
    PROGRAM_FUNCTION,
    compile_restricted_program,
    restricted_globals,
)


class FakeRun:
    """A :class:`runtime._worker._program.ProgramRun` whose calls answer ``(name, args)`` at once."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.logs: list[str] = []

    def call(self, name: str, args: Any) -> Any:
        self.calls.append((name, args))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result({"tool": name, "args": args})
        return future

    def log(self, text: str) -> None:
        self.logs.append(text)


NAMES = [
    "git.status",
    "git.log",
    "git.my-tool",
    "git._hidden",
    "git.",
    "git.a.b",
    "time.now",
    "echo",
]


def make_tools(names: list[str] | None = None) -> tuple[Tools, FakeRun]:
    run = FakeRun()
    return Tools(run, list(NAMES if names is None else names)), run


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("git.status", ("git", "status")),
        ("git.a.b", ("git", "a.b")),  # the FIRST dot
        ("git.", ("git", "")),
        ("git.my-tool", ("git", "my-tool")),
        ("everything.get-tiny-image", ("everything", "get-tiny-image")),
        ("list.x", ("list", "x")),  # a builtin's name is a fine namespace at run time
        ("Git2.x", ("Git2", "x")),
        ("git", None),
        (".x", None),
        ("_git.x", None),
        ("class.x", None),
        ("café.x", None),
        ("my-ns.x", None),
        ("1a.x", None),
    ],
)
def test_namespace_of_follows_the_rule(name: str, split: tuple[str, str] | None) -> None:
    assert namespace_of(name) == split


def test_a_rest_is_an_attribute_by_the_same_rule() -> None:
    assert [is_namespace_part(r) for r in ("status", "Status2", "_x", "a.b", "class", "é", "")] == [
        True,
        True,
        False,
        False,
        False,
        False,
        False,
    ]


# --------------------------------------------------------------------------- access


@pytest.mark.anyio
async def test_every_spelling_reaches_the_same_binding() -> None:
    tools, run = make_tools()
    git: Any = tools.git
    assert git.status is git["status"] is tools["git.status"] is getattr(tools, "git.status")
    assert git["my-tool"] is tools["git.my-tool"]
    assert git["a.b"] is tools["git.a.b"]
    assert git[""] is tools["git."]
    assert git["_hidden"] is tools["git._hidden"]
    with pytest.raises(
        AttributeError, match=re.escape("reached by subscript, tools.<namespace>['_hidden']")
    ):
        git._hidden  # noqa: B018
    assert await git.status({"x": 1}) == {"tool": "git.status", "args": {"x": 1}}
    assert await tools.time.now(tz="UTC") == {"tool": "time.now", "args": {"tz": "UTC"}}
    assert await tools.echo({}) == {"tool": "echo", "args": {}}
    assert run.calls == [("git.status", {"x": 1}), ("time.now", {"tz": "UTC"}), ("echo", {})]


def test_unknown_names_say_what_the_namespace_has() -> None:
    tools, _ = make_tools()
    expected = (
        "no tool named 'git.stat' in namespace 'git'; available tools: "
        "git., git._hidden, git.a.b, git.log, git.my-tool, git.status"
    )
    with pytest.raises(AttributeError) as attribute:
        tools.git.stat  # noqa: B018
    assert str(attribute.value) == expected
    with pytest.raises(KeyError) as item:
        tools.git["stat"]
    assert item.value.args == (expected,)
    with pytest.raises(
        KeyError, match=re.escape("no tool named 3 in namespace 'time'; available tools: time.now")
    ):
        tools.time[3]
    with pytest.raises(KeyError, match="in namespace 'time'"):
        tools.time[["unhashable"]]
    assert not hasattr(tools.time, "later")
    # a namespace is no tool: subscript and `in` take full tool names only
    with pytest.raises(
        KeyError, match=re.escape("no tool named 'git'; available tools: echo, git., ")
    ):
        tools["git"]
    assert "git" not in tools
    with pytest.raises(
        AttributeError, match=re.escape("no tool named 'nope'; available tools: echo, git.")
    ):
        tools.nope  # noqa: B018


def test_namespace_object_is_a_small_read_only_view() -> None:
    tools, _ = make_tools()
    git: Any = tools.git
    assert list(git) == ["", "_hidden", "a.b", "log", "my-tool", "status"]
    assert len(git) == 6
    assert "status" in git and "git.status" not in git and "nope" not in git
    assert dir(git) == ["log", "status"]  # only what the attribute rule reaches
    assert repr(git) == "<tools.git: , _hidden, a.b, log, my-tool, status>"
    assert repr(git.status) == "<tool 'git.status'>"
    with pytest.raises(AttributeError):
        git.status = None
    with pytest.raises(AttributeError):
        git.anything = 1


@pytest.mark.parametrize("names", [["git.status", "git.__deepcopy__"], ["git", "git.status"]])
def test_protocol_probes_find_no_tool_in_a_namespace(names: list[str]) -> None:
    tools, run = make_tools(names)
    git: Any = tools.git
    for copied in (copy.copy(git), copy.deepcopy(git), pickle.loads(pickle.dumps(git))):
        assert type(copied) is type(git)
        assert sorted(copied) == sorted(git)
    assert copy.copy(git).status is git.status  # a shallow copy shares the bindings
    assert run.calls == []  # no probe called a tool


def test_the_tools_object_still_counts_full_names() -> None:
    tools, _ = make_tools()
    assert list(tools) == sorted(NAMES)
    assert len(tools) == len(NAMES)
    assert "git.status" in tools and "time.now" in tools
    assert dir(tools) == ["echo", "git", "time"]
    assert repr(tools) == f"<tools: {', '.join(sorted(NAMES))}>"


def test_search_and_describe_are_the_tools_objects_own_so_tools_so_named_are_subscripted() -> None:
    tools, run = make_tools(["search", "describe.x", "echo"])
    assert tools.search.__func__ is type(tools).search  # the method, not the tool
    assert tools.describe.__func__ is type(tools).describe  # not the namespace
    assert "search" in tools and "describe.x" in tools and len(tools) == 3
    assert repr(tools["search"]) == "<tool 'search'>"
    assert repr(tools["describe.x"]) == "<tool 'describe.x'>"

    async def calls() -> list[Any]:
        return [
            await tools["search"]({"q": 1}),
            await tools["describe.x"](),
            await tools.search("q"),
            await tools.describe("search"),
        ]

    answers = asyncio.run(calls())
    assert run.calls == [
        ("search", {"q": 1}),
        ("describe.x", {}),
        (SEARCH_CALL, {"query": "q", "limit": 10}),
        (DESCRIBE_CALL, {"name": "search"}),
    ]
    assert answers[0] == {"tool": "search", "args": {"q": 1}}


def test_names_outside_the_rule_are_plain_tools() -> None:
    names = ["_git.x", "class.y", "café.z", ".w", "my-ns.v", "plain"]
    tools, _ = make_tools(names)
    assert dir(tools) == ["plain"]
    for name in names:
        assert tools[name] is getattr(tools, name)
    for namespace in ("_git", "café", "my-ns"):
        with pytest.raises(AttributeError, match="no tool named"):
            getattr(tools, namespace)


@pytest.mark.anyio
async def test_a_tool_named_like_its_namespace_is_both() -> None:
    tools, run = make_tools(["git", "git.status", "git.log"])
    git: Any = tools.git
    assert git is tools["git"]
    assert "git" in tools and len(tools) == 3 and list(tools) == ["git", "git.log", "git.status"]
    assert git.status is git["status"] is tools["git.status"]
    assert await git({"a": 1}) == {"tool": "git", "args": {"a": 1}}
    assert await git.log() == {"tool": "git.log", "args": {}}
    assert run.calls == [("git", {"a": 1}), ("git.log", {})]
    assert list(git) == ["log", "status"] and len(git) == 2 and "log" in git
    assert dir(git) == ["log", "status"]
    assert repr(git) == "<tool 'git' and tools.git: log, status>"
    with pytest.raises(
        AttributeError, match=re.escape("no tool named 'git.push' in namespace 'git'")
    ):
        git.push  # noqa: B018
    with pytest.raises(TypeError, match=r"tools\['git'\]\(\) takes one dict"):
        git({"a": 1}, b=2)


def test_without_dotted_names_nothing_changes() -> None:
    tools, _ = make_tools(["echo", "my-tool", "_x"])
    assert dir(tools) == ["_x", "echo"]
    assert tools.echo is tools["echo"]
    assert getattr(tools, "my-tool") is tools["my-tool"]


def test_dotted_names_that_are_not_namespaced_make_no_namespace() -> None:
    tools, _ = make_tools(["_a.b", "echo"])
    assert dir(tools) == ["echo"]
    assert getattr(tools, "_a.b") is tools["_a.b"]
    with pytest.raises(AttributeError, match="no tool named '_a'"):
        tools._a  # noqa: B018


def test_bindings_are_made_on_first_use_and_kept() -> None:
    # A run with many visible tools makes nothing for the ones it never uses.
    names = [f"tool_{index:05d}" for index in range(5000)] + ["ns.a", "ns.b", "ns"]
    tools, _ = make_tools(names)
    assert tools._bindings == {} and tools._namespaces == {}
    assert tools.tool_04999 is tools["tool_04999"] is tools.tool_04999
    assert set(tools._bindings) == {"tool_04999"}
    assert list(tools.ns) == ["a", "b"] and tools.ns.a is tools["ns.a"]
    assert set(tools._bindings) == {"tool_04999", "ns", "ns.a", "ns.b"}
    assert len(tools) == 5003 and "ns.b" in tools and "tool_05000" not in tools


def test_the_packed_names_of_the_run_frame_are_the_names() -> None:
    names = ["a-b", "echo", "git", "git.log", "git.status", "émoji"]
    packed, _ = make_tools([])
    tools = Tools(packed._run, pack_names(names))
    assert list(tools) == names and len(tools) == 6 and "git.log" in tools
    assert "" not in tools and "echo\ngit" not in tools and "it.lo" not in tools
    assert list(tools.git) == ["log", "status"] and tools["émoji"] is tools.émoji
    assert len(Tools(packed._run, pack_names([]))) == 0 and list(Tools(packed._run, [])) == []
    alone = Tools(packed._run, pack_names([""]))  # (a name the registry refuses: still one)
    assert list(alone) == [""] and len(alone) == 1 and "" in alone


def test_names_are_found_whatever_order_they_come_in() -> None:
    tools, _ = make_tools(["zeta", "git.status", "alpha", "git", "git.log", "gitx"])
    assert list(tools) == ["alpha", "git", "git.log", "git.status", "gitx", "zeta"]
    assert list(tools.git) == ["log", "status"]
    assert "gitx" in tools and "gi" not in tools and 3 not in tools
    assert dir(tools) == ["alpha", "git", "gitx", "zeta"]


# --------------------------------------------------------------------------- RestrictedPython


def run_restricted(source: str, names: list[str]) -> Any:
    tools, _ = make_tools(names)
    code = compile_restricted_program(textwrap.dedent(source))
    namespace = restricted_globals({"tools": tools, "__ptc_nothing__": None})
    exec(code, namespace)
    main: Any = namespace[PROGRAM_FUNCTION]
    return asyncio.run(main())


@pytest.mark.parametrize("names", [["git.status", "git.log"], ["git", "git.status", "git.log"]])
def test_restricted_programs_call_namespaced_tools(names: list[str]) -> None:
    result = run_restricted(
        """
        import asyncio
        a = await tools.git.status({"n": 1})
        b = await tools.git["log"]({"n": 2})
        c = await tools["git.status"]({"n": 3})
        d = await getattr(tools.git, "log")({"n": 4})
        both = await asyncio.gather(tools.git.status({}), tools.git.log({}))
        return [a["tool"], b["tool"], c["tool"], d["tool"], [x["tool"] for x in both],
                sorted(tools.git), "status" in tools.git, len(tools.git)]
        """,
        names,
    )
    assert result == [
        "git.status",
        "git.log",
        "git.status",
        "git.log",
        ["git.status", "git.log"],
        ["log", "status"],
        True,
        2,
    ]


ESCAPES: list[tuple[str, type[Exception]]] = [
    # private and dunder attribute names do not compile
    ("return tools.git._members", SyntaxError),
    ("return tools.git._name", SyntaxError),
    ("return tools.git.status._run", SyntaxError),
    ("return tools._attributes", SyntaxError),
    ("return tools.git.__class__", SyntaxError),
    ("return tools.git.__getattr__('_members')", SyntaxError),
    # ... nor pass the attribute guard by name
    ("return getattr(tools.git, '_members')", AttributeError),
    ("return getattr(tools.git, '_missing')", AttributeError),
    ("return getattr(tools.git.status, '_run')", AttributeError),
    ("return getattr(tools, '_bindings')", AttributeError),
    ("return getattr(tools.git, '__class__')", AttributeError),
    ("return getattr(tools.git, '__dict__')", AttributeError),
    # a subscript reaches tools only
    ("return tools.git['_members']", KeyError),
    ("return tools.git['__class__']", KeyError),
    # no reflection builtins, no writes, no format strings, no attrgetter
    ("return type(tools.git)", NameError),
    ("return vars(tools.git)", NameError),
    ("tools.git.status = None", TypeError),
    ("setattr(tools.git, 'status', None)", TypeError),
    ("setattr(tools.git, '_members', {})", TypeError),
    ("delattr(tools.git, 'status')", TypeError),
    ("return '{0._members}'.format(tools.git)", NotImplementedError),
    ("return '{0._run}'.format_map({'0': tools.git.status})", NotImplementedError),
    ("import operator\nreturn operator.attrgetter('_members')(tools.git)", AttributeError),
    ("import inspect\nreturn inspect.getmembers(tools.git)", ImportError),
]


@pytest.mark.parametrize("names", [["git.status", "git.log"], ["git", "git.status", "git.log"]])
@pytest.mark.parametrize(("source", "refused"), ESCAPES)
def test_restricted_programs_cannot_reach_private_state_through_a_namespace(
    source: str, refused: type[Exception], names: list[str]
) -> None:
    with pytest.raises(refused):
        run_restricted(source, names)


@pytest.mark.anyio
async def test_the_restricted_worker_calls_namespaces_and_hides_their_state() -> None:
    async def answer(name: str, args: Any) -> ToolAnswer:
        return ToolAnswer.success(name)

    names = ["git", "git.status", "git.log"]
    async with SubprocessRuntime(restricted=True, spares=0) as backend:
        ok = await backend.run(
            "import asyncio\n"
            "return [await tools.git.status({}), await tools.git['log']({}), await tools.git({}),\n"
            "        await asyncio.gather(tools.git.log({}), tools['git.status']({}))]",
            tool_names=names,
            call_tool=answer,
        )
        assert ok.result == ["git.status", "git.log", "git", ["git.log", "git.status"]], ok
        private = await backend.run("return tools.git._members", tool_names=names, call_tool=answer)
        assert private.kind == "syntax" and "_members" in private.message, private
        by_name = await backend.run(
            "return getattr(tools.git.status, '_run')", tool_names=names, call_tool=answer
        )
        assert by_name.kind == "exception" and "AttributeError" in by_name.message, by_name
