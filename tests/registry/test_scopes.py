"""Scopes, shadowing, restrictions, reservations and the lookup views of ToolRegistry."""

from __future__ import annotations

from typing import Any

import pytest

from registry import (
    UNKNOWN_TOOL,
    RegistrationError,
    RegistryError,
    RestrictionError,
    ToolCall,
    ToolDefinition,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    UnknownScopeError,
    snapshot_json,
)

PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "query"}},
    "additionalProperties": False,
}
OUTPUT: dict[str, Any] = {"type": "string"}


def tool(name: str, marker: str | None = None, **overrides: Any) -> ToolDefinition:
    """A tool whose body returns ``marker`` so a test can tell which layer ran."""
    label = marker if marker is not None else f"global:{name}"

    async def execute(args: Any, ctx: ToolRunContext) -> str:
        return label

    fields: dict[str, Any] = {
        "name": name,
        "description": f"{name} ({label})",
        "parameters": PARAMS,
        "output": ToolOutput(schema=OUTPUT),
        "execute": execute,
    }
    fields.update(overrides)
    return ToolDefinition(**fields)


def registry_with(*names: str) -> ToolRegistry:
    reg = ToolRegistry()
    for name in names:
        reg.register(tool(name))
    return reg


def visible(reg: ToolRegistry, scope: str | None = None) -> list[str]:
    return [d.name for d in reg.definitions(scope)]


def call(name: str, scope: str | None = None, arguments: Any = None) -> ToolCall:
    return ToolCall(call_id="c1", name=name, scope=scope, arguments=arguments or {})


def marker_of(reg: ToolRegistry, name: str, scope: str | None) -> str | None:
    definition = reg.get(name, scope)
    return None if definition is None else definition.description


def unknown(result: ToolResult) -> bool:
    return (
        isinstance(result, ToolFailure)
        and result.error.info is not None
        and result.error.info.code == UNKNOWN_TOOL
    )


# --------------------------------------------------------------------------- scopes


def test_global_tools_are_visible_from_every_scope() -> None:
    reg = registry_with("b", "a")
    reg.add_scope("agent-1")
    assert visible(reg) == ["a", "b"]
    assert visible(reg, "agent-1") == ["a", "b"]
    assert reg.get("a", "agent-1") is reg.get("a")


