"""The ``ptc`` command line's entry point; the commands are in ``ptc._commands``.

For ``ptc run`` of the subprocess runtime, :func:`main` spawns the zygote first,
before it imports the commands (typer, the registry, the executor, the
runtime's host side): the zygote's boot, about 100 ms of its own imports, then
runs on another core beside them, and the run's runtime adopts it instead of
starting one after them. Whatever ends the command first (a ``--help``, a bad
option, a tool set that does not load), :func:`main` ends a zygote no runtime
took. No other command spawns one.

While :func:`main` spawns the zygote and imports the commands (and, when it
spawned a zygote, ``ptc._run``, which the run imports next anyway), the
cyclic GC is off: the 50-odd collections those imports would trigger take
6-7 ms of a cold ``ptc run`` and free a few hundred objects of the 27,000
they make. It is back on before the command runs, with those objects frozen.
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime._host._launch import SpawnedZygote

    from ._commands import app as app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    collecting = _pause_gc()
    zygote = _spawn_zygote_ahead(sys.argv[1:])
    try:
        try:
            from ._commands import app

            if zygote is not None:
                from . import _run  # noqa: F401 - the run's own imports, in the GC's pause too
        finally:
            _resume_gc(collecting)
        app(obj=zygote)  # the run command hands it to its runtime (typer's context object)
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        if zygote is not None:
            zygote.discard()  # a no-op once a runtime adopted it
        # The process ends now and the kernel frees its memory: the collections
        # of the interpreter's exit need not visit every object (25-35 ms).
        gc.freeze()


def _pause_gc() -> bool:
    """Turn the cyclic GC off while modules are imported; returns whether it was on."""
    collecting = gc.isenabled()
    gc.disable()
    return collecting


def _resume_gc(collecting: bool) -> None:
    """After the imports: freeze what they made and turn the GC back on if it was.

    Frozen objects are never visited again (a first collection after the
    imports would otherwise visit every one of them, all still young).
    """
    gc.freeze()
    if collecting:
        gc.enable()


def _spawn_zygote_ahead(args: list[str]) -> SpawnedZygote | None:
    """For ``ptc run`` of the subprocess runtime, its zygote, spawned now; else ``None``.

    A guess from the raw arguments, before typer parses them: one that is
    wrong only costs a zygote that is spawned and discarded, or one the run
    spawns later, as it would without this.
    """
    if args[:1] != ["run"] or "--help" in args or _runtime_named(args[1:]) != "subprocess":
        return None
    from runtime._host._launch import spawn_zygote, zygote_settings

    try:
        return spawn_zygote(zygote_settings())
    except (OSError, ImportError):
        return None  # the run's runtime tries again, and reports what fails


def _runtime_named(args: list[str]) -> str:
    """The value of ``--runtime`` in ``args`` (``subprocess``, its default, when absent)."""
    named = "subprocess"
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--runtime" and index + 1 < len(args):
            named = args[index + 1]
        elif arg.startswith("--runtime="):
            named = arg.removeprefix("--runtime=")
    return named


def __getattr__(name: str) -> Any:
    """``app`` (the typer application), imported on first access."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ._commands import app

    return app
