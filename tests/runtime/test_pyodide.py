"""The Pyodide runtime's own parts: the installer, asset lookup, the Deno command
line, the warm pool and limits handling. The shared behaviour is in
``test_conformance.py``; the escape attempts in ``test_pyodide_escapes.py``.

Installer tests use a tarball made here and a registry served on loopback.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import io
import json
import os
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import Limits, RuntimeClosedError, RuntimeUnavailableError, ToolAnswer, get_runtime
from runtime._pyodide import _install as install_module
from runtime._pyodide._assets import (
    ASSET_FILES,
    INSTALL_COMMAND,
    LOADER_FILES,
    PYODIDE_VERSION,
    SHARED_MODULES,
    WORKER_DIR,
    PyodideNotInstalledError,
    asset_dir,
    cache_root,
    loader_stamp,
    locate_pyodide,
    patch_loader,
    pyodide_status,
    snapshot_path,
)
from runtime._pyodide._deno import WorkerProfile, deno_command
from runtime.testing import ToolBox

from .conftest import MeetingToolBox
from .pyodide_workers import open_runtime, spy_on_workers, tidied

MiB = 1024 * 1024


# --------------------------------------------------------------------------- helpers


def write_installed(cache: Path) -> Path:
    """Fake package files and current patched loaders, as an install leaves them.

    Returns the assets directory under the cache directory ``cache``.
    """
    target = asset_dir(cache)
    target.mkdir(parents=True)
    for name in ASSET_FILES:
        (target / name).write_bytes(b"present")
    for derived in LOADER_FILES.values():
        (target / derived).write_text(loader_stamp() + "present")
    return target


def make_tarball(extra: dict[str, bytes] | None = None, *, skip: str = "") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        members = {f"package/{name}": f"fake {name}".encode() for name in ASSET_FILES}
        members.pop(f"package/{skip}", None)
        members.update(extra or {})
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


@contextlib.contextmanager
def registry(tarball: bytes, *, metadata_integrity: str | None = None) -> Iterator[str]:
    """A one-package npm registry on 127.0.0.1; yields its base URL."""
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if self.path == f"/pyodide/{PYODIDE_VERSION}":
                body = json.dumps(
                    {
                        "dist": {
                            "integrity": metadata_integrity or integrity(tarball),
                            "tarball": f"{base}/pyodide/-/pyodide-{PYODIDE_VERSION}.tgz",
                        }
                    }
                ).encode()
            elif self.path == f"/pyodide/-/pyodide-{PYODIDE_VERSION}.tgz":
                body = tarball
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Point the installer at a loopback registry serving a fake, pinned tarball."""

    @contextlib.contextmanager
    def serve(tarball: bytes, **options: Any) -> Iterator[str]:
        monkeypatch.setattr(install_module, "PYODIDE_INTEGRITY", integrity(tarball))
        with registry(tarball, **options) as url:
            monkeypatch.setenv("NPM_CONFIG_REGISTRY", url)
            yield url

    yield serve


# --------------------------------------------------------------------------- installer


def test_assets_are_fetched_verified_and_unpacked(tmp_path: Path, fake_registry: Any) -> None:
    tarball = make_tarball({"package/console.html": b"<html>", "package/README.md": b"x"})
    target = asset_dir(tmp_path)
    with fake_registry(tarball):
        install_module._install_assets(target, lambda line: None)
    assert sorted(path.name for path in target.iterdir()) == sorted(ASSET_FILES)
    assert (target / "pyodide.mjs").read_bytes() == b"fake pyodide.mjs"
    assert target == tmp_path / "pyodide" / PYODIDE_VERSION
    assert not list(target.parent.glob(".install-*"))