READERS = {
    "view": lambda reg, scope: reg.view(scope),
    "get": lambda reg, scope: reg.get("a", scope),
    "definitions": lambda reg, scope: reg.definitions(scope),
    "schemas": lambda reg, scope: reg.schemas(scope, with_output=True),
    "policy": lambda reg, scope: reg.policy(scope),
    "scope_chain": lambda reg, scope: reg.scope_chain(scope),
    "is_admitted": lambda reg, scope: reg.is_admitted("a", scope),
    "execution_mode": lambda reg, scope: reg.execution_mode(call("a", scope)),
    "check_scope": lambda reg, scope: reg.check_scope(scope),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reading_a_scope_that_was_never_declared_raises(reader: str) -> None:
    # A typo must not show the global view (every global tool) instead.
    reg = registry_with("a")
    reg.add_scope("agent-1")
    read = READERS[reader]
    read(reg, None)
    read(reg, "agent-1")
    with pytest.raises(UnknownScopeError) as info:
        read(reg, "agent-l")
    assert isinstance(info.value, LookupError) and isinstance(info.value, RegistryError)
    assert info.value.scope == "agent-l"
    assert str(info.value) == "unknown scope 'agent-l' (did you mean 'agent-1'?)"
    with pytest.raises(UnknownScopeError, match="no scopes are declared"):
        read(registry_with("a"), "agent-1")
    assert visible(reg) == ["a"]  # reading created nothing


@pytest.mark.anyio
async def test_a_call_in_a_scope_that_was_never_declared_raises() -> None:
    # The scope is the caller's, never the model's: a typo is the caller's bug.
    reg = registry_with("a")
    with pytest.raises(UnknownScopeError, match="unknown scope 'agent-1'"):
        await reg.execute(call("a", "agent-1"))


@pytest.mark.parametrize(
    "declare",
    [
        lambda reg: reg.add_scope("s"),
        lambda reg: reg.register(tool("local"), scope="s"),
        lambda reg: reg.restrict("s", deny=["a"]),
        lambda reg: reg.reserve("later", scope="s"),
        lambda reg: reg.guard(lambda execution: None, scope="s"),
        lambda reg: reg.on_result(lambda execution, result: None, scope="s"),
    ],
    ids=["add_scope", "register", "restrict", "reserve", "guard", "listener"],
)
def test_every_writer_declares_the_scope_it_names(declare: Any) -> None:
    reg = registry_with("a")
    with pytest.raises(UnknownScopeError):
        visible(reg, "s")
    declare(reg)
    assert visible(reg, "s") in (["a"], ["a", "local"], [])
    assert reg.scope_chain("s") == ["s"]


def test_a_scoped_tool_is_visible_in_its_scope_and_descendants_only() -> None:
    reg = registry_with("g")
    reg.add_scope("agent-1")
    reg.add_scope("child", parent="agent-1")
    reg.add_scope("agent-2")
    reg.register(tool("local", "agent-1:local"), scope="agent-1")
    assert visible(reg, "agent-1") == ["g", "local"]
    assert visible(reg, "child") == ["g", "local"]
    assert visible(reg) == ["g"]
    assert visible(reg, "agent-2") == ["g"]
    assert reg.get("local") is None
    assert reg.get("local", "agent-2") is None


def test_register_restrict_and_guard_create_missing_scopes_without_parent() -> None:
    reg = registry_with("g")
    reg.register(tool("x", "s1:x"), scope="s1")
    reg.restrict("s2", deny=["g"])
    reg.guard(lambda execution: None, scope="s3")
    for name in ("s1", "s2", "s3"):
        assert reg.scope_chain(name) == [name]
        # created without a parent: declaring a parent afterwards is a conflict
        with pytest.raises(RestrictionError, match="already exists"):
            reg.add_scope(name, parent="s1" if name != "s1" else "s2")
    assert reg.add_scope("s1")() is None  # same declaration again is a harmless no-op


def test_add_scope_rejects_bad_declarations() -> None:
    reg = ToolRegistry()
    with pytest.raises(RestrictionError, match="does not exist"):
        reg.add_scope("child", parent="missing")
    with pytest.raises(RestrictionError, match="non-empty string"):
        reg.add_scope("")
    reg.add_scope("a")
    with pytest.raises(RestrictionError, match="own parent"):
        reg.add_scope("a", parent="a")
    reg.add_scope("b", parent="a")
    # re-parenting an existing scope (here: into a cycle) is refused
    with pytest.raises(RestrictionError, match="already exists with parent None"):
        reg.add_scope("a", parent="b")
    reg.add_scope("b", parent="a")  # idempotent with the same parent
    with pytest.raises(RestrictionError, match="already exists with parent 'a'"):
        reg.add_scope("b")
    assert reg.scope_chain("b") == ["b", "a"]
    assert reg.scope_chain(None) == []


def test_disposing_a_scope_with_children_is_refused_and_without_them_removes_it() -> None:
    reg = registry_with("g")
    dispose_parent = reg.add_scope("p")
    dispose_child = reg.add_scope("c", parent="p")
    reg.register(tool("mine", "c:mine"), scope="c")
    with pytest.raises(RestrictionError, match="child scopes"):
        dispose_parent()
    dispose_child()
    with pytest.raises(UnknownScopeError):
        reg.scope_chain("c")
    with pytest.raises(UnknownScopeError):
        visible(reg, "c")
    dispose_parent()
    with pytest.raises(UnknownScopeError):
        reg.scope_chain("p")


# --------------------------------------------------------------------------- shadowing


@pytest.mark.anyio
async def test_a_scoped_registration_shadows_the_global_for_the_scope_and_descendants() -> None:
    reg = registry_with("search")
    reg.add_scope("agent-1")
    reg.add_scope("child", parent="agent-1")
    reg.add_scope("agent-2")
    reg.register(tool("search", "agent-1:search"), scope="agent-1")

    assert marker_of(reg, "search", None) == "search (global:search)"
    assert marker_of(reg, "search", "agent-1") == "search (agent-1:search)"
    assert marker_of(reg, "search", "child") == "search (agent-1:search)"
    assert marker_of(reg, "search", "agent-2") == "search (global:search)"
    assert visible(reg, "agent-1") == ["search"]  # one entry, not two

    ran_scoped = await reg.execute(call("search", "agent-1"))
    ran_child = await reg.execute(call("search", "child"))
    ran_global = await reg.execute(call("search"))
    assert isinstance(ran_scoped, ToolSuccess) and ran_scoped.value == "agent-1:search"
    assert isinstance(ran_child, ToolSuccess) and ran_child.value == "agent-1:search"
    assert isinstance(ran_global, ToolSuccess) and ran_global.value == "global:search"


@pytest.mark.anyio
async def test_three_level_chain_resolves_to_the_nearest_layer() -> None:
    reg = registry_with("t", "u", "v")
    reg.add_scope("a")
    reg.add_scope("b", parent="a")
    reg.add_scope("c", parent="b")
    reg.register(tool("t", "a:t"), scope="a")
    reg.register(tool("u", "b:u"), scope="b")
    reg.register(tool("t", "c:t"), scope="c")
    reg.register(tool("w", "b:w"), scope="b")

    assert reg.scope_chain("c") == ["c", "b", "a"]
    expected = {
        None: {"t": "global:t", "u": "global:u", "v": "global:v"},
        "a": {"t": "a:t", "u": "global:u", "v": "global:v"},
        "b": {"t": "a:t", "u": "b:u", "v": "global:v", "w": "b:w"},
        "c": {"t": "c:t", "u": "b:u", "v": "global:v", "w": "b:w"},
    }
    for scope, tools in expected.items():
        assert visible(reg, scope) == sorted(tools)
        for name, label in tools.items():
            result = await reg.execute(call(name, scope))
            assert isinstance(result, ToolSuccess), (scope, name, result)
            assert result.value == label


@pytest.mark.anyio
async def test_disposing_a_shadow_restores_the_global_in_that_scope() -> None:
    reg = registry_with("t")
    dispose = reg.register(tool("t", "s:t"), scope="s")
    assert marker_of(reg, "t", "s") == "t (s:t)"
    dispose()
    assert marker_of(reg, "t", "s") == "t (global:t)"
    result = await reg.execute(call("t", "s"))
    assert isinstance(result, ToolSuccess) and result.value == "global:t"


# --------------------------------------------------------------------------- restrictions


def test_allow_keeps_only_named_inherited_tools_and_excludes_later_ones() -> None:
    reg = registry_with("a", "b", "c")
    reg.register(tool("own", "s:own"), scope="s")
    reg.restrict("s", allow=["a", "c"])
    assert visible(reg, "s") == ["a", "c", "own"]
    reg.register(tool("later"))
    assert visible(reg, "s") == ["a", "c", "own"]
    assert reg.get("later", "s") is None
    assert visible(reg) == ["a", "b", "c", "later"]


def test_deny_hides_named_inherited_tools_and_admits_later_ones() -> None:
    reg = registry_with("a", "b", "c")
    reg.restrict("s", deny=["b"])
    assert visible(reg, "s") == ["a", "c"]
    reg.register(tool("later"))
    assert visible(reg, "s") == ["a", "c", "later"]


def test_allow_and_deny_in_one_filter_combine() -> None:
    reg = registry_with("a", "b", "c")
    reg.restrict("s", allow=["a", "b"], deny=["b"])
    assert visible(reg, "s") == ["a"]


def test_masks_on_one_scope_intersect() -> None:
    reg = registry_with("a", "b", "c", "d")
    reg.restrict("s", allow=["a", "b", "c"])
    reg.restrict("s", allow=["b", "c", "d"])
    assert visible(reg, "s") == ["b", "c"]
    reg.restrict("s", deny=["c"])
    assert visible(reg, "s") == ["b"]


def test_masks_intersect_across_a_three_level_chain() -> None:
    reg = registry_with("a", "b", "c", "d")
    reg.add_scope("p")
    reg.add_scope("q", parent="p")
    reg.add_scope("r", parent="q")
    reg.restrict("p", deny=["a"])
    reg.restrict("q", allow=["b", "c"])
    reg.restrict("r", deny=["c"])
    assert visible(reg, "p") == ["b", "c", "d"]
    assert visible(reg, "q") == ["b", "c"]
    assert visible(reg, "r") == ["b"]
    # a child cannot widen what an ancestor masked: "a" is inherited, so the
    # allow list is legal, yet p's deny still applies
    reg.add_scope("r2", parent="p")
    reg.restrict("r2", allow=["a", "d"])
    assert visible(reg, "r2") == ["d"]
    assert [reg.is_admitted(n, "r2") for n in "abcd"] == [False, False, False, True]


def test_a_child_can_mask_its_parents_own_tools_but_the_parent_cannot() -> None:
    reg = registry_with("g")
    reg.add_scope("p")
    reg.add_scope("c", parent="p")
    reg.register(tool("p_tool", "p:p_tool"), scope="p")
    with pytest.raises(RestrictionError, match="registered in scope 'p' itself"):
        reg.restrict("p", deny=["p_tool"])
    reg.restrict("c", deny=["p_tool"])
    assert visible(reg, "p") == ["g", "p_tool"]
    assert visible(reg, "c") == ["g"]


def test_a_parents_mask_does_not_hide_the_parents_own_tools_from_its_children() -> None:
    reg = registry_with("x", "y")
    reg.add_scope("p")
    reg.add_scope("c", parent="p")
    reg.register(tool("x", "p:x"), scope="p")
    reg.restrict("p", deny=["x", "y"])  # masks the inherited globals only
    assert visible(reg, "p") == ["x"]
    assert marker_of(reg, "x", "p") == "x (p:x)"
    assert marker_of(reg, "x", "c") == "x (p:x)"
    assert reg.get("y", "c") is None


def test_the_scopes_own_registrations_stay_visible_under_any_mask() -> None:
    reg = registry_with("x", "other")
    reg.register(tool("x", "s:x"), scope="s")
    reg.register(tool("mine", "s:mine"), scope="s")
    reg.restrict("s", deny=["x"])  # legal: the global "x" is inherited
    reg.restrict("s", allow=["other"])
    assert visible(reg, "s") == ["mine", "other", "x"]
    assert marker_of(reg, "x", "s") == "x (s:x)"
    # registering locally after the mask is also exempt
    reg.register(tool("newer", "s:newer"), scope="s")
    assert "newer" in visible(reg, "s")


def test_a_later_shadow_under_an_allow_mask_is_visible_but_a_later_global_is_not() -> None:
    reg = registry_with("a")
    reg.add_scope("p")
    reg.add_scope("c", parent="p")
    reg.restrict("c", allow=["a"])
    reg.register(tool("late", "p:late"), scope="p")
    reg.register(tool("late2"))
    assert visible(reg, "p") == ["a", "late", "late2"]
    assert visible(reg, "c") == ["a"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"allow": ["nope"]}, "unknown tool name 'nope'"),
        ({"deny": ["a", "nope"]}, "unknown tool name 'nope'"),
        ({"deny": ["local"]}, "registered in scope 's' itself"),
        ({"allow": ["run_code"]}, "reserved transport"),
        ({"deny": ["run_code"]}, "reserved transport"),
        ({}, "empty restriction"),
        ({"allow": []}, "empty allow list"),
        ({"deny": []}, "empty deny list"),
        ({"allow": [], "deny": ["a"]}, "empty allow list"),
        ({"allow": "a"}, "list of names, not a string"),
        ({"deny": ["a", ""]}, "bad name ''"),
        ({"deny": [None]}, "bad name None"),
    ],
)
def test_bad_restrictions_raise_and_change_nothing(kwargs: dict[str, Any], message: str) -> None:
    reg = registry_with("a", "b")
    reg.register(tool("local", "s:local"), scope="s")
    changes: list[None] = []
    reg.on_change(lambda: changes.append(None))
    with pytest.raises(RestrictionError, match=message):
        reg.restrict("s", **kwargs)
    assert visible(reg, "s") == ["a", "b", "local"]
    assert changes == []


