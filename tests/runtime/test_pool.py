"""The worker pool: workers forked on demand for concurrent runs, up to a bound."""

from __future__ import annotations

import time

import anyio
import pytest

from runtime import Limits, SubprocessRuntime
from runtime._host import _pool
from runtime.testing import ToolBox

from .conftest import AskedWorker, MeetingToolBox, greeting_of

pytestmark = pytest.mark.anyio

_WAIT = "return await tools.sleep({'seconds': %s})"


async def _run_all(runtime: SubprocessRuntime, box: ToolBox, runs: int, seconds: float) -> None:
    results: list[object] = []

    async def one() -> None:
        outcome = await runtime.run(_WAIT % seconds, tool_names=["sleep"], call_tool=box)
        results.append(outcome.result)

    async with anyio.create_task_group() as group:
        for _ in range(runs):
            group.start_soon(one)
    assert results == [{"seconds": seconds}] * runs


async def test_concurrent_runs_do_not_wait_for_each_other() -> None:
    # One spare, eight runs at once: each gets a worker of its own as it
    # comes, so all eight wait on their tool at the same time (a run that
    # waited for another to end would never meet the other seven).
    box = MeetingToolBox(8)
    async with SubprocessRuntime(spares=1) as runtime:
        await _run_all(runtime, box, 8, 0.1)
    assert box.max_in_flight == 8


async def test_concurrent_runs_without_the_context_manager() -> None:
    box = MeetingToolBox(6)
    runtime = SubprocessRuntime(spares=1)
    try:
        await _run_all(runtime, box, 6, 0.1)
    finally:
        await runtime.aclose()
    assert box.max_in_flight == 6


async def test_live_workers_stay_within_the_bound() -> None:
    # At most two workers live: two runs at a time; the rest queue and finish.
    box = MeetingToolBox(2)
    async with SubprocessRuntime(spares=1, max_workers=2) as runtime:
        await _run_all(runtime, box, 6, 0.3)
    assert box.max_in_flight == 2
    assert len(box.calls) == 6


async def test_runs_with_their_own_limits_stay_within_the_bound() -> None:
    # Workers for other limits (or with no spares) are forked per run, and
    # count against the bound too.
    box = MeetingToolBox(2)
    limits = Limits(cpu_seconds=30)
    async with SubprocessRuntime(spares=0, max_workers=2) as runtime:
        results: list[object] = []

        async def one() -> None:
            outcome = await runtime.run(
                _WAIT % 0.3, tool_names=["sleep"], call_tool=box, limits=limits
            )
            results.append(outcome.result)

        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(one)
    assert results == [{"seconds": 0.3}] * 4
    assert box.max_in_flight == 2


def test_max_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        SubprocessRuntime(max_workers=0)