def test_a_tarball_that_does_not_match_the_pin_is_refused(
    tmp_path: Path, fake_registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = make_tarball()
    with fake_registry(tarball):
        monkeypatch.setattr(install_module, "PYODIDE_INTEGRITY", integrity(b"other"))
        with pytest.raises(install_module.InstallError, match="integrity"):
            install_module._install_assets(asset_dir(tmp_path), lambda line: None)
    assert not asset_dir(tmp_path).exists()


def test_a_tampered_tarball_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tarball = make_tarball()
    monkeypatch.setattr(install_module, "PYODIDE_INTEGRITY", integrity(tarball))
    # Metadata and pin agree; the bytes served do not.
    with registry(tarball + b"tampered", metadata_integrity=integrity(tarball)) as url:
        monkeypatch.setenv("NPM_CONFIG_REGISTRY", url)
        with pytest.raises(install_module.InstallError, match="verifying"):
            install_module._install_assets(asset_dir(tmp_path), lambda line: None)
    assert not asset_dir(tmp_path).exists()


@pytest.mark.parametrize(
    "member",
    [
        pytest.param("package/../../escaped.txt", id="path-traversal"),
        pytest.param("/etc/absolute.txt", id="absolute"),
    ],
)
def test_only_the_listed_plain_files_are_unpacked(
    tmp_path: Path, fake_registry: Any, member: str
) -> None:
    tarball = make_tarball({member: b"evil"})
    with fake_registry(tarball):
        install_module._install_assets(asset_dir(tmp_path / "cache"), lambda line: None)
    assert not (tmp_path / "escaped.txt").exists()
    assert sorted(p.name for p in asset_dir(tmp_path / "cache").iterdir()) == sorted(ASSET_FILES)


def test_a_symlink_in_place_of_an_asset_is_refused(tmp_path: Path, fake_registry: Any) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in ASSET_FILES:
            info = tarfile.TarInfo(f"package/{name}")
            if name == "pyodide.mjs":
                info.type = tarfile.SYMTYPE
                info.linkname = "/etc/passwd"
                archive.addfile(info)
            else:
                info.size = 1
                archive.addfile(info, io.BytesIO(b"x"))
    with (
        fake_registry(buffer.getvalue()),
        pytest.raises(install_module.InstallError, match="plain"),
    ):
        install_module._install_assets(asset_dir(tmp_path), lambda line: None)


def test_a_tarball_missing_an_asset_is_refused(tmp_path: Path, fake_registry: Any) -> None:
    with (
        fake_registry(make_tarball(skip="python_stdlib.zip")),
        pytest.raises(install_module.InstallError, match=r"python_stdlib\.zip"),
    ):
        install_module._install_assets(asset_dir(tmp_path), lambda line: None)


def test_a_tarball_url_off_the_registry_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = make_tarball()
    with registry(tarball) as url:
        monkeypatch.setattr(install_module, "PYODIDE_INTEGRITY", integrity(tarball))
        monkeypatch.setenv("NPM_CONFIG_REGISTRY", url.replace("127.0.0.1", "localhost"))
        with pytest.raises(install_module.InstallError, match="tarball URL"):
            install_module._fetch_with_urllib()


@pytest.fixture
def stub_deno(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Deno executable that must never run: the install steps that would run it are faked.

    These installer tests then pass on a machine without Deno too.
    """
    stub = tmp_path / "bin" / "deno"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\necho 'the stub Deno was run' >&2\nexit 99\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PTC_DENO", str(stub))
    return stub


@pytest.mark.usefixtures("stub_deno")
def test_install_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = write_installed(tmp_path)
    snapshot_path(target).write_bytes(b"snapshot")

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an installed runtime must not be downloaded again")

    monkeypatch.setattr(install_module, "_install_assets", no_network)
    monkeypatch.setattr(install_module, "build_snapshot", no_network)
    lines: list[str] = []
    assert install_module.install_pyodide(tmp_path, say=lines.append) == target
    assert any("present" in line for line in lines)


@pytest.mark.usefixtures("stub_deno")
def test_install_builds_a_missing_snapshot_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = write_installed(tmp_path)
    built: list[Path] = []
    monkeypatch.setattr(
        install_module, "build_snapshot", lambda deno, assets, deno_dir: built.append(assets)
    )
    install_module.install_pyodide(tmp_path)
    assert built == [target]


@pytest.mark.usefixtures("stub_deno")
def test_install_removes_the_web_storage_older_workers_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_installed(tmp_path)
    left = tmp_path / "deno" / "location_data" / "0123abcd"
    left.mkdir(parents=True)
    (left / "local_storage").write_bytes(b"a value of an earlier run")
    monkeypatch.setattr(install_module, "build_snapshot", lambda deno, assets, deno_dir: None)
    install_module.install_pyodide(tmp_path)
    assert not (tmp_path / "deno" / "location_data").exists()


@pytest.mark.usefixtures("stub_deno")
def test_install_patches_stale_loaders_without_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = write_installed(tmp_path)
    (target / "pyodide.asm.deno.mjs").write_text("// an older patch\n")
    patched: list[Path] = []
    monkeypatch.setattr(install_module, "write_loaders", patched.append)
    monkeypatch.setattr(install_module, "build_snapshot", lambda deno, assets, deno_dir: None)
    install_module.install_pyodide(tmp_path)
    assert patched == [target]


def test_a_loader_patch_that_does_not_apply_fails_the_install(tmp_path: Path) -> None:
    for name in LOADER_FILES:
        (tmp_path / name).write_text("not the pinned release")
    with pytest.raises(install_module.InstallError, match="patching the Pyodide loaders"):
        install_module.write_loaders(tmp_path)


def test_loader_patches_apply_to_the_pinned_release() -> None:
    try:
        assets = locate_pyodide().assets
    except PyodideNotInstalledError:
        if os.environ.get("CI"):  # CI installs it: missing there is a failure
            raise
        pytest.skip("the Pyodide runtime is not installed")
    for name, derived in LOADER_FILES.items():
        patched = patch_loader(name, (assets / name).read_text(encoding="utf-8"))
        assert patched == (assets / derived).read_text(encoding="utf-8")
        assert patched.startswith(loader_stamp())
    # Neither loader takes Deno for Node any more.
    assert "var ENVIRONMENT_IS_NODE=false;" in (assets / "pyodide.asm.deno.mjs").read_text()
    assert "n=!1," in (assets / "pyodide.deno.mjs").read_text()


def test_sparse_snapshot_keeps_the_header_and_the_non_zero_pages() -> None:
    import struct

    page = 64 * 1024
    start = 48
    header = struct.pack("<4I", 0x12345678, start, 7, 0) + b"h" * (start - 16)
    memory = bytearray(6 * page)
    memory[page + 5] = 1  # pages 1-2 form one run, page 4 another
    memory[3 * page - 1] = 2
    memory[4 * page] = 3
    sparse = install_module.sparse_snapshot(header + bytes(memory))
    assert sparse[:start] == header and len(sparse) % 4 == 0
    magic, size, unit, count = struct.unpack_from("<4I", sparse, start)
    assert (magic, size, unit, count) == (install_module.SPARSE_MAGIC, len(memory), page, 2)
    runs = struct.unpack_from("<4I", sparse, start + 16)
    assert runs == (1, 2, 4, 1)
    # What worker.js does: the runs' pages in order, zeros elsewhere.
    restored = bytearray(len(memory))
    at = start + 16 + 8 * count
    for first, pages in zip(runs[::2], runs[1::2], strict=True):
        restored[first * page : (first + pages) * page] = sparse[at : at + pages * page]
        at += pages * page
    assert restored == memory


def test_main_reports_usage_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert install_module.main(["numpy"]) == 2
    monkeypatch.setenv("PTC_DENO", str(tmp_path / "no-deno"))
    assert install_module.main(["pyodide"]) == 1
    assert "pip install 'ptc-runner[pyodide]'" in capsys.readouterr().err


# --------------------------------------------------------------------------- lookup


def test_cache_root_honours_ptc_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path.resolve()
    assert asset_dir() == tmp_path.resolve() / "pyodide" / PYODIDE_VERSION


def test_missing_assets_name_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(PyodideNotInstalledError) as caught:
        locate_pyodide(tmp_path)
    assert isinstance(caught.value, RuntimeUnavailableError)
    assert INSTALL_COMMAND in str(caught.value)
    from runtime._pyodide._runtime import PyodideRuntime

    with pytest.raises(RuntimeUnavailableError, match="ptc runtime install pyodide"):
        PyodideRuntime(cache_dir=tmp_path)


def test_missing_deno_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTC_DENO", str(tmp_path / "missing"))
    with pytest.raises(PyodideNotInstalledError, match=r"ptc-runner\[pyodide\]"):
        locate_pyodide(tmp_path)


def test_status_of_an_empty_cache(tmp_path: Path) -> None:
    status = pyodide_status(tmp_path)
    assert status["usable"] == "no"
    assert status["pyodide"] == "missing"
    assert INSTALL_COMMAND in status["fix"]


def test_status_says_storage_is_off_and_the_realm_locked_down(tmp_path: Path) -> None:
    status = pyodide_status(tmp_path)
    assert status["storage"].startswith("off")
    assert status["realm"].startswith("locked down")


def test_snapshot_name_follows_the_worker_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime._pyodide import _assets as _pyodide_assets
    from runtime._pyodide._assets import WORKER_DIR

    copy = tmp_path / "pyodide"
    copy.mkdir()
    for name in ("worker.js", "bootstrap.py"):
        (copy / name).write_bytes((WORKER_DIR / name).read_bytes())
    shared = []
    for module in _pyodide_assets.SHARED_MODULES:  # _program.py and _wire.py
        shared.append(tmp_path / module.name)
        shared[-1].write_bytes(module.read_bytes())
    monkeypatch.setattr(_pyodide_assets, "WORKER_DIR", copy)
    monkeypatch.setattr(_pyodide_assets, "SHARED_MODULES", tuple(shared))
    before = snapshot_path(tmp_path)
    assert before.name.startswith("snapshot-") and before.suffix == ".bin"
    (copy / "bootstrap.py").write_text("# changed\n")
    seen = [before, snapshot_path(tmp_path)]
    assert seen[1] != before
    for module in shared:
        module.write_text("# changed\n")
        assert snapshot_path(tmp_path) not in seen
        seen.append(snapshot_path(tmp_path))


# --------------------------------------------------------------------------- command line


def test_the_deno_command_grants_nothing_but_reading_the_assets(tmp_path: Path) -> None:
    from runtime._pyodide._assets import SHARED_MODULES, WORKER_DIR, PyodideInstall

    install = PyodideInstall(
        deno=Path("/opt/deno"),
        assets=tmp_path / "assets",
        snapshot=tmp_path / "assets" / "snapshot-x.bin",
        deno_dir=tmp_path / "deno",
    )
    command = deno_command(install, WorkerProfile.for_limits(512 * MiB, 8 * MiB))
    assert command[:2] == ["/opt/deno", "run"]
    assert "--no-prompt" in command
    grants = [arg for arg in command if arg.startswith("--allow")]
    program, wire = SHARED_MODULES
    assert program.name == "_program.py" and wire.name == "_wire.py"
    assert grants == [f"--allow-read={tmp_path / 'assets'},{WORKER_DIR},{program},{wire}"]
    assert not any(arg.startswith(("-A", "--unstable")) for arg in command)
    v8 = next(arg for arg in command if arg.startswith("--v8-flags="))
    assert "--disallow-code-generation-from-strings" in v8
    assert "--wasm-max-mem-pages=8192" in v8
    assert command[-1].endswith("snapshot-x.bin")


def test_the_snapshot_build_runs_under_the_same_permissions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The installer's Deno (it runs worker.js to take the snapshot) and every worker
    # get their command line from one function: the sandbox boundary cannot drift.
    from runtime._pyodide._assets import PyodideInstall

    seen: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> Any:
        seen.append(command)
        raise OSError("not run in this test")

    monkeypatch.setattr(install_module.subprocess, "run", run)
    with pytest.raises(install_module.InstallError):
        install_module.build_snapshot(Path("/opt/deno"), tmp_path, tmp_path / "deno")
    install = PyodideInstall(
        deno=Path("/opt/deno"), assets=tmp_path, snapshot=None, deno_dir=tmp_path / "deno"
    )
    worker = deno_command(install, WorkerProfile.for_limits(512 * MiB, 8 * MiB))

    def flags(command: list[str]) -> list[str]:
        return [arg for arg in command if arg.startswith("-") and not arg.startswith("--v8")]

    (snapshot,) = seen
    assert flags(snapshot) == flags(worker)
    assert "--no-prompt" in flags(snapshot)
    assert [arg for arg in flags(snapshot) if arg.startswith("--allow")] == [
        f"--allow-read={tmp_path},{WORKER_DIR},{','.join(map(str, SHARED_MODULES))}"
    ]
    assert snapshot[snapshot.index(str(WORKER_DIR / "worker.js")) + 1] == "snapshot"


def test_each_worker_gets_a_home_of_its_own(tmp_path: Path) -> None:
    import shutil

    from runtime._pyodide._assets import PyodideInstall
    from runtime._pyodide._deno import HOME_PREFIX, _environment, make_home

    shared = tmp_path / "deno"
    shared.mkdir()
    (shared / "v8_code_cache_v2").write_bytes(b"compiled code")
    (shared / "dep_analysis_cache_v2").write_bytes(b"module graph")
    (shared / "location_data").mkdir()  # what an older worker left: not seen
    install = PyodideInstall(
        deno=Path("/opt/deno"), assets=tmp_path / "assets", snapshot=None, deno_dir=shared
    )
    one, two = make_home(install), make_home(install)
    try:
        assert one != two and one.name.startswith(HOME_PREFIX)
        # Only the caches Deno derives from the worker's own modules are shared.
        assert sorted(path.name for path in (one / "deno").iterdir()) == [
            "dep_analysis_cache_v2",
            "v8_code_cache_v2",
        ]
        assert (one / "deno" / "v8_code_cache_v2").read_bytes() == b"compiled code"
        assert (one / "deno" / "dep_analysis_cache_v2").read_bytes() == b"module graph"
        environment = _environment(one)
        assert environment["DENO_DIR"] == str(one / "deno")
        assert environment["DENO_CACHE_DB_MODE"] == environment["DENO_KV_DB_MODE"] == "memory"
        assert environment["TZ"] == "UTC"
        assert not any(str(tmp_path / "assets") in value for value in environment.values())
    finally:
        shutil.rmtree(one)
        shutil.rmtree(two)


@pytest.mark.parametrize(
    ("memory", "wasm"),
    [(1, 128 * MiB), (256 * MiB, 256 * MiB), (64 * 1024 * MiB, 4096 * MiB)],
)
def test_worker_profile_bounds_the_wasm_memory(memory: int, wasm: int) -> None:
    profile = WorkerProfile.for_limits(memory, 64 * MiB)
    assert profile.wasm_bytes == wasm
    assert profile.heap_mib == 256 + 4 * 64


def test_get_runtime_builds_the_pyodide_backend() -> None:
    try:
        runtime = get_runtime("pyodide", spares=0)
    except RuntimeUnavailableError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    assert runtime.name == "pyodide"
    with pytest.raises(ValueError, match="spares"):
        get_runtime("pyodide", spares=-1)


# --------------------------------------------------------------------------- how a run ended


class EndedWorker:
    """A Deno worker that has ended (as far as ``_explain_end`` looks at one)."""

    def __init__(
        self, status: int | None, *, stderr: str = "", max_rss: int = 0, watchdog: bool = False
    ) -> None:
        from runtime._host._pool import ExitStatus

        self.exit = None if status is None else ExitStatus(status, 0.5, max_rss)
        self.stderr = stderr
        self.memory_exceeded = watchdog
        self.finished = False
        self.home = Path("/tmp/ptc-deno-abc123")

    async def wait_status(self, timeout: float) -> Any:  # noqa: ASYNC109
        return self.exit

    def stderr_text(self) -> str:
        return self.stderr


SIGNALED = {"SIGTRAP": 5, "SIGKILL": 9, "SIGABRT": 6}
FORGED = "# Fatal JavaScript out of memory: Reached heap limit\nthe host says: memory\n"


def exited(code: int) -> int:
    return code << 8


async def explain(
    worker: EndedWorker, kind: str, message: str = "the worker exited", **limits: Any
) -> Any:
    from runtime import RunOutcome
    from runtime._pyodide._assets import PyodideInstall
    from runtime._pyodide._runtime import _explain_end

    install = PyodideInstall(
        deno=Path("/opt/deno/bin/deno"),
        assets=Path("/home/user/.cache/ptc-runner/pyodide/314.0.7"),
        snapshot=None,
        deno_dir=Path("/home/user/.cache/ptc-runner/deno"),
    )
    outcome = RunOutcome.failure(kind, message, logs=["printed"])  # type: ignore[arg-type]
    return await _explain_end(worker, outcome, Limits(**limits), install)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_v8s_out_of_memory_crash_is_memory_whatever_stderr_says() -> None:
    outcome = await explain(EndedWorker(SIGNALED["SIGTRAP"]), "crashed")
    assert outcome.kind == "memory"
    assert outcome.logs == ["printed"]


@pytest.mark.anyio
@pytest.mark.parametrize("code", [0, 1, 3, 70])
async def test_stderr_and_exit_codes_never_make_memory(code: int) -> None:
    # An exit code the session read as a limit (3 meant memory for the
    # CPython worker) means nothing from Deno: the host says how it ended.
    kind = "memory" if code == 3 else "crashed"
    outcome = await explain(EndedWorker(exited(code), stderr=FORGED), kind, "as the session said")
    assert outcome.kind == "crashed"
    assert "the host says" not in outcome.message
    assert outcome.message.startswith(
        f"the Pyodide worker exited with code {code}" if code == 3 else "as the session said"
    )
    assert outcome.logs == [
        "printed",
        "[stderr] # Fatal JavaScript out of memory: Reached heap limit",
        "[stderr] the host says: memory",
    ]


@pytest.mark.anyio
async def test_the_hosts_memory_evidence_decides() -> None:
    watched = await explain(EndedWorker(SIGNALED["SIGKILL"], watchdog=True), "timeout")
    assert watched.kind == "memory"  # the watchdog's kill, whatever the CPU clock said
    peak = await explain(
        EndedWorker(SIGNALED["SIGKILL"], max_rss=2048 * MiB), "crashed", memory_bytes=256 * MiB
    )
    assert peak.kind == "memory"  # over the limit at its peak, the kernel says
    timed_out = await explain(EndedWorker(None), "timeout", "the host's clock")
    assert (timed_out.kind, timed_out.message) == ("timeout", "the host's clock")
    aborted = await explain(EndedWorker(SIGNALED["SIGABRT"]), "crashed")
    assert aborted.kind == "crashed"


@pytest.mark.anyio
async def test_the_stderr_shown_names_no_host_path_and_fits_the_output_limit() -> None:
    stderr = (
        "error: Uncaught\n"
        "    at f (file:///home/user/.cache/ptc-runner/pyodide/314.0.7/pyodide.asm.deno.mjs:2:5)\n"
        "/opt/deno/bin/deno(+0x28ad64e) [0x55d70287864e]\n"
    )
    outcome = await explain(EndedWorker(exited(1), stderr=stderr), "crashed")
    assert outcome.logs[1:] == [
        "[stderr] error: Uncaught",
        "[stderr]     at f (file://<pyodide>/pyodide.asm.deno.mjs:2:5)",
        "[stderr] <deno>(+0x28ad64e) [0x55d70287864e]",
    ]
    flood = await explain(
        EndedWorker(exited(1), stderr="\n".join(f"line {n}" for n in range(10_000))),
        "crashed",
        max_output_bytes=100,
    )
    assert sum(len(line.encode()) + 1 for line in flood.logs) <= 100
    assert flood.logs[-1] == "[stderr] line 9999"  # the tail


# --------------------------------------------------------------------------- live runs


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a killed, not yet collected process does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in (b"Z", b"X")


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_a_spare_serves_one_run_and_is_replaced() -> None:
    async with open_runtime(spares=1) as runtime:
        await runtime.start()
        (spare,) = runtime._spares
        served = spy_on_workers(runtime)
        outcome = await runtime.run("return 1", tool_names=[], call_tool=ToolBox())
        assert outcome.ok, outcome.message
        assert served == [spare]
        with anyio.fail_after(10):  # killed at once; tearing it down takes a moment
            while pid_alive(spare.pid):  # noqa: ASYNC110 - polling another process
                await anyio.sleep(0.01)
        await tidied(runtime)  # the replacement is started in a thread as the run ends
        (replacement,) = runtime._spares
        assert replacement.pid != spare.pid
    assert not runtime._spares
    assert not pid_exists(replacement.pid)
    assert not pid_exists(spare.pid)  # collected by aclose()


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_no_worker_home_outlives_the_runtime() -> None:
    # Each worker's home (its working directory and DENO_DIR) is its own.
    async with open_runtime(spares=1) as runtime:
        await runtime.start()
        served = spy_on_workers(runtime)
        outcome = await runtime.run("return 1", tool_names=[], call_tool=ToolBox())
        assert outcome.ok, outcome.message
        await tidied(runtime)
        workers = [*served, *runtime._spares]
        assert len({worker.home for worker in workers}) == 2
    assert not any(worker.home.exists() for worker in workers)


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_other_memory_limits_start_a_matching_worker() -> None:
    async with open_runtime(spares=1) as runtime:
        await runtime.start()
        (spare,) = runtime._spares
        served = spy_on_workers(runtime)
        outcome = await runtime.run(
            "return 1",
            tool_names=[],
            call_tool=ToolBox(),
            limits=Limits(memory_bytes=300 * MiB),
        )
        assert outcome.ok, outcome.message
        assert len(served) == 1 and served[0] is not spare
        assert list(runtime._spares) == [spare]  # kept for runs with the default limits


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_no_spares_after_aclose() -> None:
    async with open_runtime(spares=2) as runtime:
        await runtime.start()
        pids = [worker.pid for worker in runtime._spares]
        assert len(pids) == 2
    assert not any(pid_exists(pid) for pid in pids)
    # Closed means what it means for every backend: no more runs (and no spares).
    with pytest.raises(RuntimeClosedError):
        await runtime.run("return 1", tool_names=[], call_tool=ToolBox())
    assert not runtime._spares


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_the_memory_watchdog_kills_an_oversized_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runtime._pyodide import _runtime as _pyodide

    monkeypatch.setattr(_pyodide, "_BASE_RSS", 0)
    async with open_runtime(spares=0) as runtime:
        outcome = await runtime.run(
            "import asyncio\nprint('up')\nawait asyncio.sleep(30)",
            tool_names=[],
            call_tool=ToolBox(),
            limits=Limits(memory_bytes=16 * MiB, timeout=60),
        )
    assert outcome.kind == "memory", outcome


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_program_semantics_match_the_cpython_worker() -> None:
    async with open_runtime(spares=0) as runtime:
        outcome = await runtime.run(
            "import sys\n"
            "print('partial', end='')\n"
            "value = await tools.echo(x=1)\n"
            "print(' line')\n"
            "print('to stderr', file=sys.stderr)\n"
            "assert sys.version_info >= (3, 12)\n"
            "return [value, type(tools).__name__, sorted(dir(tools))]",
            tool_names=["echo", "my-tool"],
            call_tool=ToolBox(),
        )
    assert outcome.ok, outcome.message
    assert outcome.logs == ["partial line", "to stderr"]
    assert outcome.result == [{"x": 1}, "Tools", ["echo"]]


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_a_tool_answer_that_is_not_json_fails_that_call_only() -> None:
    async def odd(name: str, args: Any) -> ToolAnswer:
        return ToolAnswer.success({1, 2}) if name == "echo" else ToolAnswer.success("ok")

    async with open_runtime(spares=0) as runtime:
        outcome = await runtime.run(
            "try:\n"
            "    await tools.echo({})\n"
            "except ToolCallError as exc:\n"
            "    first = exc.message\n"
            "return [first, await tools.other({})]",
            tool_names=["echo", "other"],
            call_tool=odd,
        )
    assert outcome.ok, outcome.message
    assert "not JSON" in outcome.result[0]
    assert outcome.result[1] == "ok"


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_a_worker_that_dies_while_starting_ends_the_run_as_crashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_runtime(spares=0) as real:
        install = real.install
    fake = tmp_path / "deno"
    fake.write_text("#!/bin/sh\necho 'cannot load pyodide' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PTC_DENO", str(fake))
    from runtime._pyodide._runtime import PyodideRuntime

    async with PyodideRuntime(spares=0, cache_dir=install.assets.parent.parent) as runtime:
        outcome = await runtime.run("return 1", tool_names=[], call_tool=ToolBox())
    assert outcome.kind == "crashed", outcome
    # Deno's stderr is shown as captured output, marked, never as the host's words.
    assert "cannot load pyodide" not in outcome.message
    assert "[stderr] cannot load pyodide" in outcome.logs


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_an_unstartable_deno_is_an_infrastructure_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import WorkerStartError
    from runtime._pyodide._runtime import PyodideRuntime

    async with open_runtime(spares=0) as real:
        install = real.install
    fake = tmp_path / "deno"
    fake.write_text("not a program")
    fake.chmod(0o644)
    monkeypatch.setenv("PTC_DENO", str(fake))
    async with PyodideRuntime(spares=0, cache_dir=install.assets.parent.parent) as runtime:
        with pytest.raises(WorkerStartError, match="cannot start Deno"):
            await runtime.run("return 1", tool_names=[], call_tool=ToolBox())


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_unencodable_arguments_fail_that_call_only() -> None:
    async with open_runtime(spares=0) as runtime:
        outcome = await runtime.run(
            "try:\n"
            "    await tools.echo({'text': 'a\\ud800'})\n"
            "except TypeError as exc:\n"
            "    first = str(exc)\n"
            "return [first, await tools.echo({'n': 1})]",
            tool_names=["echo"],
            call_tool=ToolBox(),
        )
    assert outcome.ok, outcome.message
    assert "not JSON" in outcome.result[0]
    assert outcome.result[1] == {"n": 1}
    assert outcome.tool_calls == 1


def _answers_once(answered: anyio.Event) -> Any:
    """A ``call_tool`` that answers only once ``answered`` is set (10 s at most)."""

    async def slow(name: str, args: Any) -> ToolAnswer:
        with anyio.move_on_after(10):
            await answered.wait()
        return ToolAnswer.success("late")

    return slow


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_timers_fire_while_a_tool_call_is_unanswered() -> None:
    # worker.js blocks on its read only while nothing else is due; the
    # program's timers (asyncio.wait_for, sleep) must still fire meanwhile.
    answered = anyio.Event()
    slow = _answers_once(answered)

    async with open_runtime(spares=0) as runtime:
        outcome = await runtime.run(
            "import asyncio\n"
            "call = asyncio.ensure_future(tools.slow({}))\n"
            "try:\n"
            "    await asyncio.wait_for(asyncio.shield(call), timeout=0.2)\n"
            "except TimeoutError:\n"
            "    timed_out = True\n"
            "await asyncio.sleep(0.05)\n"
            "print('timers ran')\n"
            "return timed_out",
            tool_names=["slow"],
            call_tool=slow,
            limits=Limits(timeout=5),  # the tool answers after 10 s at the earliest
        )
        answered.set()
    assert outcome.ok, outcome.message
    assert outcome.result is True
    assert outcome.logs == ["timers ran"]


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_concurrent_calls_with_newlines_in_their_arguments_keep_their_frames() -> None:
    # A burst of calls leaves the worker as one write (newline-joined JSON texts).
    async with open_runtime(spares=0) as runtime:
        outcome = await runtime.run(
            "import asyncio\n"
            "values = [{'text': f'line {i}\\nnext\\r\\n\\u2028', 'i': i} for i in range(20)]\n"
            "return await asyncio.gather(*[tools.echo(value) for value in values])",
            tool_names=["echo"],
            call_tool=ToolBox(),
        )
    assert outcome.ok, outcome.message
    assert outcome.result == [{"text": f"line {i}\nnext\r\n\u2028", "i": i} for i in range(20)]
    assert outcome.tool_calls == 20


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_a_settled_js_promise_resolves_while_a_tool_call_is_unanswered() -> None:
    answered = anyio.Event()
    slow = _answers_once(answered)

    async with open_runtime(spares=0) as runtime:
        outcome = await runtime.run(
            "import asyncio, js\n"
            "call = asyncio.ensure_future(tools.slow({}))\n"
            "await asyncio.sleep(0)\n"
            "return await js.Promise.resolve(5)",
            tool_names=["slow"],
            call_tool=slow,
            limits=Limits(timeout=5),  # the tool answers after 10 s at the earliest
        )
        answered.set()
    assert outcome.ok, outcome.message
    assert outcome.result == 5


@pytest.mark.anyio
@pytest.mark.pyodide
async def test_a_runs_call_runners_end_with_it() -> None:
    # As with the subprocess runtime: the run's own tasks answer its calls
    # (parked between them) and none of them outlives the run.
    code = (
        "import asyncio\n"
        "return len(await asyncio.gather(*[tools.sleep({'seconds': 0.02}) for _ in range(12)]))"
    )
    tools = MeetingToolBox(12)
    async with open_runtime(spares=1) as runtime:
        outcome = await runtime.run(code, tool_names=["sleep"], call_tool=tools)
        assert outcome.result == 12, outcome
        assert tools.max_in_flight == 12
        assert not [task for task in anyio.get_running_tasks() if task.name == "ptc-call"]
    with pytest.raises(RuntimeClosedError):  # closed with the block
        await runtime.run(code, tool_names=["sleep"], call_tool=tools)
