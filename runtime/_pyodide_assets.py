"""Where the Pyodide runtime's pieces live: Deno, the pinned assets, the snapshot.

Nothing here downloads; :mod:`runtime._install` does, once, on an explicit
command. At run time a missing piece raises :class:`PyodideNotInstalledError`
naming that command.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ._exceptions import RuntimeUnavailableError

__all__ = [
    "ASSET_FILES",
    "INSTALL_COMMAND",
    "PROGRAM_MODULE",
    "PYODIDE_INTEGRITY",
    "PYODIDE_VERSION",
    "WORKER_DIR",
    "PyodideInstall",
    "PyodideNotInstalledError",
    "asset_dir",
    "cache_root",
    "find_deno",
    "locate_pyodide",
    "pyodide_status",
    "snapshot_path",
]

#: The pinned npm ``pyodide`` release and its registry integrity (SRI, sha512).
PYODIDE_VERSION = "314.0.7"
PYODIDE_INTEGRITY = "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="
#: The files of the npm package a worker needs (everything else is left out).
ASSET_FILES = (
    "package.json",
    "pyodide-lock.json",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "pyodide.mjs",
    "python_stdlib.zip",
)
#: The Deno host script and the in-Pyodide bootstrap shipped with this package.
WORKER_DIR = Path(__file__).resolve().parent / "pyodide"
#: The program semantics shared with the CPython worker; ``worker.js`` loads it too.
PROGRAM_MODULE = Path(__file__).resolve().parent / "_program.py"
INSTALL_COMMAND = "ptc runtime install pyodide"
_EXTRA_HINT = "pip install 'ptc-runner[pyodide]'"


class PyodideNotInstalledError(RuntimeUnavailableError):
    """A piece of the Pyodide runtime is missing; the message says how to install it.

    Attributes:
        missing: what was not found.
    """

    def __init__(self, missing: str) -> None:
        self.missing = missing
        super().__init__(
            "pyodide",
            f"{missing}; install Deno with `{_EXTRA_HINT}`, then run `{INSTALL_COMMAND}`",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PyodideInstall:
    """The located pieces a worker is started from.

    Attributes:
        deno: path of the Deno executable.
        assets: directory holding :data:`ASSET_FILES` of :data:`PYODIDE_VERSION`.
        snapshot: the memory snapshot matching this version and bootstrap, if built.
        deno_dir: Deno's private cache directory (never the user's).
    """

    deno: Path
    assets: Path
    snapshot: Path | None
    deno_dir: Path


def cache_root() -> Path:
    """``$PTC_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptc-runner``, else ``~/.cache/ptc-runner``."""
    explicit = os.environ.get("PTC_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(base).expanduser() / "ptc-runner").resolve()


def asset_dir(cache_dir: Path | None = None) -> Path:
    """The directory of the pinned Pyodide assets under ``cache_dir`` (or :func:`cache_root`)."""
    return (cache_dir or cache_root()) / "pyodide" / PYODIDE_VERSION


def snapshot_path(assets: Path) -> Path:
    """The snapshot file for this Pyodide version and the worker's sources.

    The sources are ``worker.js``, ``bootstrap.py`` and ``_program.py``. The
    name carries a digest of all four, so changing any of them makes the
    old snapshot stale and the installer builds a new one.
    """
    digest = hashlib.sha256(PYODIDE_VERSION.encode())
    for source in (WORKER_DIR / "worker.js", WORKER_DIR / "bootstrap.py", PROGRAM_MODULE):
        digest.update(source.read_bytes())
    return assets / f"snapshot-{digest.hexdigest()[:16]}.bin"


def find_deno() -> Path | None:
    """The Deno binary: ``$PTC_DENO``, the PyPI ``deno`` package, then ``PATH``."""
    explicit = os.environ.get("PTC_DENO")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    try:
        # The optional ``pyodide`` extra: the PyPI ``deno`` package ships the binary.
        deno = importlib.import_module("deno")
        return Path(deno.find_deno_bin())
    except (ImportError, FileNotFoundError, AttributeError):
        pass
    found = shutil.which("deno")
    return Path(found) if found else None


def _assets_complete(assets: Path) -> bool:
    return all((assets / name).is_file() for name in ASSET_FILES)


def locate_pyodide(cache_dir: Path | None = None) -> PyodideInstall:
    """Find Deno and the assets or raise :class:`PyodideNotInstalledError`."""
    deno = find_deno()
    if deno is None:
        raise PyodideNotInstalledError("no Deno executable found")
    assets = asset_dir(cache_dir)
    if not _assets_complete(assets):
        raise PyodideNotInstalledError(f"no Pyodide {PYODIDE_VERSION} assets in {assets}")
    snapshot = snapshot_path(assets)
    return PyodideInstall(
        deno=deno,
        assets=assets,
        snapshot=snapshot if snapshot.is_file() else None,
        deno_dir=(cache_dir or cache_root()) / "deno",
    )


def _deno_version(deno: Path) -> str:
    try:
        done = subprocess.run(
            [str(deno), "--version"], capture_output=True, text=True, timeout=20, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unusable ({exc})"
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


def pyodide_status(cache_dir: Path | None = None) -> dict[str, str]:
    """What ``ptc doctor`` shows: each piece with its version or what is wrong.

    Keys: ``usable`` (``yes``/``no``), ``deno``, ``pyodide``, ``snapshot``,
    ``cache`` and, when not usable, ``fix``.
    """
    deno = find_deno()
    assets = asset_dir(cache_dir)
    status = {
        "deno": f"{_deno_version(deno)} ({deno})" if deno else "missing",
        "pyodide": f"{PYODIDE_VERSION} ({assets})" if _assets_complete(assets) else "missing",
        "cache": str(cache_dir or cache_root()),
    }
    snapshot = snapshot_path(assets)
    if snapshot.is_file():
        status["snapshot"] = f"{snapshot.name} ({snapshot.stat().st_size // (1024 * 1024)} MiB)"
    else:
        status["snapshot"] = "missing (cold starts are slow)"
    usable = (
        deno is not None and status["deno"].split()[0] != "unusable" and _assets_complete(assets)
    )
    status["usable"] = "yes" if usable else "no"
    if deno is None:
        status["fix"] = f"{_EXTRA_HINT}, then {INSTALL_COMMAND}"
    elif not usable or not snapshot.is_file():
        status["fix"] = INSTALL_COMMAND
    return status