async def test_a_worker_a_run_waits_for_skips_the_prewarm(
    asked_workers: list[AskedWorker], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spares made ahead are prewarmed; one asked for because a run has none
    # to take is not (the run would wait for the prewarm), and says so.
    monkeypatch.setattr(_pool, "_BUSY_INTERVAL", 0.0)  # (runs ending close together: below)
    asked = asked_workers
    box = ToolBox()
    async with SubprocessRuntime(spares=1) as runtime:
        await runtime.start()
        await _run_all(runtime, box, 1, 0.0)
        assert asked[0].prewarm is True  # the spare, asked for as the runtime started
        asked.clear()
        await _run_all(runtime, box, 4, 0.5)
        # Four at once: one takes the spare, three wait for workers of their own.
        assert [one.prewarm for one in asked].count(False) >= 3, asked
        asked.clear()
        await _run_all(runtime, box, 1, 0.0)  # a spare is ready again
        assert all(one.prewarm for one in asked), asked


@pytest.mark.parametrize("busy", [False, True])
async def test_spares_asked_for_as_runs_end_back_to_back_skip_the_prewarm(
    asked_workers: list[AskedWorker], monkeypatch: pytest.MonkeyPatch, busy: bool
) -> None:
    # A run that ends within _BUSY_INTERVAL of the one before marks the pool
    # busy: the spare asked for in its place is taken soon, and its prewarm
    # would only compete with the runs for the CPU.
    monkeypatch.setattr(_pool, "_BUSY_INTERVAL", 60.0 if busy else 0.0)
    asked = asked_workers
    box = ToolBox()
    async with SubprocessRuntime(spares=1) as runtime:
        await runtime.start()
        for _ in range(4):
            await _run_all(runtime, box, 1, 0.0)
    # The spare asked for as the runtime started, then one after each run;
    # busy, the second run's end also asks for a second spare (the busy target).
    assert len(asked) == (6 if busy else 5), asked
    assert asked[0].prewarm is True
    # The first run's end is the first there is: nothing ended just before it.
    assert asked[1].prewarm is True
    assert [one.prewarm for one in asked[2:]] == [not busy] * (len(asked) - 2)


@pytest.mark.parametrize("busy", [False, True])
async def test_while_runs_end_back_to_back_the_pool_keeps_twice_the_spares(
    monkeypatch: pytest.MonkeyPatch, busy: bool
) -> None:
    # Back to back, a spare takes longer to fork and sandbox than a run to use
    # it: the pool tops up to twice ``spares``, and to ``spares`` once runs
    # are further apart again. Never beyond max_workers.
    monkeypatch.setattr(_pool, "_BUSY_INTERVAL", 60.0 if busy else 0.0)
    box = ToolBox()
    async with SubprocessRuntime(spares=2, max_workers=3) as runtime:
        pool = runtime._pool
        await runtime.start()
        for _ in range(3):
            await _run_all(runtime, box, 1, 0.0)
        coming = len(pool._spares) + len(pool._spare_requests)
        assert coming == (3 if busy else 2)  # 4 when busy, within max_workers=3
        zygote = await pool._ensure_zygote()
        await pool._wait(zygote, lambda: not pool._spare_requests)
        assert len(pool._spares) == coming  # forked, each ready for a run
        assert all(
            (spare.greeting or greeting_of(spare))["type"] == "ready" for spare in pool._spares
        )
    async with SubprocessRuntime(spares=2) as runtime:
        await runtime.start()
        for _ in range(3):
            await _run_all(runtime, box, 1, 0.0)
        pool = runtime._pool
        assert len(pool._spares) + len(pool._spare_requests) == (4 if busy else 2)


async def test_a_spare_asked_for_as_a_run_ends_is_forked_a_moment_later(
    asked_workers: list[AskedWorker], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not while the run's caller is still finishing with it (its event flush).
    # Spares asked for as the runtime starts, or for a waiting run, or while
    # runs are busy, are forked at once.
    monkeypatch.setattr(_pool, "_BUSY_INTERVAL", 0.0)
    asked = asked_workers
    async with SubprocessRuntime(spares=1) as runtime:
        await runtime.start()
        await _run_all(runtime, ToolBox(), 1, 0.0)
        await _run_all(runtime, ToolBox(), 3, 0.2)  # two of them wait for a worker
    assert asked[0].after == 0.0  # as the runtime started
    assert asked[1].after == _pool._SPARE_AFTER_RUN_DELAY  # after the first run
    waiting = [one for one in asked[2:] if not one.prewarm]
    assert len(waiting) >= 2 and all(one.after == 0.0 for one in waiting), asked


async def test_the_zygote_forks_a_deferred_request_after_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    collected: list[int] = []
    collect = _pool._ZygoteProcess.collect

    def recording(self: _pool._ZygoteProcess) -> list[tuple[int, _pool.Worker | str]]:
        replies = collect(self)
        collected.extend(request_id for request_id, _ in replies)
        return replies

    monkeypatch.setattr(_pool._ZygoteProcess, "collect", recording)
    async with SubprocessRuntime(spares=0) as runtime:
        pool = runtime._pool
        zygote = await pool._ensure_zygote()
        asked = time.monotonic()
        zygote.request(901, runtime._default_key, after=0.1)
        zygote.request(902, runtime._default_key)
        zygote.request(903, runtime._default_key, after=5.0)  # (the zygote allows 0.1 s)
        await pool._wait(zygote, lambda: {901, 902, 903} <= pool._replies.keys())
        waited = time.monotonic() - asked
        zygote.request(904, runtime._default_key, after=0.1)
        zygote.cancel(904)
        await pool._wait(zygote, lambda: 904 in pool._replies)
        assert collected == [902, 901, 903, 904]  # the zygote answers as it forks
        assert 0.1 <= waited < 4.0  # (903's 5 s were cut to 0.1)
        assert pool._replies.pop(904) == "cancelled"  # never forked
        for request_id in (901, 902, 903):
            worker = pool._replies.pop(request_id)
            assert isinstance(worker, _pool.Worker)
            worker.kill()
            worker.close()


@pytest.mark.parametrize("prewarm", [True, False])
async def test_the_zygote_prewarms_a_worker_unless_told_not_to(prewarm: bool) -> None:
    async with SubprocessRuntime(spares=0) as runtime:
        pool = runtime._pool
        zygote = await pool._ensure_zygote()
        zygote.request(999, runtime._default_key, prewarm=prewarm)
        await pool._wait(zygote, lambda: 999 in pool._replies)
        worker = pool._replies.pop(999)
        assert isinstance(worker, _pool.Worker)
        try:
            ready = greeting_of(worker)
            assert ready["type"] == "ready"
            assert ready["prewarmed"] is prewarm
        finally:
            worker.kill()
            worker.close()
        # A worker that skipped it runs programs all the same.
        outcome = await runtime.run("return 6 * 7", tool_names=[], call_tool=ToolBox())
        assert outcome.result == 42
