"""Loading the tool set the ``--tools`` options name.

A ``--tools`` value is a Python tool set (``path/to/file.py:attr`` or
``package.module:attr``), an ``mcpServers`` JSON file (the configuration
format of Claude Desktop, Cursor and Claude Code), or, for ``ptc sdk`` only,
a ``.json`` file of tool schemas. One Python tool set and any number of MCP
files combine: the servers' tools are added into the Python registry (or into
a fresh one), as ``<server>.<tool>``, for as long as :meth:`ToolSet.open` is
entered.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import orjson

from registry import McpConfigError, McpConnectionError, ToolRegistry

from ._exceptions import ToolSpecError

if TYPE_CHECKING:
    from registry import ServerSpec

T = TypeVar("T")

__all__ = [
    "McpFile",
    "SchemaFile",
    "ToolSet",
    "ToolSpecError",
    "ToolSpecs",
    "load_registry",
    "load_schema_file",
    "read_tool_specs",
]


@dataclass(frozen=True, slots=True)
class McpFile:
    """An ``mcpServers`` file and the servers it configures."""

    path: str
    servers: Mapping[str, ServerSpec]


@dataclass(frozen=True, slots=True)
class SchemaFile:
    """A ``.json`` file that is not an ``mcpServers`` document, and its parsed content."""

    path: str
    document: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpecs:
    """The ``--tools`` values, sorted by kind (each ``.json`` file read once)."""

    python: tuple[str, ...] = ()
    mcp: tuple[McpFile, ...] = ()
    schemas: tuple[SchemaFile, ...] = ()

    def tool_set(self) -> ToolSet:
        """Load the Python tool set (a fresh registry when there is none) with the MCP servers.

        Raises:
            ToolSpecError: two Python tool sets, or the Python one cannot be loaded.
        """
        if len(self.python) > 1:
            first, second = self.python[:2]
            raise ToolSpecError(
                f"--tools names two Python tool sets, {first} and {second}: give one "
                "(with any number of mcpServers .json files)"
            )
        registry = load_registry(self.python[0]) if self.python else ToolRegistry()
        servers: dict[str, ServerSpec] = {}
        origins: dict[str, str] = {}
        for file in self.mcp:
            for name, spec in file.servers.items():
                servers[name] = spec
                origins[name] = file.path
        return ToolSet(registry=registry, servers=servers, origins=origins)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSet:
    """A registry and the MCP servers whose tools join it while :meth:`open` is entered."""

    registry: ToolRegistry
    servers: Mapping[str, ServerSpec] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)  # server -> its file

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ToolRegistry]:
        """Connect the servers, yield the registry with their tools, and close them on exit.

        The servers are closed whatever ends the block (an error, a cancellation,
        Ctrl-C): their tools are disposed and stdio servers' processes ended.

        Raises:
            ToolSpecError: a server cannot be started, reached or initialised, or
                the ``mcp`` package is missing (the message names the server and file).
        """
        if not self.servers:
            yield self.registry
            return
        from registry import connect_mcp  # the MCP client loads only for MCP servers

        connected = False
        try:
            async with connect_mcp(self.registry, self.servers):
                connected = True
                yield self.registry
        except Exception as exc:
            if not connected:
                error = self._connect_error(exc)
                if error is None:
                    raise
                raise error from exc
            leaf = _single_leaf(exc)  # what the block raised, out of connect_mcp's task group
            if leaf is exc:
                raise
            raise leaf from None

    def read(self, read: Callable[[ToolRegistry], T]) -> T:
        """``read(registry)`` with the servers connected, in an event loop of its own.

        Raises:
            ToolSpecError: as :meth:`open`.
        """
        if not self.servers:
            return read(self.registry)

        async def go() -> T:
            async with self.open() as registry:
                return read(registry)

        return run_command(go)

    def _connect_error(self, exc: Exception) -> ToolSpecError | None:
        """The one line for a failure to connect, or ``None`` for an unexpected one (a bug)."""
        from registry import HttpServer

        leaf = _single_leaf(exc)
        if isinstance(leaf, McpConnectionError):
            where = self.origins.get(leaf.server, "?")
            spec = self.servers.get(leaf.server)
            if isinstance(spec, HttpServer):
                where = f"{where}, {spec.url}"
            return ToolSpecError(f"MCP server {leaf.server!r} ({where}): {_one_line(leaf.reason)}")
        if isinstance(leaf, ImportError):
            name = next(iter(self.servers))
            return ToolSpecError(
                f"MCP server {name!r} ({self.origins[name]}): {_one_line(str(leaf))}"
            )
        if isinstance(leaf, McpConfigError):
            return ToolSpecError(_one_line(str(leaf)))
        return None


def read_tool_specs(specs: Sequence[str]) -> ToolSpecs:
    """Sort the ``--tools`` values by kind, reading every ``.json`` file.

    A value ending in ``.json`` is a file: an ``mcpServers`` document (a JSON
    object with an ``mcpServers`` key), else a file of tool schemas. Any other
    value names a Python tool set (loaded later, by :meth:`ToolSpecs.tool_set`).

    Raises:
        ToolSpecError: a file is missing, unreadable or not JSON; an ``mcpServers``
            document is malformed (the message names the file and the entry); a
            server is configured twice.
    """
    python: list[str] = []
    mcp: list[McpFile] = []
    schemas: list[SchemaFile] = []
    origins: dict[str, str] = {}
    for spec in specs:
        if not spec.endswith(".json"):
            python.append(spec)
            continue
        document = load_schema_file(spec)
        if not (isinstance(document, dict) and "mcpServers" in document):
            schemas.append(SchemaFile(spec, document))
            continue
        from registry import load_mcp_config  # the MCP client loads only for mcpServers files

        try:
            servers = load_mcp_config(spec)
        except McpConfigError as exc:
            raise ToolSpecError(f"{spec}: {_one_line(str(exc))}") from exc
        except OSError as exc:
            raise ToolSpecError(f"cannot read {spec}: {exc.strerror or exc}") from exc
        for name in servers:
            if name in origins:
                earlier = origins[name]
                raise ToolSpecError(
                    f"{spec} is given twice as --tools"
                    if Path(earlier).resolve() == Path(spec).resolve()
                    else f"MCP server {name!r} is configured twice, in {earlier} and in {spec}"
                )
            origins[name] = spec
        mcp.append(McpFile(spec, servers))
    return ToolSpecs(python=tuple(python), mcp=tuple(mcp), schemas=tuple(schemas))


def _single_leaf(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (a task group wraps what it raises)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " | ", text.strip())


def load_registry(spec: str) -> ToolRegistry:
    """Load the :class:`ToolRegistry` named by ``spec``.

    ``spec`` is ``path/to/file.py:attr`` or ``package.module:attr``; ``attr``
    defaults to ``registry`` and may also name a zero-argument factory.
    """
    target, _, attr = spec.partition(":")
    attr = attr or "registry"
    if not target:
        raise ToolSpecError(
            f"bad tool spec {spec!r}: expected path/to/file.py:attr or package.module:attr"
        )
    if target.endswith(".json"):
        raise ToolSpecError(
            f"{target} is a file of tool schemas, not a registry: name one as "
            "path/to/file.py:attr or package.module:attr"
        )
    module = _import(target)
    try:
        value: Any = module
        for part in attr.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise ToolSpecError(f"{target} has no attribute {attr!r}") from None
    if not isinstance(value, ToolRegistry) and callable(value):
        try:
            value = value()
        except Exception as exc:
            raise ToolSpecError(
                f"calling {target}:{attr}() failed: {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(value, ToolRegistry):
        raise ToolSpecError(f"{target}:{attr} is a {type(value).__name__}, not a ToolRegistry")
    return value


def _import(target: str) -> Any:
    looks_like_path = target.endswith(".py") or "/" in target or "\\" in target
    try:
        if looks_like_path:
            path = Path(target)
            if not path.is_file():
                raise ToolSpecError(f"no such file: {target}")
            name = f"_ptc_tools_{abs(hash(str(path.resolve())))}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ToolSpecError(f"cannot import {target}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except ToolSpecError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and target.startswith(exc.name):
            raise ToolSpecError(f"no such module: {target}") from exc
        raise ToolSpecError(f"importing {target} failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        raise ToolSpecError(f"importing {target} failed: {type(exc).__name__}: {exc}") from exc


def load_schema_file(path: str) -> Any:
    """Parse a ``.json`` file of tool schemas (validated further by ``sdkgen``)."""
    file = Path(path)
    if not file.is_file():
        raise ToolSpecError(f"no such file: {path}")
    try:
        return orjson.loads(file.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ToolSpecError(f"{path} is not valid JSON: {exc}") from exc
    except OSError as exc:
        raise ToolSpecError(f"cannot read {path}: {exc.strerror}") from exc


#: The exit status of a command ended by SIGTERM (128 + the signal's number).
TERMINATED = 128 + signal.SIGTERM


def run_command(main: Callable[[], Awaitable[T]]) -> T:
    """Run a command's async body in an event loop of its own; SIGTERM cancels it.

    A terminated command still leaves every ``async with`` it entered (the MCP
    servers it started are ended, the events it logged are delivered), then
    exits with status :data:`TERMINATED`.
    """
    terminated = False
    results: list[T] = []
    failures: list[Exception] = []

    async def watched() -> None:
        nonlocal terminated
        async with anyio.create_task_group() as tasks:

            async def watch() -> None:
                nonlocal terminated
                with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                    async for _ in signals:
                        terminated = True
                        tasks.cancel_scope.cancel()
                        return

            if threading.current_thread() is threading.main_thread():
                tasks.start_soon(watch)  # signals reach the main thread only
            try:
                results.append(await main())
            except Exception as exc:  # raised again below, not wrapped in a group
                failures.append(exc)
            tasks.cancel_scope.cancel()

    anyio.run(watched)
    if failures:
        raise failures[0]
    if terminated or not results:
        raise SystemExit(TERMINATED)
    return results[0]
