"""The ``ptc`` command line: ``tools``, ``sdk``, ``run``, ``doctor``."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer

from registry import ToolDefinition, UnknownScopeError

from ._toolspec import ToolSpecError, load_registry

__all__ = ["app", "main"]

app = typer.Typer(
    name="ptc",
    help="Programmatic tool calling: run model-written programs against your tools in a sandbox.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ToolsOption = Annotated[
    str,
    typer.Option(
        "--tools",
        help="The tool set: path/to/file.py:attr or package.module:attr naming a ToolRegistry.",
    ),
]
ScopeOption = Annotated[
    str | None, typer.Option("--scope", help="View the tools as this scope sees them.")
]


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line to stderr and exit."""
    typer.echo(f"ptc: error: {message}", err=True)
    raise typer.Exit(code)


def concurrency_class(definition: ToolDefinition) -> str:
    """``parallel`` (always safe), ``per-call`` (a classifier decides) or ``exclusive``."""
    safe = definition.concurrency_safe
    if safe is True:
        return "parallel"
    if callable(safe):
        return "per-call"
    return "exclusive"


def one_line(text: str, width: int = 80) -> str:
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return first if len(first) <= width else first[: width - 1].rstrip() + "…"


@app.command("tools")
def tools_command(tools: ToolsOption, scope: ScopeOption = None) -> None:
    """List the tools a scope can see: name, concurrency class, one-line description."""
    try:
        registry = load_registry(tools)
        definitions = registry.definitions(scope)
    except (ToolSpecError, UnknownScopeError) as exc:
        fail(str(exc))
    if not definitions:
        typer.echo("(no visible tools)")
        return
    name_width = max(len(d.name) for d in definitions)
    for definition in definitions:
        typer.echo(
            f"{definition.name:<{name_width}}  {concurrency_class(definition):<9}  "
            f"{one_line(definition.description)}".rstrip()
        )


@app.command("sdk")
def sdk_command(
    tools: Annotated[
        str,
        typer.Option(
            "--tools",
            help="A registry (path/to/file.py:attr or package.module:attr) or a .json file of tool schemas.",
        ),
    ],
    scope: ScopeOption = None,
    no_instructions: Annotated[
        bool, typer.Option("--no-instructions", help="Leave out the usage instructions.")
    ] = False,
    stats: Annotated[
        bool,
        typer.Option(
            "--stats", help="Print the size (tools, characters, ~tokens) instead of the text."
        ),
    ] = False,
) -> None:
    """Print the typed Python SDK (the tools:sdk section) the model programs against."""
    from sdkgen import normalize_tool_schemas, render_sdk, sdk_stats

    from ._toolspec import load_schema_file

    if tools.endswith(".json"):
        if scope is not None:
            fail("--scope applies to a registry, not to a .json file of schemas")
        try:
            schemas = normalize_tool_schemas(load_schema_file(tools))
        except ToolSpecError as exc:
            fail(str(exc))
        except ValueError as exc:
            fail(f"{tools}: {exc}")
    else:
        try:
            registry = load_registry(tools)
            schemas = registry.schemas(scope, with_output=True)
        except (ToolSpecError, UnknownScopeError) as exc:
            fail(str(exc))
    text = render_sdk(schemas, instructions=not no_instructions)
    if stats:
        size = sdk_stats(text)
        typer.echo(
            f"tools: {size['tools']}  chars: {size['chars']}  approx tokens: {size['approx_tokens']}"
        )
        return
    typer.echo(text, nl=not text.endswith("\n"))


@app.command("run")
def run_command(
    program: Annotated[str, typer.Argument(help="The program file, or - for standard input.")],
    tools: ToolsOption,
    scope: ScopeOption = None,
    runtime: Annotated[
        str, typer.Option("--runtime", help="Worker kind: subprocess (default) or pyodide.")
    ] = "subprocess",
    isolation: Annotated[
        str,
        typer.Option(
            "--isolation",
            help="strict (default): refuse to run where an OS isolation layer is missing; "
            "best-effort: run with the layers this machine has (an explicit opt-in, "
            "reported in the result's events).",
        ),
    ] = "strict",
    mode: Annotated[
        str, typer.Option("--mode", help="Executor mode: code (default) or both.")
    ] = "code",
    max_parallel: Annotated[
        int, typer.Option("--max-parallel", help="Concurrency-safe sub-calls that may overlap.")
    ] = 10,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Wall-clock seconds for the whole run.")
    ] = None,
    events: Annotated[
        str | None,
        typer.Option("--events", help="Append every event to this JSONL file as it happens."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the canonical result and the events as one JSON object."
        ),
    ] = False,
) -> None:
    """Run a program against a tool set, as the model's run_code call would."""
    from ._run import RunOptions, run_program

    if tools.endswith(".json"):
        fail(
            f"`ptc run` needs a registry whose tools it can call (path/to/file.py:attr or "
            f"package.module:attr); {tools} is a file of tool schemas, which only `ptc sdk` reads"
        )
    try:
        registry = load_registry(tools)
    except ToolSpecError as exc:
        fail(str(exc))
    try:
        code = _program_text(program)
    except OSError as exc:
        fail(f"cannot read {program}: {exc.strerror or exc}")
    except ValueError as exc:
        fail(str(exc))
    options = RunOptions(
        scope=scope,
        runtime=runtime,
        isolation=isolation,
        mode=mode,
        max_parallel=max_parallel,
        timeout=timeout,
        events_path=events,
        as_json=as_json,
    )
    try:
        exit_code = run_program(registry, code, options)
    except ValueError as exc:
        fail(str(exc))
    raise typer.Exit(exit_code)


@app.command("doctor")
def doctor_command(
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when any OS isolation layer is unavailable.")
    ] = False,
) -> None:
    """Report the isolation layers this machine gives, the fail-closed mode, and the Pyodide worker."""
    from ._doctor import doctor_report

    text, complete = doctor_report()
    typer.echo(text)
    if strict and not complete:
        raise typer.Exit(1)


runtime_app = typer.Typer(help="Manage worker runtimes.", no_args_is_help=True)
app.add_typer(runtime_app, name="runtime")


@runtime_app.command("install")
def runtime_install_command(
    name: Annotated[str, typer.Argument(help="The runtime to install: pyodide.")],
    force: Annotated[
        bool, typer.Option("--force", help="Download and rebuild everything.")
    ] = False,
) -> None:
    """Install a runtime's assets once (idempotent): Pyodide from the npm registry, and its snapshot."""
    from runtime import InstallError, RuntimeUnavailableError, install_pyodide

    if name != "pyodide":
        fail(f"unknown runtime {name!r}: only pyodide needs installing")
    try:
        install_pyodide(force=force, say=typer.echo)
    except (InstallError, RuntimeUnavailableError) as exc:
        fail(str(exc), code=1)


def _program_text(program: str) -> str:
    """The text of ``program`` (a path, or ``-`` for standard input).

    Raises:
        OSError: it cannot be read.
        ValueError: it is not a program: binary, or not UTF-8 (one line for the user).
    """
    if program == "-":
        data, name = sys.stdin.buffer.read(), "standard input"
    else:
        with open(program, "rb") as handle:
            data, name = handle.read(), program
    if b"\0" in data:
        raise ValueError(f"{name} is a binary file (it holds NUL bytes), not a Python program")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        offset = exc.start + len(data) - len(exc.object)  # after a BOM, if there is one
        raise ValueError(
            f"{name} is not UTF-8 text (byte 0x{data[offset]:02x} at offset {offset}); "
            "save the program as UTF-8"
        ) from None


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