def test_restrict_needs_a_named_scope() -> None:
    reg = registry_with("a")
    with pytest.raises(RestrictionError, match="needs a scope"):
        reg.restrict(None, deny=["a"])  # type: ignore[arg-type]
    assert visible(reg) == ["a"]


def test_a_restriction_snapshots_its_filter() -> None:
    reg = registry_with("a", "b", "c")
    names = ["a", "b"]
    reg.restrict("s", allow=names)
    names.append("c")
    names.remove("a")
    assert visible(reg, "s") == ["a", "b"]


@pytest.mark.anyio
async def test_executing_a_restricted_away_tool_in_its_scope_is_unknown_tool() -> None:
    reg = registry_with("secret", "open")
    reg.add_scope("agent-1")
    reg.add_scope("child", parent="agent-1")
    reg.add_scope("agent-2")
    reg.restrict("agent-1", deny=["secret"])

    for scope in ("agent-1", "child"):
        result = await reg.execute(call("secret", scope))
        assert unknown(result), result
        assert isinstance(result, ToolFailure)
        assert "unknown tool 'secret'" in result.error.message
        listed = result.error.message.split("available tools:")[1]
        assert "open" in listed and "secret" not in listed
        assert result.content == [{"type": "text", "text": f"Error: {result.error.message}"}]

    in_global = await reg.execute(call("secret"))
    assert isinstance(in_global, ToolSuccess) and in_global.value == "global:secret"
    sibling = await reg.execute(call("secret", "agent-2"))
    assert isinstance(sibling, ToolSuccess)


