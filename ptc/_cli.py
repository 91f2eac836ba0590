"""The ``ptc`` command line: ``tools``, ``sdk``, ``run``, ``doctor``."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer

from registry import ToolDefinition

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
ScopeOption = Annotated[str | None, typer.Option("--scope", help="View the tools as this scope sees them.")]


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
    except ToolSpecError as exc:
        fail(str(exc))
    definitions = registry.definitions(scope)
    if not definitions:
        typer.echo("(no visible tools)")
        return
    name_width = max(len(d.name) for d in definitions)
    for definition in definitions:
        typer.echo(
            f"{definition.name:<{name_width}}  {concurrency_class(definition):<9}  "
            f"{one_line(definition.description)}".rstrip()
        )


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
