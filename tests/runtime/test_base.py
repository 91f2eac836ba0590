"""The lifecycle every :class:`runtime.Runtime` has, from its base class.

``run`` checks its arguments and refuses once the runtime is closed, for every
backend alike; ``aclose`` closes even when the backend's release fails or the
caller is cancelled; entering does nothing, leaving closes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from runtime import (
    CallTool,
    CancelSignal,
    Limits,
    RunOutcome,
    Runtime,
    RuntimeClosedError,
    RuntimeUnavailableError,
    SubprocessRuntime,
    ToolNames,
)
from runtime.testing import ToolBox

pytestmark = pytest.mark.anyio


class _Recording(Runtime):
    """A backend that records what its ``_run`` was given."""

    name = "recording"

    def __init__(self, *, limits: Limits | None = None, fail_close: bool = False) -> None:
        super().__init__(limits=limits)
        self.given: list[dict[str, Any]] = []
        self.fail_close = fail_close
        self.releases = 0

    async def _run(
        self,
        code: str,
        *,
        tool_names: ToolNames,
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
        on_log: Callable[[str], None] | None,
    ) -> RunOutcome:
        self.given.append({"code": code, "tool_names": tool_names, "limits": limits})
        return RunOutcome(result=code, has_result=True)

    async def _aclose(self) -> None:
        self.releases += 1
        await anyio.sleep(0.01)  # a checkpoint: it runs shielded
        if self.fail_close:
            raise OSError("release failed")


async def test_run_checks_and_defaults_then_calls_the_backend() -> None:
    backend = _Recording(limits=Limits(timeout=3))
    outcome = await backend.run("return 1", tool_names=["b", "a", "b"], call_tool=ToolBox())
    assert outcome.result == "return 1"
    [given] = backend.given
    assert isinstance(given["tool_names"], ToolNames)
    assert given["tool_names"] == {"a", "b"}
    assert given["limits"] is backend.limits and backend.limits.timeout == 3
    own = Limits(timeout=1)
    await backend.run("x", tool_names=(), call_tool=ToolBox(), limits=own)
    assert backend.given[1]["limits"] is own


async def test_checked_names_given_again_are_not_checked_again() -> None:
    backend = _Recording()
    names = ToolNames(["a", "b"])
    await backend.run("", tool_names=names, call_tool=ToolBox())
    assert backend.given[0]["tool_names"] is names


async def test_names_in_order_come_from_the_callers_list_or_are_sorted_once() -> None:
    backend = _Recording()
    await backend.run("", tool_names=["a", "c", "b"], call_tool=ToolBox())
    await backend.run("", tool_names={"z", "y"}, call_tool=ToolBox())
    await backend.run("", tool_names=["a", "b", "a"], call_tool=ToolBox())
    first, second, third = (given["tool_names"] for given in backend.given)
    assert first.in_order() == ["a", "b", "c"] and first.in_order() is first.in_order()
    assert second.in_order() == ["y", "z"]
    assert third.in_order() == ["a", "b"]  # each name once


async def test_the_same_list_of_names_again_is_not_checked_again() -> None:
    backend = _Recording()
    names = [f"tool_{i}" for i in range(50)]
    await backend.run("", tool_names=names, call_tool=ToolBox())
    await backend.run("", tool_names=list(names), call_tool=ToolBox())  # equal, not the same
    await backend.run("", tool_names=["other"], call_tool=ToolBox())  # sets taking turns
    await backend.run("", tool_names=tuple(names), call_tool=ToolBox())
    first, second, other, fourth = (given["tool_names"] for given in backend.given)
    assert second is first and fourth is first and other == {"other"}
    # Changed in place: checked anew, never the stale value.
    names.append("another")
    await backend.run("", tool_names=names, call_tool=ToolBox())
    assert backend.given[-1]["tool_names"] == {*first, "another"}
    names[0] = "bad\nname"
    with pytest.raises(ValueError, match="holds no line break"):
        await backend.run("", tool_names=names, call_tool=ToolBox())
    assert len(backend.given) == 5
    # A list with an unhashable item is refused as before (by the frozenset).
    with pytest.raises(TypeError, match="unhashable"):
        await backend.run("", tool_names=["ok", ["no"]], call_tool=ToolBox())  # type: ignore[list-item]


class _CountedName(str):
    """A tool name that counts how often it is hashed (a read of the name itself)."""

    hashed = 0

    def __hash__(self) -> int:
        _CountedName.hashed += 1
        return str.__hash__(self)


async def test_the_same_list_again_is_answered_without_reading_its_names() -> None:
    backend = _Recording()
    names = [_CountedName(f"tool_{i}") for i in range(50)]
    as_tuple = tuple(names)
    await backend.run("", tool_names=names, call_tool=ToolBox())
    await backend.run("", tool_names=as_tuple, call_tool=ToolBox())
    _CountedName.hashed = 0
    for given in (names, as_tuple, names):
        await backend.run("", tool_names=given, call_tool=ToolBox())
    assert _CountedName.hashed == 0  # compared by reference, name by name
    assert len({id(given["tool_names"]) for given in backend.given}) == 1
    # An equal list, not the same one: found by its names' hashes, not checked again.
    await backend.run("", tool_names=list(names), call_tool=ToolBox())
    assert _CountedName.hashed == len(names)
    assert backend.given[-1]["tool_names"] is backend.given[0]["tool_names"]
    # The same list changed in place: never the stale value.
    names[0] = _CountedName("renamed")
    await backend.run("", tool_names=names, call_tool=ToolBox())
    assert "renamed" in backend.given[-1]["tool_names"]
    assert "tool_0" not in backend.given[-1]["tool_names"]


@pytest.mark.parametrize(
    ("code", "names", "error", "message"),
    [
        (b"return 1", [], TypeError, "code must be str, not bytes"),
        ("return 1", ["ok", 3], TypeError, "tool names must be str, got 3"),
        ("return 1", ("ok", "two\nlines"), ValueError, "holds no line break, got 'two\\\\nlines'"),
    ],
)
async def test_bad_arguments_raise_before_the_backend_runs(
    code: Any, names: Any, error: type[Exception], message: str
) -> None:
    backend = _Recording()
    with pytest.raises(error, match=message):
        await backend.run(code, tool_names=names, call_tool=ToolBox())
    assert backend.given == []


async def test_shield_calls_without_a_call_group_is_refused() -> None:
    backend = _Recording()
    with pytest.raises(ValueError, match="shield_calls needs a call_group"):
        await backend.run("return 1", tool_names=[], call_tool=ToolBox(), shield_calls=True)
    assert backend.given == []
    # Not asked for: a backend's _run that predates it is called as before.
    await backend.run("return 1", tool_names=[], call_tool=ToolBox(), shield_calls=False)
    assert len(backend.given) == 1


async def test_a_closed_runtime_refuses_to_run_and_closes_once() -> None:
    async with _Recording() as backend:
        assert not backend.closed
    assert backend.closed
    await backend.aclose()
    assert backend.releases == 1
    with pytest.raises(RuntimeClosedError, match="the recording runtime is closed"):
        await backend.run("return 1", tool_names=[], call_tool=ToolBox())
    assert backend.given == []


async def test_aclose_closes_even_when_the_release_fails_or_is_cancelled() -> None:
    failing = _Recording(fail_close=True)
    with pytest.raises(OSError, match="release failed"):
        await failing.aclose()
    assert failing.closed
    await failing.aclose()  # closed already: not released twice
    assert failing.releases == 1

    backend = _Recording()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await backend.aclose()  # the release completes under the cancelled scope
    assert backend.closed and backend.releases == 1


async def test_the_backends_mean_the_same_by_closed() -> None:
    backends: list[Runtime] = [SubprocessRuntime(layers=(), spares=0)]
    try:
        from runtime import PyodideRuntime

        backends.append(PyodideRuntime(spares=0))
    except RuntimeUnavailableError:  # not installed here: the subprocess backend alone
        pass
    for backend in backends:
        outcome = await backend.run("return 1", tool_names=[], call_tool=ToolBox())
        assert outcome.result == 1, outcome
        await backend.aclose()
        assert backend.closed
        with pytest.raises(RuntimeClosedError):
            await backend.run("return 1", tool_names=[], call_tool=ToolBox())