def test_execution_mode_of_a_hidden_tool_is_exclusive() -> None:
    reg = ToolRegistry()
    reg.register(tool("safe", concurrency_safe=True))
    reg.restrict("s", deny=["safe"])
    assert reg.execution_mode(call("safe")) == "parallel"
    assert reg.execution_mode(call("safe", "s")) == "exclusive"


def test_execution_mode_uses_the_shadowing_definition() -> None:
    reg = ToolRegistry()
    reg.register(tool("t", concurrency_safe=True))
    reg.register(tool("t", "s:t", concurrency_safe=lambda args: args.get("q") == "ro"), scope="s")
    assert reg.execution_mode(call("t", "s", {"q": "ro"})) == "parallel"
    assert reg.execution_mode(call("t", "s", {"q": "rw"})) == "exclusive"
    assert reg.execution_mode(call("t", None, {"q": "rw"})) == "parallel"


# --------------------------------------------------------------------------- disposal


@pytest.mark.anyio
async def test_disposing_a_restriction_restores_visibility_and_twice_is_harmless() -> None:
    reg = registry_with("a", "b")
    dispose_deny = reg.restrict("s", deny=["a"])
    dispose_allow = reg.restrict("s", allow=["a", "b"])
    assert visible(reg, "s") == ["b"]
    assert unknown(await reg.execute(call("a", "s")))
    dispose_deny()
    assert visible(reg, "s") == ["a", "b"]
    assert isinstance(await reg.execute(call("a", "s")), ToolSuccess)
    dispose_deny()
    assert visible(reg, "s") == ["a", "b"]
    dispose_allow()
    reg.register(tool("c"))
    assert visible(reg, "s") == ["a", "b", "c"]


