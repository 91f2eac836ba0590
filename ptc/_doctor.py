"""``ptc doctor``: which isolation layers this machine gives the worker, and why not."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from runtime import probe_layers, pyodide_status

__all__ = ["doctor_report"]


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def doctor_report() -> tuple[str, bool]:
    """The report text, and whether every OS layer of the CPython worker is active."""
    lines = [
        f"ptc-runner {_version('ptc-runner')} on Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()} ({platform.machine()})",
        "",
        "CPython worker (subprocess): OS isolation layers",
    ]
    layers = probe_layers()
    width = max((len(layer.name) for layer in layers), default=0)
    for layer in layers:
        state = "active" if layer.active else "UNAVAILABLE"
        lines.append(f"  {layer.name:<{width}}  {state:<11}  {layer.detail}")
        lines.append(f"  {'':<{width}}  {'':<11}  protects against: {layer.protects}")
    complete = all(layer.active for layer in layers)
    lines += [
        "",
        "CPython worker: language-level layers (defence in depth, not a boundary)",
        "  import allow-list  active       a safe standard-library set; configurable",
        f"  RestrictedPython   available    version {_version('RestrictedPython')}; "
        "opt in with restricted=True",
        "  fresh process      active       one forked, sandboxed worker per run, never reused",
        "",
        "Pyodide worker (WebAssembly in Deno)",
    ]
    for key, value in pyodide_status().items():
        lines.append(f"  {key:<9} {value}")
    if not complete:
        lines += [
            "",
            "Some OS layers are unavailable: the worker still runs with the layers it has;",
            "SubprocessRuntime(strict=True) refuses to run instead.",
        ]
    return "\n".join(lines), complete


if __name__ == "__main__":  # pragma: no cover
    text, _ = doctor_report()
    sys.stdout.write(text + "\n")
