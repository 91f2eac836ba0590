"""``ptc run``: one program, one executor, printed the way the model would see it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import orjson

from registry import ToolRegistry
from runtime import Limits, Runtime, RuntimeBackendError, get_runtime

from ._budget import DEFAULT_OUTPUT_BUDGET, OutputBudget, check_output_budget
from ._executor import CodeExecutor
from ._toolspec import ToolSet, run_command

if TYPE_CHECKING:
    from runtime._host._launch import SpawnedZygote

__all__ = ["RunOptions", "log_event", "open_event_log", "run_program"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    scope: str | None = None
    runtime: str = "subprocess"
    isolation: str = "strict"
    mode: str = "code"
    max_parallel: int = 10
    timeout: float | None = None
    #: Characters of the result shown (the model's budget); ``math.inf``: all of it.
    output_budget: OutputBudget = DEFAULT_OUTPUT_BUDGET
    events_path: str | None = None
    as_json: bool = False
    #: Print each line the program prints to stderr as it happens (``--quiet`` turns it off).
    live: bool = False
    #: A zygote spawned ahead (by ``ptc._cli.main``) for the subprocess runtime to adopt.
    zygote: SpawnedZygote | None = None


def open_event_log(path: str | None) -> IO[bytes] | None:
    """The ``--events`` file, opened to append (``None`` without one).

    Raises:
        ValueError: it cannot be opened (the CLI prints it and exits 2).
    """
    if path is None:
        return None
    try:
        return open(path, "ab")
    except OSError as exc:
        raise ValueError(f"cannot open {path}: {exc.strerror}") from exc


def log_event(log: IO[bytes], event: dict[str, Any]) -> None:
    """Append one event to an ``--events`` file as a JSON line, flushed."""
    log.write(orjson.dumps(event) + b"\n")
    log.flush()


def run_program(
    tools: ToolRegistry | ToolSet | Callable[[], ToolRegistry | ToolSet],
    code: str,
    options: RunOptions,
) -> int:
    """Run ``code`` and print the outcome; returns the exit code (0 ok, 1 failed run).

    The MCP servers of a :class:`ToolSet` are connected in the run's event loop
    for the whole run, and closed when it ends, however it ends. ``tools`` may
    be a function that loads the tool set: it is called once the runtime is
    made, so that a subprocess runtime's first worker is forked while the tool
    set's modules are imported (whatever it raises ends the run, the runtime
    closed first).

    Raises:
        ValueError: an unusable option (the CLI prints it and exits 2).
        ToolSpecError: an MCP server cannot be connected (likewise).
    """
    if options.mode not in ("code", "both"):
        raise ValueError(f"--mode must be code or both for ptc run, got {options.mode!r}")
    if options.max_parallel < 1:
        raise ValueError("--max-parallel must be at least 1")
    if options.timeout is not None and not options.timeout > 0:
        raise ValueError("--timeout must be positive")
    if options.isolation not in ("strict", "best-effort"):
        raise ValueError(f"--isolation must be strict or best-effort, got {options.isolation!r}")
    check_output_budget(options.output_budget, "--output-budget")
    limits = Limits() if options.timeout is None else Limits(timeout=options.timeout)
    collected: list[dict[str, Any]] = []
    # Opened before the runtime is made: from then on only the run's end closes
    # the runtime (which may hold a zygote spawned ahead).
    sink_file = open_event_log(options.events_path)

    live = options.live

    def on_event(event: dict[str, Any]) -> None:
        nonlocal live
        collected.append(event)
        if sink_file is not None:
            log_event(sink_file, event)
        if live and event["type"] == "tool/ptc-log":
            try:
                _show_live(event)
            except (OSError, ValueError):  # stderr is closed or gone: the run goes on
                live = False

    async def go() -> Any:
        try:
            async with (
                tool_set.open() as registry,
                CodeExecutor(
                    registry,
                    runtime=runtime,
                    mode=options.mode,  # type: ignore[arg-type]
                    max_parallel_sub_calls=options.max_parallel,
                    limits=limits,
                    output_budget=options.output_budget,
                    on_event=on_event,
                ) as executor,
            ):
                return await executor.run_code(code, description="ptc run", scope=options.scope)
        finally:
            # Even when the tool set fails to open: the runtime may hold a zygote already.
            await runtime.aclose()

    try:
        runtime = _runtime(options)
        try:
            loaded = tools if isinstance(tools, ToolRegistry | ToolSet) else tools()
        except BaseException:
            run_command(runtime.aclose)  # (a zygote spawned ahead is the runtime's now)
            raise
        tool_set = ToolSet(registry=loaded) if isinstance(loaded, ToolRegistry) else loaded
        result = run_command(go)
    finally:
        if sink_file is not None:
            sink_file.close()
    if options.as_json:
        payload: dict[str, Any] = {"is_error": result.is_error, "content": result.content}
        if result.is_error:
            payload["error"] = result.error.to_json()
        else:
            payload["value"] = result.value
        payload["events"] = collected
        sys.stdout.write(_shown(payload) + "\n")
    else:
        text = "\n".join(b.get("text", "") for b in result.content if b.get("type") == "text")
        sys.stdout.write(text + "\n")
    return 1 if result.is_error else 0


def _runtime(options: RunOptions) -> Runtime:
    """The run's runtime; a subprocess runtime adopts the zygote spawned ahead, if there is one.

    Raises:
        ValueError: the runtime is unknown, not installed, or refuses the options.
    """
    extra: dict[str, Any] = {}
    if options.runtime == "subprocess":
        # One run: one spare, forked while the command gets ready (a second
        # would be forked only to be killed; ~20 ms of CPU on a cold start).
        extra["spares"] = 1
        if options.zygote is not None:
            extra["zygote"] = options.zygote
    try:
        return get_runtime(options.runtime, isolation=options.isolation, **extra)  # type: ignore[arg-type]
    except RuntimeBackendError as exc:
        raise ValueError(str(exc)) from exc


def _show_live(event: dict[str, Any]) -> None:
    """A ``tool/ptc-log`` event on stderr: the line as printed, or ``ptc:`` and what was dropped.

    (Called from the executor's delivery thread, one event at a time.)
    """
    text = event["text"] if "dropped" not in event else f"ptc: {event['text']}"
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _shown(payload: dict[str, Any]) -> str:
    """The ``--json`` text of ``payload``: its first two levels indented, the rest compact.

    Indenting every level would grow a deep value's text with the square of its
    depth, and a long list of small values to several times its JSON size.
    """
    shown = {
        key: [orjson.Fragment(orjson.dumps(item)) for item in value]
        if type(value) is list
        else {name: orjson.Fragment(orjson.dumps(item)) for name, item in value.items()}
        if type(value) is dict
        else value
        for key, value in payload.items()
    }
    return orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode()