def test_disposing_one_of_two_identical_restrictions_keeps_the_other() -> None:
    reg = registry_with("a", "b")
    first = reg.restrict("s", deny=["a"])
    reg.restrict("s", deny=["a"])
    first()
    first()
    assert visible(reg, "s") == ["b"]


@pytest.mark.anyio
async def test_disposing_a_registration_removes_it_and_twice_is_harmless() -> None:
    reg = registry_with("keep")
    dispose = reg.register(tool("gone"))
    dispose()
    dispose()
    assert visible(reg) == ["keep"]
    assert unknown(await reg.execute(call("gone")))


@pytest.mark.parametrize("scope", [None, "s"])
def test_an_old_disposer_does_not_remove_a_re_registration(scope: str | None) -> None:
    reg = ToolRegistry()
    old = reg.register(tool("t", "first"), scope=scope)
    old()
    new = reg.register(tool("t", "second"), scope=scope)
    old()
    assert marker_of(reg, "t", scope) == "t (second)"
    new()
    assert reg.get("t", scope) is None


def test_an_old_reserve_disposer_does_not_remove_a_re_reservation() -> None:
    reg = ToolRegistry()
    old = reg.reserve("deferred")
    old()
    reg.reserve("deferred")
    old()
    reg.restrict("s", deny=["deferred"])  # still known: would raise if removed
    assert not reg.is_admitted("deferred", "s")


