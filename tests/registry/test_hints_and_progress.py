"""Tool annotations, a body's own content (``ToolReturn``), progress reports, and the
ready-made "ask before destructive tools" policy."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from registry import (
    APPROVAL_UNAVAILABLE,
    INVALID_TOOL_OUTPUT,
    RegistrationError,
    ToolAnnotations,
    ToolExecution,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    ask_before_destructive,
    define_tool,
)
from tests.registry.helpers_pipeline import assert_failure, assert_success, make_call, make_tool

pytestmark = pytest.mark.anyio

IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


# --------------------------------------------------------------------------- annotations


def test_annotations_follow_the_mcp_defaults() -> None:
    assert ToolAnnotations().may_destroy  # says nothing: may change, and destructively
    assert not ToolAnnotations(read_only=True).may_destroy
    assert not ToolAnnotations(read_only=True, destructive=True).may_destroy  # read-only wins
    assert not ToolAnnotations(destructive=False).may_destroy
    assert ToolAnnotations(read_only=False, destructive=True).may_destroy


def test_annotations_are_kept_on_the_definition_and_checked() -> None:
    registry = ToolRegistry()
    hints = ToolAnnotations(title="Delete", read_only=False, destructive=True)
    registry.register(dataclasses.replace(make_tool("delete"), annotations=hints))
    found = registry.get("delete")
    assert found is not None and found.annotations is hints
    with pytest.raises(RegistrationError, match="annotations must be a ToolAnnotations"):
        registry.register(
            dataclasses.replace(make_tool("bad"), annotations={"readOnlyHint": True})  # type: ignore[arg-type]
        )


def test_the_decorator_passes_annotations_through() -> None:
    registry = ToolRegistry()
    hints = ToolAnnotations(read_only=True)

    @registry.tool(annotations=hints)
    def look(path: str) -> str:
        """Look at a path."""
        return path

    found = registry.get("look")
    assert found is not None and found.annotations is hints
    assert define_tool(look, annotations=hints).annotations is hints


# --------------------------------------------------------------------------- ToolReturn


async def test_a_body_returns_its_value_with_its_own_content() -> None:
    async def picture(args: Any, ctx: ToolRunContext) -> Any:
        return ToolReturn("a cat", [{"type": "text", "text": "here:"}, IMAGE])

    registry = ToolRegistry()
    registry.register(make_tool("picture", picture))
    result = await registry.execute(make_call("picture"))
    success = assert_success(result, "a cat")
    assert success.content == [{"type": "text", "text": "here:"}, IMAGE]


async def test_the_value_of_a_tool_return_is_still_validated() -> None:
    async def wrong(args: Any, ctx: ToolRunContext) -> Any:
        return ToolReturn(42, [IMAGE])  # the output schema wants a string

    registry = ToolRegistry()
    registry.register(make_tool("wrong", wrong))
    result = await registry.execute(make_call("wrong"))
    assert_failure(result, INVALID_TOOL_OUTPUT)


async def test_malformed_content_of_a_tool_return_is_an_output_error() -> None:
    async def blocks(args: Any, ctx: ToolRunContext) -> Any:
        return ToolReturn("x", [{"no": "type"}])

    registry = ToolRegistry()
    registry.register(make_tool("blocks", blocks))
    result = await registry.execute(make_call("blocks"))
    assert_failure(result, INVALID_TOOL_OUTPUT)


# --------------------------------------------------------------------------- progress


async def test_progress_reports_reach_the_listeners_of_the_calls_scope() -> None:
    async def work(args: Any, ctx: ToolRunContext) -> Any:
        ctx.report_progress(1, 3, "one")
        ctx.report_progress(3, 3)
        return "done"

    registry = ToolRegistry()
    registry.register(make_tool("work", work))
    registry.add_scope("agent")
    registry.add_scope("other")
    seen: list[tuple[str, str, float, float | None, str | None]] = []

    def listener(tag: str) -> Any:
        def record(
            execution: ToolExecution, progress: float, total: float | None, message: str | None
        ) -> None:
            seen.append((tag, execution.call_id, progress, total, message))

        return record

    registry.on_progress(listener("global"))
    registry.on_progress(listener("agent"), scope="agent")
    dispose = registry.on_progress(listener("other"), scope="other")
    assert_success(await registry.execute(make_call("work", call_id="c1", scope="agent")), "done")
    assert seen == [
        ("global", "c1", 1, 3, "one"),
        ("agent", "c1", 1, 3, "one"),
        ("global", "c1", 3, 3, None),
        ("agent", "c1", 3, 3, None),
    ]
    dispose()
    seen.clear()
    await registry.execute(make_call("work", call_id="c2", scope="other"))
    assert [tag for tag, *_ in seen] == ["global", "global"]


async def test_a_failing_progress_listener_does_not_fail_the_call() -> None:
    async def work(args: Any, ctx: ToolRunContext) -> Any:
        ctx.report_progress(1)
        return "done"

    def broken(*_: Any) -> None:
        raise RuntimeError("listener bug")

    registry = ToolRegistry()
    registry.register(make_tool("work", work))
    registry.on_progress(broken)
    assert_success(await registry.execute(make_call("work")), "done")


# --------------------------------------------------------------------------- ask_before_destructive


def _registry_with_hints(approval: Any = None) -> ToolRegistry:
    registry = ToolRegistry(approval=approval)
    registry.register(
        dataclasses.replace(
            make_tool("delete"), annotations=ToolAnnotations(title="Delete file", destructive=True)
        )
    )
    registry.register(
        dataclasses.replace(make_tool("read"), annotations=ToolAnnotations(read_only=True))
    )
    registry.register(
        dataclasses.replace(make_tool("unsure"), annotations=ToolAnnotations())  # says nothing
    )
    registry.register(make_tool("plain"))  # no annotations at all: not ours to judge
    registry.on_pre_execute(ask_before_destructive)
    return registry


async def test_ask_before_destructive_asks_for_tools_that_may_destroy() -> None:
    asked: list[tuple[str, str | None]] = []

    async def approve(execution: ToolExecution, reason: str | None) -> bool:
        asked.append((execution.name, reason))
        return execution.name == "delete"

    registry = _registry_with_hints(approve)
    assert_success(await registry.execute(make_call("delete")), "hi")
    assert_success(await registry.execute(make_call("read")), "hi")
    assert_success(await registry.execute(make_call("plain")), "hi")
    refused = await registry.execute(make_call("unsure"))
    assert refused.is_error
    assert asked == [
        ("delete", "Delete file may change or destroy data"),
        ("unsure", "unsure may change or destroy data"),
    ]


async def test_ask_before_destructive_without_an_approver_denies() -> None:
    registry = _registry_with_hints()
    assert_failure(await registry.execute(make_call("delete")), APPROVAL_UNAVAILABLE)
    assert_success(await registry.execute(make_call("read")), "hi")
