"""A zygote spawned ahead (``runtime._host._launch``): adopted by one runtime, or discarded."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from runtime import SubprocessRuntime, WorkerStartError
from runtime._host._launch import SpawnedZygote, spawn_zygote, zygote_settings
from runtime.testing import ToolBox

pytestmark = pytest.mark.anyio


def _gone(zygote: SpawnedZygote) -> bool:
    """Reaped, and its directory removed."""
    return zygote.process.poll() is not None and not os.path.exists(zygote.tmp)


async def test_a_runtime_runs_on_the_zygote_it_adopts() -> None:
    zygote = spawn_zygote(zygote_settings())
    backend = SubprocessRuntime(zygote=zygote)
    try:
        assert zygote.taken
        # Its spares are asked for at once, before the zygote has even booted.
        assert len(backend._pool._spare_requests) == 2
        outcome = await backend.run("return 6 * 7", tool_names=[], call_tool=ToolBox())
        assert outcome.ok and outcome.result == 42
        assert backend._pool.zygote_pid == zygote.process.pid  # no second zygote
    finally:
        await backend.aclose()
    assert _gone(zygote)
    zygote.discard()  # the runtime's now: nothing happens


def _usable_directory(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


async def test_the_zygote_directory_is_in_memory_unless_tmpdir_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every run's work directory is made and removed in it: on /dev/shm, not a disk."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    for name in ("TMPDIR", "TMP"):
        monkeypatch.setattr(tempfile, "tempdir", None)  # (tempfile caches its choice)
        monkeypatch.setenv(name, str(tmp_path))
        chosen = spawn_zygote(zygote_settings())
        chosen.discard()
        assert Path(chosen.tmp).parent == tmp_path, name
        monkeypatch.delenv(name)
    monkeypatch.setattr(tempfile, "tempdir", None)
    memory = _usable_directory("/dev/shm")
    zygote = spawn_zygote(zygote_settings())
    backend = SubprocessRuntime(zygote=zygote, spares=0)
    try:
        expected = "/dev/shm" if memory else tempfile.gettempdir()
        assert os.path.dirname(zygote.tmp) == expected
        outcome = await backend.run("return 6 * 7", tool_names=[], call_tool=ToolBox())
        assert outcome.ok and outcome.result == 42, outcome
        assert outcome.isolation.missing == ()
    finally:
        await backend.aclose()
    assert _gone(zygote)


def test_a_zygote_whose_host_went_away_as_it_booted_removes_its_directory() -> None:
    zygote = spawn_zygote(zygote_settings())
    zygote.ctl.close()  # all a zygote sees of its host's end
    assert zygote.process.wait(timeout=60) == 0  # its "ready" had nobody to go to
    assert not os.path.exists(zygote.tmp)
    zygote.discard()


def test_a_zygote_whose_host_died_removes_its_directory(tmp_path: Path) -> None:
    # A host killed, or one that never closes its runtime, cannot clean up: the
    # zygote sees its control socket end, ends its workers and removes it all.
    host = textwrap.dedent(
        """
        import os, anyio
        from runtime import SubprocessRuntime
        from runtime.testing import ToolBox

        async def main():
            runtime = SubprocessRuntime()
            outcome = await runtime.run("return 1", tool_names=[], call_tool=ToolBox())
            assert outcome.result == 1, outcome
            print(runtime._pool._zygote.tmp, flush=True)
            os._exit(0)  # without closing the runtime

        anyio.run(main)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", host], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    tmp = Path(done.stdout.strip())
    assert tmp.parent == tmp_path
    deadline = time.monotonic() + 30
    while tmp.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not tmp.exists()
    assert list(tmp_path.iterdir()) == []


async def test_a_worker_runs_with_the_cyclic_gc_on() -> None:
    # The zygote boots with the GC off (ZYGOTE_BOOT); it turns it on before it forks.
    async with SubprocessRuntime(allowed_modules=["gc"]) as backend:
        code = "import gc\nreturn gc.isenabled()"
        outcome = await backend.run(code, tool_names=[], call_tool=ToolBox())
    assert outcome.ok and outcome.result is True


async def test_a_runtime_closed_before_any_run_ends_the_zygote_it_adopted() -> None:
    zygote = spawn_zygote(zygote_settings())
    backend = SubprocessRuntime(zygote=zygote, spares=0)
    await backend.aclose()
    assert _gone(zygote)


async def test_a_zygote_of_other_settings_is_refused_and_stays_the_callers() -> None:
    zygote = spawn_zygote(zygote_settings(allowed_modules=["json"]))
    try:
        with pytest.raises(ValueError, match="other settings"):
            SubprocessRuntime(zygote=zygote)  # the default allow-list
        with pytest.raises(ValueError, match="other settings"):
            SubprocessRuntime(zygote=zygote, allowed_modules=["json"], restricted=True)
        assert not zygote.taken and zygote.process.poll() is None
    finally:
        zygote.discard()
    assert _gone(zygote)


async def test_a_zygote_is_adopted_once() -> None:
    zygote = spawn_zygote(zygote_settings())
    first = SubprocessRuntime(zygote=zygote, spares=0)
    try:
        with pytest.raises(ValueError, match="adopted by another runtime"):
            SubprocessRuntime(zygote=zygote, spares=0)
    finally:
        await first.aclose()
    assert _gone(zygote)


def test_discard_ends_a_zygote_no_runtime_took_and_may_be_repeated() -> None:
    zygote = spawn_zygote(zygote_settings())
    zygote.discard()
    assert _gone(zygote)
    zygote.discard()
    with pytest.raises(ValueError, match="discarded"):
        SubprocessRuntime(zygote=zygote)


async def test_an_adopted_zygote_that_cannot_start_fails_the_run_and_the_next_one_retries(
    tmp_path: Path,
) -> None:
    # An interpreter that exits at once: the zygote never says it is ready.
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    python = str(script)
    zygote = spawn_zygote(zygote_settings(python=python))
    backend = SubprocessRuntime(zygote=zygote, python=python)
    try:
        with pytest.raises(WorkerStartError, match="exited before it was ready"):
            await backend.start()
        assert _gone(zygote)
        with pytest.raises(WorkerStartError):  # a zygote of its own, which fails the same way
            await backend.run("return 1", tool_names=[], call_tool=ToolBox())
    finally:
        await backend.aclose()


async def test_closing_the_runtime_while_its_run_waits_for_the_zygote_ends_both(
    tmp_path: Path,
) -> None:
    # A zygote that never greets: it blocks on its control socket until the host closes it.
    fake = tmp_path / "zygote.py"
    fake.write_text(
        "import json, socket, sys\nsocket.socket(fileno=json.loads(sys.argv[1])['fd']).recv(1)\n"
    )
    script = tmp_path / "python"  # called as: -I -S -X utf8 -c BOOT PACKAGE OPTIONS
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {fake} "$8"\n')
    script.chmod(0o755)
    zygote = spawn_zygote(zygote_settings(python=str(script)))
    backend = SubprocessRuntime(zygote=zygote, python=str(script), spares=0)
    failures: list[BaseException] = []

    async def run() -> None:
        try:
            await backend.run("return 1", tool_names=[], call_tool=ToolBox())
        except WorkerStartError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        assert backend._pool._start_lock.locked()  # the run waits for the greeting
        with anyio.fail_after(2):  # well within the zygote's stop timeout: closing ended it
            await backend.aclose()
    assert [str(exc) for exc in failures] == ["the runtime is closed"]
    assert _gone(zygote)