# --------------------------------------------------------------------------- reserve


@pytest.mark.anyio
async def test_a_reserved_name_is_restrictable_but_invisible_until_registered() -> None:
    reg = registry_with("a")
    reg.reserve("deferred")
    reg.restrict("s", deny=["deferred"])
    reg.restrict("t", allow=["deferred"])
    for scope in (None, "s", "t"):
        assert reg.get("deferred", scope) is None
        assert "deferred" not in visible(reg, scope)
        assert "deferred" not in [s["name"] for s in reg.schemas(scope)]
    assert unknown(await reg.execute(call("deferred")))

    reg.register(tool("deferred"))
    assert visible(reg) == ["a", "deferred"]
    assert visible(reg, "s") == ["a"]
    assert visible(reg, "t") == ["deferred"]
    ok = await reg.execute(call("deferred", "t"))
    assert isinstance(ok, ToolSuccess) and ok.value == "global:deferred"
    assert unknown(await reg.execute(call("deferred", "s")))


def test_a_name_reserved_in_an_ancestor_is_restrictable_in_a_descendant() -> None:
    reg = ToolRegistry()
    reg.add_scope("p")
    reg.add_scope("c", parent="p")
    reg.reserve("lazy", scope="p")
    reg.restrict("c", deny=["lazy"])
    with pytest.raises(RestrictionError, match="registered in scope 'p' itself"):
        reg.restrict("p", deny=["lazy"])
    assert not reg.is_admitted("lazy", "c")
    assert reg.is_admitted("lazy", "p")


def test_disposing_a_reservation_makes_the_name_unknown_again() -> None:
    reg = ToolRegistry()
    dispose = reg.reserve("lazy")
    dispose()
    dispose()
    with pytest.raises(RestrictionError, match="unknown tool name 'lazy'"):
        reg.restrict("s", deny=["lazy"])


def test_reserve_rejects_reserved_duplicate_and_bad_names() -> None:
    reg = ToolRegistry()
    with pytest.raises(RestrictionError, match="reserved for the code-mode transport"):
        reg.reserve("run_code")
    reg.reserve("x")
    with pytest.raises(RestrictionError, match="already reserved"):
        reg.reserve("x")
    reg.reserve("x", scope="s")  # another layer is fine
    with pytest.raises(RegistrationError, match="non-empty string"):
        reg.reserve("")
    with pytest.raises(RegistrationError, match="control characters"):
        reg.reserve("a\nb")


