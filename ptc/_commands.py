"""The ``ptc`` command line's commands: ``tools``, ``sdk``, ``run``, ``serve``, ``doctor``, ``runtime``.

Its entry point is ``ptc._cli.main``, which may spawn ``ptc run``'s zygote
before it imports this module (see there).
"""

# No ``from __future__ import annotations`` here: typer reads each command's
# annotations on every ``ptc`` command, and strings it must compile and
# evaluate (about 7 ms of a cold start); these are evaluated once, at import.
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer

from registry import ToolAnnotations, ToolDefinition, ToolRegistry, UnknownScopeError

from ._toolspec import ToolSet, ToolSpecError, ToolSpecs, read_tool_specs

if TYPE_CHECKING:
    from runtime._host._launch import SpawnedZygote

    from ._budget import OutputBudget

__all__ = ["app"]

app = typer.Typer(
    name="ptc",
    help="Programmatic tool calling: run model-written programs against your tools in a sandbox.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

TOOLS_HELP = (
    "The tool set: path/to/file.py:attr or package.module:attr naming a ToolRegistry, "
    "or an mcpServers .json file (Claude Desktop / Cursor / Claude Code format) whose "
    "servers' tools join as <server>.<tool>. Repeat it to combine one Python tool set "
    "with any number of mcpServers files."
)
ToolsOption = Annotated[list[str], typer.Option("--tools", help=TOOLS_HELP, metavar="SPEC")]
ScopeOption = Annotated[
    str | None, typer.Option("--scope", help="View the tools as this scope sees them.")
]


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line to stderr and exit."""
    typer.echo(f"ptc: error: {message}", err=True)
    raise typer.Exit(code)


def concurrency_class(definition: ToolDefinition) -> str:
    """``parallel`` (always safe), ``classified`` (a classifier decides per call) or ``exclusive``."""
    safe = definition.concurrency_safe
    if safe is True:
        return "parallel"
    if callable(safe):
        return "classified"
    return "exclusive"


#: ToolAnnotations field -> MCP's name for it.
_ANNOTATION_NAMES = {
    "title": "title",
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}
#: ToolAnnotations hint -> (word when True, word when False), for the text listing.
_HINT_WORDS = {
    "read_only": ("read-only", "not read-only"),
    "destructive": ("destructive", "non-destructive"),
    "idempotent": ("idempotent", "not idempotent"),
    "open_world": ("open-world", "closed-world"),
}


def annotation_fields(annotations: ToolAnnotations) -> dict[str, Any]:
    """The annotations a tool gave, under MCP's names (``readOnlyHint``, ...)."""
    fields = {mcp: getattr(annotations, name) for name, mcp in _ANNOTATION_NAMES.items()}
    return {name: value for name, value in fields.items() if value is not None}


def annotation_words(annotations: ToolAnnotations | None) -> str:
    """The annotations in a few words: ``"Title", read-only, idempotent, ...``."""
    if annotations is None:
        return ""
    words = [] if annotations.title is None else [orjson.dumps(annotations.title).decode()]
    for name, (yes, no) in _HINT_WORDS.items():
        value = getattr(annotations, name)
        if value is not None:
            words.append(yes if value else no)
    return ", ".join(words)


def tool_entries(registry: ToolRegistry, scope: str | None) -> list[dict[str, Any]]:
    """What ``ptc tools --json`` prints: one object per visible tool, by name."""
    entries: list[dict[str, Any]] = []
    definitions = registry.definitions(scope)
    schemas = registry.schemas(scope, with_output=True)
    for definition, schema in zip(definitions, schemas, strict=True):
        entry: dict[str, Any] = {
            "name": definition.name,
            "description": definition.description,
            "parameters": schema["parameters"],
            "output": schema["output"],
            "concurrency": concurrency_class(definition),
        }
        if definition.annotations is not None:
            entry["annotations"] = annotation_fields(definition.annotations)
        entries.append(entry)
    return entries


def tool_lines(registry: ToolRegistry, scope: str | None) -> list[str]:
    """What plain ``ptc tools`` prints: name, concurrency class, description, [annotations]."""
    definitions = registry.definitions(scope)
    if not definitions:
        return ["(no visible tools)"]
    rows = [
        (d.name, concurrency_class(d), one_line(d.description), annotation_words(d.annotations))
        for d in definitions
    ]
    name_width = max(len(row[0]) for row in rows)
    text_width = max(len(row[2]) for row in rows) if any(row[3] for row in rows) else 0
    return [
        f"{name:<{name_width}}  {kind:<10}  {text:<{text_width}}"
        f"{f'  [{words}]' if words else ''}".rstrip()
        for name, kind, text, words in rows
    ]


class _EchoWarnings(logging.Handler):
    """The registry's warnings (an MCP tool not registered, ...) as ``ptc: warning:`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        typer.echo(f"ptc: warning: {record.getMessage()}", err=True)


@contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    logger = logging.getLogger("registry")
    handler = _EchoWarnings(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _read_specs(tools: list[str]) -> ToolSpecs:
    try:
        return read_tool_specs(tools)
    except ToolSpecError as exc:
        fail(str(exc))


def _budget_option(text: str | None) -> "OutputBudget":
    """``--output-budget``: the default when absent; a bad value is one line and exit 2."""
    from ._budget import DEFAULT_OUTPUT_BUDGET, parse_output_budget

    try:
        return DEFAULT_OUTPUT_BUDGET if text is None else parse_output_budget(text)
    except ValueError as exc:
        fail(str(exc))


def _callable_tool_set(tools: list[str], scope: str | None, command: str) -> ToolSet:
    """The tool set of a command that calls tools: no schema files, the scope checked first."""
    specs = _read_specs(tools)
    if specs.schemas:
        fail(
            f"`ptc {command}` needs a registry whose tools it can call (path/to/file.py:attr or "
            f"package.module:attr); {specs.schemas[0].path} is a file of tool schemas, "
            "which only `ptc sdk` reads"
        )
    try:
        tool_set = specs.tool_set()
        tool_set.registry.check_scope(scope)  # before any server is started
    except (ToolSpecError, UnknownScopeError) as exc:
        fail(str(exc))
    return tool_set


def one_line(text: str, width: int = 80) -> str:
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return first if len(first) <= width else first[: width - 1].rstrip() + "…"


@app.command("tools")
def tools_command(
    tools: ToolsOption,
    scope: ScopeOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the tools as JSON: name, description, parameters, output, "
            "concurrency and annotations of each.",
        ),
    ] = False,
) -> None:
    """List the tools a scope can see: name, concurrency class, one-line description, annotations."""
    specs = _read_specs(tools)
    if specs.schemas:
        fail(
            f"{specs.schemas[0].path} is a file of tool schemas, not a registry: name one as "
            "path/to/file.py:attr or package.module:attr"
        )
    try:
        tool_set = specs.tool_set()
        tool_set.registry.check_scope(scope)  # before any server is started
        with _warnings_on_stderr():
            if as_json:
                entries = tool_set.read(lambda registry: tool_entries(registry, scope))
            else:
                lines = tool_set.read(lambda registry: tool_lines(registry, scope))
    except (ToolSpecError, UnknownScopeError) as exc:
        fail(str(exc))
    if as_json:
        typer.echo(orjson.dumps(entries, option=orjson.OPT_INDENT_2).decode())
        return
    for line in lines:
        typer.echo(line)


@app.command("sdk")
def sdk_command(
    tools: Annotated[
        list[str],
        typer.Option(
            "--tools", help=TOOLS_HELP + " Or, alone, a .json file of tool schemas.", metavar="SPEC"
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
    discovery: Annotated[
        bool,
        typer.Option(
            "--discovery", help="Print the discovery-mode index (what large tool sets get)."
        ),
    ] = False,
) -> None:
    """Print the typed Python SDK (the tools:sdk section) the model programs against."""
    from sdkgen import ToolCatalog, normalize_tool_schemas, render_sdk, sdk_stats

    specs = _read_specs(tools)
    if specs.schemas:
        schema_file = specs.schemas[0]
        if len(tools) > 1:
            fail(
                f"{schema_file.path} is a file of tool schemas: give it as the only --tools "
                "(it does not combine with a registry or mcpServers files)"
            )
        if scope is not None:
            fail("--scope applies to a registry, not to a .json file of schemas")
        try:
            schemas = normalize_tool_schemas(schema_file.document)
        except ValueError as exc:
            fail(f"{schema_file.path}: {exc}")
    else:
        try:
            tool_set = specs.tool_set()
            tool_set.registry.check_scope(scope)
            with _warnings_on_stderr():
                schemas = tool_set.read(lambda registry: registry.schemas(scope, with_output=True))
        except (ToolSpecError, UnknownScopeError) as exc:
            fail(str(exc))
    catalog = ToolCatalog(schemas) if discovery else None
    if catalog is not None:
        text = catalog.index_text()
    else:
        text = render_sdk(schemas, instructions=not no_instructions)
    if stats:
        size = sdk_stats(text)
        if catalog is not None:
            size["tools"] = len(catalog)
        typer.echo(
            f"tools: {size['tools']}  chars: {size['chars']}  approx tokens: {size['approx_tokens']}"
        )
        return
    typer.echo(text, nl=not text.endswith("\n"))


@app.command("run")
def run_command(
    context: typer.Context,
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
    output_budget: Annotated[
        str | None,
        typer.Option(
            "--output-budget",
            metavar="N|off",
            help="Characters of the result the model gets (default 30000): longer output "
            "is cut to its head and tail around a marker line; off: all of it.",
        ),
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
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Do not print the program's lines to stderr as it prints them "
            "(never done with --json); the output at the end is the same.",
        ),
    ] = False,
) -> None:
    """Run a program against a tool set, as the model's run_code call would.

    What the program prints is shown on stderr as it happens (a burst of 50
    lines, then 20 a second); the output at the end, on stdout, has every line.
    """
    from ._run import RunOptions, run_program

    budget = _budget_option(output_budget)
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
        output_budget=budget,
        events_path=events,
        as_json=as_json,
        live=not (quiet or as_json),
        zygote=_zygote_ahead(context),
    )
    try:
        with _warnings_on_stderr():
            # The tool set is loaded once the runtime is made (its first worker forks meanwhile).
            exit_code = run_program(lambda: _callable_tool_set(tools, scope, "run"), code, options)
    except (ToolSpecError, UnknownScopeError, ValueError) as exc:
        fail(str(exc))
    raise typer.Exit(exit_code)


@app.command("serve")
def serve_command(
    tools: ToolsOption,
    scope: ScopeOption = None,
    runtime: Annotated[
        str, typer.Option("--runtime", help="Worker kind: subprocess (default) or pyodide.")
    ] = "subprocess",
    isolation: Annotated[
        str,
        typer.Option("--isolation", help="strict (default) or best-effort, as for `ptc run`."),
    ] = "strict",
    mode: Annotated[
        str,
        typer.Option("--mode", help="code (default): list run_code only; both: the tools too."),
    ] = "code",
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (default) or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[
        str, typer.Option("--host", help="The address to bind for http (default 127.0.0.1).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="The port for http (0: any free one).")
    ] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="For http: require 'Authorization: Bearer TOKEN' (default: $PTC_SERVE_TOKEN).",
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Wall-clock seconds of each run.")
    ] = None,
    max_parallel: Annotated[
        int, typer.Option("--max-parallel", help="Concurrency-safe sub-calls that may overlap.")
    ] = 10,
    events: Annotated[
        str | None,
        typer.Option("--events", help="Append every event to this JSONL file as it happens."),
    ] = None,
    output_budget: Annotated[
        str | None,
        typer.Option(
            "--output-budget",
            metavar="N|off",
            help="Characters of each run's result the model gets (default 30000); off: all.",
        ),
    ] = None,
) -> None:
    """Serve run_code (and, with --mode both, the tools) to any MCP client."""
    from ._serve import ServeOptions, serve_tools

    budget = _budget_option(output_budget)
    tool_set = _callable_tool_set(tools, scope, "serve")
    options = ServeOptions(
        scope=scope,
        runtime=runtime,
        isolation=isolation,
        mode=mode,
        transport=transport,
        host=host,
        port=port,
        token=token,
        timeout=timeout,
        max_parallel=max_parallel,
        events_path=events,
        output_budget=budget,
    )
    try:
        with _warnings_on_stderr():
            exit_code = serve_tools(tool_set, options)
    except (ToolSpecError, UnknownScopeError, ValueError) as exc:
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


def _zygote_ahead(context: typer.Context) -> "SpawnedZygote | None":
    """The zygote ``ptc._cli.main`` spawned for this run before the imports, if it did."""
    from runtime._host._launch import SpawnedZygote

    spawned = context.obj
    return spawned if isinstance(spawned, SpawnedZygote) and not spawned.taken else None
