"""The explicit, idempotent installer of runtime assets (``ptc runtime install pyodide``).

It fetches the pinned ``pyodide`` npm tarball from the npm registry (pure
Python; ``npm pack`` as a fallback), checks it against the pinned sha512
integrity, unpacks only the files a worker needs into
``<cache>/pyodide/<version>/``, derives the patched loaders the worker runs
(:func:`runtime._pyodide._assets.patch_loader`) and builds the (sparse) memory
snapshot there. Nothing is ever downloaded at run time, and nothing from a CDN.

The CLI runs it as ``ptc runtime install pyodide [--force]``; without the CLI,
``python -m runtime._pyodide._install pyodide`` does the same.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from .._exceptions import InstallError, PyodideNotInstalledError
from ._assets import (
    ASSET_FILES,
    LOADER_FILES,
    PYODIDE_INTEGRITY,
    PYODIDE_VERSION,
    asset_dir,
    cache_root,
    find_deno,
    loaders_current,
    patch_loader,
    snapshot_path,
    worker_command,
)

__all__ = ["InstallError", "install_pyodide", "main"]

_DEFAULT_REGISTRY = "https://registry.npmjs.org"
_MAX_TARBALL_BYTES = 64 * 1024 * 1024
_MAX_MEMBER_BYTES = 32 * 1024 * 1024
_MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024
# Where Deno keeps web storage (localStorage, the Cache API) in its directory.
_WEB_STORAGE = "location_data"


def _registry() -> str:
    # npm's own variable, so a configured mirror is honoured by both paths.
    return (os.environ.get("NPM_CONFIG_REGISTRY") or _DEFAULT_REGISTRY).rstrip("/")


def _check_integrity(data: bytes) -> None:
    algorithm, _, expected = PYODIDE_INTEGRITY.partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if actual != expected:
        raise InstallError(
            "verifying the tarball", f"{algorithm} {actual} is not the pinned {expected}"
        )


def _read_limited(response: object, limit: int) -> bytes:
    data: bytes = response.read(limit + 1)  # type: ignore[attr-defined]
    if len(data) > limit:
        raise InstallError("downloading", f"more than {limit} bytes")
    return data


def _fetch_with_urllib() -> bytes:
    url = f"{_registry()}/pyodide/{PYODIDE_VERSION}"
    with urllib.request.urlopen(url, timeout=60) as response:
        meta = json.loads(_read_limited(response, 1024 * 1024))
    dist = meta.get("dist") or {}
    if dist.get("integrity") != PYODIDE_INTEGRITY:
        raise InstallError("reading registry metadata", "its integrity differs from the pinned one")
    tarball = str(dist.get("tarball", ""))
    if not tarball.startswith(f"{_registry()}/"):
        # The tarball comes from the registry itself, never a host it names.
        raise InstallError("reading registry metadata", f"unexpected tarball URL {tarball!r}")
    with urllib.request.urlopen(tarball, timeout=300) as response:
        return _read_limited(response, _MAX_TARBALL_BYTES)


def _fetch_with_npm(workdir: Path) -> bytes:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("downloading", "the registry is unreachable and npm is not installed")
    subprocess.run(
        [npm, "pack", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", str(workdir)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return (workdir / f"pyodide-{PYODIDE_VERSION}.tgz").read_bytes()


def _extract(tarball: Path, target: Path) -> None:
    wanted = {f"package/{name}": name for name in ASSET_FILES}
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive:
            name = wanted.pop(member.name, None)
            if name is None:
                continue
            if not member.isfile() or member.size > _MAX_MEMBER_BYTES:
                raise InstallError("unpacking", f"{member.name} is not a plain file of sane size")
            source = archive.extractfile(member)
            if source is None:
                raise InstallError("unpacking", f"cannot read {member.name}")
            with source, open(target / name, "wb") as out:
                shutil.copyfileobj(source, out)
    if wanted:
        raise InstallError("unpacking", f"missing {sorted(wanted)}")


def _install_assets(assets: Path, say: Callable[[str], None]) -> None:
    assets.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=assets.parent, prefix=".install-") as tmp:
        workdir = Path(tmp)
        try:
            say(f"downloading pyodide {PYODIDE_VERSION} from {_registry()}")
            data = _fetch_with_urllib()
        except (OSError, ValueError) as exc:
            say(f"direct download failed ({exc}); trying npm pack")
            try:
                data = _fetch_with_npm(workdir)
            except (OSError, subprocess.SubprocessError) as npm_exc:
                raise InstallError("downloading", f"{exc}; npm pack: {npm_exc}") from npm_exc
        _check_integrity(data)
        tarball = workdir / "pyodide.tgz"
        tarball.write_bytes(data)
        staging = workdir / "assets"
        staging.mkdir()
        _extract(tarball, staging)
        if assets.exists():
            shutil.rmtree(assets)
        os.replace(staging, assets)


def write_loaders(assets: Path) -> None:
    """Derive the patched loaders ``worker.js`` loads from the package's own."""
    for name, derived in LOADER_FILES.items():
        try:
            patched = patch_loader(name, (assets / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InstallError("patching the Pyodide loaders", str(exc)) from exc
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=assets, prefix=".loader-", delete=False
        ) as out:
            out.write(patched)
        Path(out.name).chmod(0o644)
        os.replace(out.name, assets / derived)


#: Marks a sparse snapshot's memory part (read by ``restoreMemory`` in worker.js).
SPARSE_MAGIC = 0x53435450  # "PTCS"
_PAGE = 64 * 1024


def sparse_snapshot(data: bytes) -> bytes:
    """Pyodide's snapshot with the all-zero 64 KiB pages of its memory left out.

    About half the memory is zero. The worker reads the rest only and skips
    zero pages that were never written when it restores (see worker.js), which
    shortens every cold start. Pyodide's header and JSON part are kept as they
    are; the memory part becomes: magic, memory size, page size, run count,
    then (first page, page count) per run of non-zero pages, then those pages.
    All little-endian u32.
    """
    if len(data) < 8:
        raise InstallError("building the memory snapshot", "the snapshot is truncated")
    (start,) = struct.unpack_from("<I", data, 4)
    memory = memoryview(data)[start:]
    if start % 4 or start > len(data):
        raise InstallError("building the memory snapshot", "unexpected snapshot layout")
    zero = bytes(_PAGE)
    runs: list[list[int]] = []
    for page in range(-(-len(memory) // _PAGE)):
        chunk = memory[page * _PAGE : (page + 1) * _PAGE]
        if chunk == zero[: len(chunk)]:
            continue
        if runs and sum(runs[-1]) == page:
            runs[-1][1] += 1
        else:
            runs.append([page, 1])
    flat = [value for run in runs for value in run]
    header = struct.pack(f"<4I{len(flat)}I", SPARSE_MAGIC, len(memory), _PAGE, len(runs), *flat)
    pages = b"".join(memory[first * _PAGE : (first + count) * _PAGE] for first, count in runs)
    out = data[:start] + header + pages
    return out + bytes(-len(out) % 4)  # Pyodide reads the file as u32 words


def build_snapshot(deno: Path, assets: Path, deno_dir: Path) -> Path:
    """Run the worker in snapshot mode and store its memory snapshot atomically."""
    target = snapshot_path(assets)
    deno_dir.mkdir(parents=True, exist_ok=True)
    command = worker_command(deno, assets, "snapshot")
    env = {"DENO_DIR": str(deno_dir), "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}
    with tempfile.NamedTemporaryFile(dir=assets, prefix=".snapshot-", delete=False) as out:
        partial = Path(out.name)
        try:
            done = subprocess.run(
                command, stdout=out, stderr=subprocess.PIPE, env=env, timeout=600, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            partial.unlink(missing_ok=True)
            raise InstallError("building the memory snapshot", str(exc)) from exc
    size = partial.stat().st_size
    if done.returncode != 0 or not 0 < size <= _MAX_SNAPSHOT_BYTES:
        partial.unlink(missing_ok=True)
        detail = done.stderr.decode(errors="replace")[-2000:]
        raise InstallError("building the memory snapshot", f"exit {done.returncode}: {detail}")
    partial.write_bytes(sparse_snapshot(partial.read_bytes()))
    partial.chmod(0o644)
    os.replace(partial, target)
    for stale in assets.glob("snapshot-*.bin"):
        if stale != target:
            stale.unlink(missing_ok=True)
    return target


def install_pyodide(
    cache_dir: Path | None = None,
    *,
    force: bool = False,
    say: Callable[[str], None] = lambda line: None,
) -> Path:
    """Install the pinned Pyodide assets and snapshot; return the asset directory.

    Idempotent: present, complete assets are kept and a current snapshot is not
    rebuilt. ``force`` downloads and rebuilds everything.

    Raises:
        PyodideNotInstalledError: no Deno executable (install the ``pyodide`` extra).
        InstallError: a download, check, unpack or snapshot step failed.
    """
    deno = find_deno()
    if deno is None:
        raise PyodideNotInstalledError("no Deno executable found")
    assets = asset_dir(cache_dir)
    if force or not all((assets / name).is_file() for name in ASSET_FILES):
        _install_assets(assets, say)
    else:
        say(f"pyodide {PYODIDE_VERSION} assets present in {assets}")
    if force or not loaders_current(assets):
        say("patching the Pyodide loaders for Deno")
        write_loaders(assets)
    deno_dir = (cache_dir or cache_root()) / "deno"
    snapshot = snapshot_path(assets)
    if force or not snapshot.is_file():
        say("building the memory snapshot")
        build_snapshot(deno, assets, deno_dir)
    stale = deno_dir / _WEB_STORAGE
    if stale.exists():
        # What runs of older releases kept in web storage (workers now keep
        # nothing there, each has a Deno directory of its own): removed.
        say(f"removing the web storage older workers left in {stale}")
        shutil.rmtree(stale, ignore_errors=True)
    say(f"pyodide {PYODIDE_VERSION} ready: {assets}")
    return assets


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m runtime._pyodide._install pyodide [--force]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    force = "--force" in args
    names = [arg for arg in args if arg != "--force"]
    if names != ["pyodide"]:
        print("usage: python -m runtime._pyodide._install pyodide [--force]", file=sys.stderr)
        return 2
    try:
        install_pyodide(force=force, say=print)
    except (InstallError, PyodideNotInstalledError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