# --------------------------------------------------------------------------- is_admitted


def test_is_admitted_follows_masks_independent_of_registration() -> None:
    reg = registry_with("a", "b")
    reg.add_scope("p")
    reg.add_scope("c", parent="p")
    reg.restrict("p", deny=["a"])
    reg.restrict("c", allow=["b"])
    # the global view is never masked; an unknown scope is an error, not the global view
    assert reg.is_admitted("a")
    with pytest.raises(UnknownScopeError):
        reg.is_admitted("anything", "no-such-scope")
    # deny: named names are out, never-registered names are in
    assert not reg.is_admitted("a", "p")
    assert reg.is_admitted("b", "p")
    assert reg.is_admitted("unregistered", "p")
    # allow: only named names are in; it intersects with the ancestor's deny
    assert reg.is_admitted("b", "c")
    assert not reg.is_admitted("a", "c")
    assert not reg.is_admitted("unregistered", "c")


def test_is_admitted_ignores_the_scopes_own_shadow() -> None:
    reg = registry_with("x")
    reg.register(tool("x", "s:x"), scope="s")
    reg.restrict("s", deny=["x"])
    assert not reg.is_admitted("x", "s")  # the global capability is masked
    assert marker_of(reg, "x", "s") == "x (s:x)"  # ... while the local one resolves


def test_is_admitted_reflects_disposal() -> None:
    reg = registry_with("a")
    dispose = reg.restrict("s", deny=["a"])
    assert not reg.is_admitted("a", "s")
    dispose()
    assert reg.is_admitted("a", "s")


# --------------------------------------------------------------------------- get / definitions


def test_get_returns_the_registered_definition_or_none() -> None:
    reg = ToolRegistry()
    definition = tool("t")
    reg.register(definition)
    reg.restrict("s", deny=["t"])
    assert reg.get("t") is definition
    assert reg.get("t", "s") is None
    assert reg.get("missing") is None


def test_definitions_are_in_lexicographic_order() -> None:
    names = ["b", "a", "B", "_x", "a_b", "ab", "é", "Z9", "z-1"]
    reg = registry_with(*names)
    assert visible(reg) == sorted(names)
    assert visible(reg) == ["B", "Z9", "_x", "a", "a_b", "ab", "b", "z-1", "é"]


# --------------------------------------------------------------------------- schemas


def _walk(value: Any) -> list[Any]:
    out = [value]
    if isinstance(value, dict):
        for item in value.values():
            out.extend(_walk(item))
    elif isinstance(value, list):
        for item in value:
            out.extend(_walk(item))
    return out


def test_schemas_project_only_the_model_facing_fields() -> None:
    reg = ToolRegistry()

    def classifier(args: Any) -> bool:
        return True

    def finalize(execution: Any, result: Any) -> None:
        return None

    reg.register(
        tool(
            "full",
            timeout=3.5,
            concurrency_safe=classifier,
            finalize_content=finalize,
            output=ToolOutput(
                schema={"type": "string", "title": "out"},
                render=lambda args, value: [{"type": "text", "text": value}],
                meta=lambda args, value: {"m": 1},
            ),
        )
    )
    [plain] = reg.schemas()
    assert plain == {
        "name": "full",
        "description": "full (global:full)",
        "parameters": PARAMS,
    }
    [with_output] = reg.schemas(with_output=True)
    assert with_output == {**plain, "output": {"type": "string", "title": "out"}}
    for schema in (plain, with_output):
        assert snapshot_json(schema) == schema  # nothing but JSON: no callable, no timeout
        assert not any(callable(v) for v in _walk(schema))
        assert 3.5 not in _walk(schema)


