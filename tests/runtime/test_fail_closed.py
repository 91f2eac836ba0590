"""The CPython worker fails closed: no run without an OS layer, unless best-effort is chosen.

A missing layer is made real, not faked: the zygote runs under an interpreter
wrapper (``deny_syscalls.py``) whose seccomp filter makes the kernel refuse the
layer's system calls, as on a host without them; the sandbox tries them and
reports what the kernel said.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import Isolation, Limits, SubprocessRuntime, ToolAnswer, get_runtime

from .conftest import children_of
from .deny_syscalls import python_wrapper

pytestmark = pytest.mark.anyio

LIMITS = Limits(timeout=20)
NAMESPACES = (
    "user-namespace",
    "mount-namespace",
    "network-namespace",
    "pid-namespace",
    "ipc-namespace",
    "uts-namespace",
)
# Runs a tool call first: a refused run must not have made it.
PROGRAM = "await tools.echo({'x': 1})\nreturn 42"


class Calls:
    def __init__(self) -> None:
        self.names: list[str] = []

    async def __call__(self, name: str, args: Any) -> ToolAnswer:
        self.names.append(name)
        return ToolAnswer.success(args)


async def run_once(runtime: SubprocessRuntime, code: str = PROGRAM) -> tuple[Any, list[str]]:
    calls = Calls()
    async with runtime:
        outcome = await runtime.run(code, tool_names=["echo"], call_tool=calls, limits=LIMITS)
    return outcome, calls.names


@pytest.mark.parametrize("spares", [0, 1], ids=["forked-for-the-run", "spare"])
async def test_the_default_refuses_a_host_without_user_namespaces(
    tmp_path: Path, spares: int
) -> None:
    python = python_wrapper(tmp_path, "namespaces")
    outcome, calls = await run_once(SubprocessRuntime(python=python, spares=spares))
    assert outcome.kind == "sandbox"
    assert calls == [], "the program ran"
    message = outcome.message
    # The layer, the kernel's reason, the doctor and both ways out.
    # Every layer is tried before the refusal: it names all six namespaces, once each.
    assert (
        "layers 'user-namespace', 'mount-namespace', 'network-namespace', 'pid-namespace', "
        "'ipc-namespace', 'uts-namespace' are unavailable: unshare refused"
    ) in message
    assert message.count("unshare refused") == 1
    assert "unshare refused" in message and "Operation not permitted" in message
    assert "`ptc doctor` lists the layers" in message
    assert 'runtime "pyodide"' in message
    assert 'isolation="best-effort"' in message and "--isolation best-effort" in message
    assert outcome.isolation == Isolation(mode="strict", runtime="subprocess")


async def test_the_default_refuses_a_kernel_without_landlock(tmp_path: Path) -> None:
    outcome, calls = await run_once(SubprocessRuntime(python=python_wrapper(tmp_path, "landlock")))
    assert outcome.kind == "sandbox" and calls == []
    assert "layer 'landlock' is unavailable: kernel built without Landlock" in outcome.message
    assert "`ptc doctor`" in outcome.message


async def test_the_default_refuses_a_kernel_without_seccomp_filters(tmp_path: Path) -> None:
    outcome, calls = await run_once(SubprocessRuntime(python=python_wrapper(tmp_path, "seccomp")))
    assert outcome.kind == "sandbox" and calls == []
    assert "layer 'seccomp' is unavailable" in outcome.message
    assert "`ptc doctor`" in outcome.message and 'runtime "pyodide"' in outcome.message
    assert outcome.isolation == Isolation(mode="strict", runtime="subprocess")


@pytest.mark.parametrize("spares", [0, 1], ids=["forked-for-the-run", "spare"])
async def test_best_effort_runs_and_every_outcome_names_what_it_lacked(
    tmp_path: Path, spares: int
) -> None:
    python = python_wrapper(tmp_path, "namespaces,seccomp")
    runtime = SubprocessRuntime(python=python, spares=spares, isolation="best-effort")
    assert runtime.isolation == "best-effort"
    outcome, calls = await run_once(runtime)
    assert outcome.ok, outcome.message
    assert outcome.result == 42 and calls == ["echo"]
    assert outcome.isolation == Isolation(
        mode="best-effort", runtime="subprocess", missing=(*NAMESPACES, "seccomp")
    )
    assert outcome.isolation.to_json() == {
        "mode": "best-effort",
        "runtime": "subprocess",
        "missing": [*NAMESPACES, "seccomp"],
        "off": [],
    }


def _networks_of_children(parent: int) -> list[str]:
    networks = []
    for child in children_of(parent):
        with contextlib.suppress(OSError):  # (gone meanwhile)
            networks.append(os.readlink(f"/proc/{child}/ns/net"))
    return networks


async def test_without_seccomp_on_the_machine_each_worker_has_a_network_of_its_own(
    tmp_path: Path,
) -> None:
    # A template's network is shared only by workers whose filter denies them
    # sockets: where no filter can be installed, each worker makes its own.
    python = python_wrapper(tmp_path, "seccomp")
    runtime = SubprocessRuntime(python=python, spares=2, isolation="best-effort")
    async with runtime:
        outcome = await runtime.run("return 1", tool_names=[], call_tool=Calls(), limits=LIMITS)
        assert outcome.result == 1 and outcome.isolation.missing == ("seccomp",)
        zygote = runtime._pool.zygote_pid
        assert zygote is not None
        with anyio.fail_after(10):  # (the spares' processes: no event to wait on)
            while len(networks := _networks_of_children(zygote)) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.01)
    assert len(set(networks)) == len(networks)
    assert os.readlink("/proc/self/ns/net") not in networks


async def test_best_effort_on_a_failing_program_still_reports_its_isolation(
    tmp_path: Path,
) -> None:
    python = python_wrapper(tmp_path, "landlock")
    runtime = SubprocessRuntime(python=python, spares=0, isolation="best-effort")
    outcome, _ = await run_once(runtime, "raise ValueError('boom')")
    assert outcome.kind == "exception"
    assert outcome.isolation.missing == ("landlock",)


async def test_layers_switched_off_by_configuration_run_and_are_reported() -> None:
    # Off by configuration is the caller's explicit choice: no refusal, but it shows.
    outcome, _ = await run_once(SubprocessRuntime(layers=("landlock",), spares=0))
    assert outcome.ok, outcome.message
    assert outcome.isolation == Isolation(
        mode="strict", runtime="subprocess", off=(*NAMESPACES, "seccomp")
    )


async def test_a_machine_with_every_layer_runs_strict_with_nothing_missing() -> None:
    outcome, _ = await run_once(SubprocessRuntime(spares=0))
    assert outcome.ok, outcome.message
    assert outcome.isolation == Isolation(mode="strict", runtime="subprocess")


def test_the_isolation_mode_is_one_keyword() -> None:
    with pytest.raises(ValueError, match="isolation must be"):
        SubprocessRuntime(isolation="off")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SubprocessRuntime(strict=False)  # type: ignore[call-arg]
    assert SubprocessRuntime().isolation == "strict"
    with pytest.raises(ValueError, match="best-effort"):
        get_runtime("pyodide", isolation="best-effort")
    runtime = get_runtime("subprocess", isolation="best-effort")
    assert isinstance(runtime, SubprocessRuntime) and runtime.isolation == "best-effort"
