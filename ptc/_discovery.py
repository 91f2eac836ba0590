"""Discovery mode: a small ``tools:sdk`` index, and ``tools.search``/``describe`` answered here.

A large tool set does not fit a prompt: the 117 tools of a real MCP server
render to about 24,600 tokens of SDK. In discovery mode the ``tools:sdk``
section is ``sdkgen``'s index instead (names grouped by namespace, one short
line each, or only the groups for very large sets), and the program finds the
rest itself: ``await tools.search(query)`` and ``await tools.describe(name)``
are calls the runtime forwards under names no tool can have
(``runtime.SEARCH_CALL``, ``runtime.DESCRIBE_CALL``) and the bridge answers
from the :class:`~sdkgen.ToolCatalog` of the run's scope, so that only what
that scope can see is ever found. They are not tool calls: no pipeline, no
sub-dispatch, no event; they count toward the run's ``max_tool_calls``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from registry import INVALID_ARGS, UNKNOWN_TOOL
from runtime import DESCRIBE_CALL, SEARCH_CALL, ToolAnswer

if TYPE_CHECKING:
    from sdkgen import ToolCatalog

__all__ = ["Discovery", "SdkMode", "answer_discovery", "check_discovery"]

#: What the ``tools:sdk`` section of a scope is.
SdkMode = Literal["full", "discovery"]


@dataclass(frozen=True, slots=True)
class Discovery:
    """When ``tools:sdk`` is the discovery index rather than the full SDK.

    ``mode``: ``"auto"`` (the default) turns discovery on for a scope that sees
    more than ``above_tools`` tools or whose full SDK is more than
    ``above_tokens`` tokens (characters / 4); ``"always"`` and ``"never"`` do
    not look. ``tools.search`` and ``tools.describe`` work in either mode.
    """

    mode: Literal["auto", "always", "never"] = "auto"
    above_tools: int = 40
    above_tokens: int = 8_000

    def problem(self) -> str | None:
        """What is wrong with this configuration, or ``None``."""
        if self.mode not in ("auto", "always", "never"):
            return f"Discovery.mode must be 'auto', 'always' or 'never', got {self.mode!r}"
        for label, value in (
            ("above_tools", self.above_tools),
            ("above_tokens", self.above_tokens),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return f"Discovery.{label} must be a non-negative integer, got {value!r}"
        return None

    def mode_for(self, tool_count: int, full_sdk: Callable[[], str]) -> SdkMode:
        """The mode of a scope of ``tool_count`` tools (``full_sdk`` renders only if needed)."""
        if self.mode != "auto":
            return "discovery" if self.mode == "always" else "full"
        if tool_count > self.above_tools:
            return "discovery"
        return "discovery" if (len(full_sdk()) + 3) // 4 > self.above_tokens else "full"


def check_discovery(value: object) -> Discovery:
    """``value`` (a :class:`Discovery`, or ``True``/``False`` for always/never) as a Discovery.

    Raises:
        ValueError: it is neither, or its fields are out of range.
    """
    if value is True or value is False:
        return Discovery(mode="always" if value else "never")
    if not isinstance(value, Discovery):
        raise ValueError(f"discovery must be a Discovery or a bool, got {value!r}")
    problem = value.problem()
    if problem is not None:
        raise ValueError(problem)
    return value


def answer_discovery(catalog: ToolCatalog, name: str, args: Any) -> ToolAnswer:
    """The answer to a program's ``tools.search`` (``name`` is ``SEARCH_CALL``) or ``describe``.

    ``args`` come from the worker as it sent them: anything that is not what
    the method takes is a failure the program can read, never an exception here.
    """
    shown = "tools.search" if name == SEARCH_CALL else "tools.describe"
    if not isinstance(args, dict):
        return ToolAnswer.failure(f"{shown}: arguments must be an object", code=INVALID_ARGS)
    try:
        if name == SEARCH_CALL:
            if set(args) - {"query", "limit"}:
                raise TypeError("tools.search() takes a query and a limit only")
            return ToolAnswer.success(catalog.search(args.get("query"), args.get("limit", 10)))  # type: ignore[arg-type]
        assert name == DESCRIBE_CALL
        if set(args) != {"name"} or not isinstance(args["name"], str):
            raise TypeError("tools.describe() takes one tool name, a str")
        return ToolAnswer.success(catalog.describe(args["name"]))
    except KeyError as exc:
        message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        return ToolAnswer.failure(message, code=UNKNOWN_TOOL)
    except (TypeError, ValueError) as exc:
        return ToolAnswer.failure(str(exc), code=INVALID_ARGS)
