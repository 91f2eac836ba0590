"""``ptc doctor``: which isolation layers this machine gives the worker, and why not.

The report keeps two kinds of layer apart. The OS layers of the CPython worker
are the security boundary, and the worker fails closed on them: a run on a
machine without one ends as ``sandbox`` unless ``isolation="best-effort"`` was
chosen explicitly. The language layer (the import allow-list, and
RestrictedPython when chosen) is a convenience that keeps well-meaning programs
on the supported modules; a program that wants to steps around it.
"""

from __future__ import annotations

import platform
import sys
import textwrap
from importlib import metadata

from runtime import LayerStatus, probe_layers, pyodide_status

__all__ = ["doctor_report"]


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _mode_lines(layers: list[LayerStatus]) -> list[str]:
    """What the fail-closed default means on this machine."""
    missing = [layer.name for layer in layers if not layer.active]
    lines = [
        '  mode   fail closed: isolation="strict" (the default) runs a program only with every',
        "         layer above; a missing one ends the run as `sandbox`, naming it",
    ]
    if not missing:
        lines.append(f"  here   all {len(layers)} layers active: runs get every one of them")
        return lines
    missing_text = textwrap.wrap(f"MISSING: {', '.join(missing)}", width=80)
    return [
        *lines,
        *(f"  {'here' if n == 0 else '':<6} {text}" for n, text in enumerate(missing_text)),
        "         Runs end as `sandbox` on this machine. Ways out: the Pyodide worker",
        "         (below; it needs none of these kernel features), or the explicit opt-in",
        '         isolation="best-effort" (SubprocessRuntime(isolation="best-effort"),',
        "         `ptc run --isolation best-effort`), which runs with the active layers",
        "         only and lists the missing ones in every outcome's isolation.",
    ]


def _pyodide_lines() -> list[str]:
    """The Pyodide worker: one line per fact of ``pyodide_status()``."""
    # A new fact (the state of Deno's storage APIs, say) is one more key of
    # pyodide_status(), shown here like the others.
    return [f"  {key:<9} {value}" for key, value in pyodide_status().items()]


def doctor_report() -> tuple[str, bool]:
    """The report text, and whether every OS layer of the CPython worker is active."""
    lines = [
        f"ptc-runner {_version('ptc-runner')} on Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()} ({platform.machine()})",
        "",
        "CPython worker (subprocess): OS isolation layers (the security boundary)",
    ]
    layers = probe_layers()
    width = max((len(layer.name) for layer in layers), default=0)
    for layer in layers:
        state = "active" if layer.active else "UNAVAILABLE"
        lines.append(f"  {layer.name:<{width}}  {state:<11}  {layer.detail}")
        lines.append(f"  {'':<{width}}  {'':<11}  protects against: {layer.protects}")
    complete = all(layer.active for layer in layers)
    lines += [
        f"  {'fresh process':<{width}}  {'active':<11}  one forked, sandboxed worker per run, "
        "never reused",
        "",
        *_mode_lines(layers),
        "",
        "CPython worker: language layer (a convenience, not a security boundary)",
        "  import allow-list  on           keeps programs on the supported standard-library",
        "                                  modules; a program that wants to steps around it",
        "                                  (attributes such as random._os reach other modules):",
        "                                  the OS layers above are the boundary",
        f"  RestrictedPython   available    version {_version('RestrictedPython')}; opt in with "
        "restricted=True: also refuses",
        "                                  underscore names and modules reached as attributes",
        "",
        "Pyodide worker (WebAssembly in Deno)",
        *_pyodide_lines(),
    ]
    return "\n".join(lines), complete


if __name__ == "__main__":  # pragma: no cover
    text, _ = doctor_report()
    sys.stdout.write(text + "\n")