def test_schemas_are_sorted_and_follow_the_scope_view() -> None:
    reg = registry_with("zeta", "alpha", "mid")
    reg.register(tool("mid", "s:mid"), scope="s")
    reg.restrict("s", deny=["zeta"])
    assert [s["name"] for s in reg.schemas()] == ["alpha", "mid", "zeta"]
    assert [(s["name"], s["description"]) for s in reg.schemas("s")] == [
        ("alpha", "alpha (global:alpha)"),
        ("mid", "mid (s:mid)"),
    ]


def test_mutating_returned_schemas_does_not_affect_the_registry() -> None:
    reg = ToolRegistry()
    parameters = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
    }
    output = {"type": "object", "properties": {"n": {"type": "integer"}}}
    definition = tool("t", parameters=parameters, output=ToolOutput(schema=output))
    reg.register(definition)
    first = reg.schemas(with_output=True)
    first[0]["parameters"]["properties"]["tags"]["items"]["enum"].append("c")
    first[0]["parameters"]["type"] = "array"
    first[0]["output"]["properties"]["n"]["type"] = "string"
    first[0]["name"] = "renamed"
    first.append({"name": "extra"})

    second = reg.schemas(with_output=True)
    assert second == [
        {
            "name": "t",
            "description": "t (global:t)",
            "parameters": {
                "type": "object",
                "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
            },
            "output": {"type": "object", "properties": {"n": {"type": "integer"}}},
        }
    ]
    assert parameters["properties"]["tags"]["items"]["enum"] == ["a", "b"]  # type: ignore[index]
    assert output["properties"]["n"]["type"] == "integer"  # type: ignore[index]
    assert second[0]["parameters"] is not reg.schemas()[0]["parameters"]


@pytest.mark.anyio
async def test_mutating_returned_schemas_does_not_change_validation() -> None:
    reg = ToolRegistry()
    reg.register(tool("t"))
    schemas = reg.schemas()
    schemas[0]["parameters"]["properties"]["q"]["type"] = "integer"
    result = await reg.execute(call("t", arguments={"q": "text"}))
    assert isinstance(result, ToolSuccess)


# --------------------------------------------------------------------------- change events


def test_on_change_fires_once_per_change_and_not_for_no_ops() -> None:
    reg = ToolRegistry()
    seen: list[int] = []
    stop = reg.on_change(lambda: seen.append(len(seen)))
    dispose_tool = reg.register(tool("a"))
    assert len(seen) == 1
    dispose_restriction = reg.restrict("s", deny=["a"])  # creates "s", then restricts
    assert len(seen) == 3
    dispose_reserve = reg.reserve("r")
    assert len(seen) == 4
    dispose_restriction()
    dispose_restriction()
    assert len(seen) == 5
    dispose_reserve()
    dispose_reserve()
    dispose_tool()
    dispose_tool()
    assert len(seen) == 7
    with pytest.raises(RegistrationError):
        reg.register(tool("run_code"))
    assert len(seen) == 7
    stop()
    stop()
    reg.register(tool("b"))
    assert len(seen) == 7


def test_a_raising_change_listener_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry()
    after: list[str] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    reg.on_change(broken)
    reg.on_change(lambda: after.append("ran"))
    reg.register(tool("a"))
    assert visible(reg) == ["a"]
    assert after == ["ran"]
    assert "change listener raised" in caplog.text


def test_schemas_show_what_is_enforced_even_if_the_caller_mutates_its_dict() -> None:
    reg = ToolRegistry()
    params: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    reg.register(tool("search", parameters=params))
    params["properties"]["q"]["type"] = "integer"
    assert reg.schemas()[0]["parameters"]["properties"]["q"] == {"type": "string"}


def test_view_is_read_only() -> None:
    reg = registry_with("a")
    view = reg.view()
    with pytest.raises(TypeError):
        view["b"] = view["a"]  # type: ignore[index]
    assert visible(reg) == ["a"]
