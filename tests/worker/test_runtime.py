"""The worker runtime in the test process, on a ManualClock, against every store.

The worker's lease clock is a `ManualClock` shared with the store (``store_clock``): leases
are renewed, expire locally and expire in the store only when a test moves the clock, so
each scenario happens at a known moment. Handlers hand-shake with the test through
threading events; every wait is bounded. Tests parametrized over ``loop`` also run the
worker under trio (`tests/worker/_support.py`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import tenure
import tenure.aio
from tenure.worker import JobContext, check_token, current_context, token_state
from tenure.worker import _worker as worker_module
from tests.backends import Backend
from tests.worker import apps
from tests.worker._support import LOOPS, Loop, run_burst, running, until_lost, wait_until

MakeWorker = Callable[..., tenure.Worker]
TTL = 10.0  # make_worker's default: local deadline 9.85 s after sending, renewals <= 3.33 s


class Gate:
    """A handler blocks on ``proceed`` after setting ``started``; bounded both ways."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.proceed = threading.Event()
        self.seen: dict[str, Any] = {}

    def wait_started(self) -> None:
        assert self.started.wait(10), "the handler did not start"

    def block(self) -> None:
        self.started.set()
        assert self.proceed.wait(10), "the test did not let the handler go on"


# -- outcomes ----------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_sync_and_async_handlers_complete_with_their_result(
    make_worker: MakeWorker, store: tenure.Store, loop: Loop
) -> None:
    worker = make_worker(concurrency=2)

    @worker.handler("sync")
    def sync_handler(ctx: JobContext) -> Any:
        assert current_context() is ctx
        assert ctx.token == ctx.lease.token == tenure.FencingToken(ctx.job_id, 1)
        return {"sync": ctx.payload, "attempt": ctx.attempt, "queue": ctx.queue}

    @worker.handler("async")
    async def async_handler(ctx: JobContext) -> Any:
        await anyio.lowlevel.checkpoint()
        assert current_context() is ctx
        return {"async": ctx.payload, "state": ctx.job.state}

    store.submit("s", [1, 2], queue="sync")
    store.submit("a", "x", queue="async")
    run_burst(worker, loop=loop)
    assert store.get("s").result == {"sync": [1, 2], "attempt": 1, "queue": "sync"}
    assert store.get("a").result == {"async": "x", "state": "leased"}
    assert (store.get("s").state, store.get("a").state) == ("done", "done")
    stats = worker.stats()
    assert (stats["claimed"], stats["completed"], stats["in_flight"]) == (2, 2, 0)


def _recorded_opens(monkeypatch: pytest.MonkeyPatch) -> list[tenure.Store]:
    """The keeper's connections opened from now on (a worker's only sync store)."""
    opened: list[tenure.Store] = []
    real_connect = worker_module.connect

    def connect(url: str, **options: Any) -> tenure.Store:
        opened.append(real_connect(url, **options))
        return opened[-1]

    monkeypatch.setattr(worker_module, "connect", connect)
    return opened


def _recorded_closes(monkeypatch: pytest.MonkeyPatch) -> list[tenure.Store]:
    """The sync stores closed from now on (a worker's only one is its keeper's)."""
    closed: list[tenure.Store] = []
    close = tenure.Store.close
    monkeypatch.setattr(tenure.Store, "close", lambda self: (closed.append(self), close(self))[1])
    return closed


def _threads_left(before: set[threading.Thread]) -> list[str]:
    """The names of the threads started since ``before`` still alive after up to 5 s."""
    started = lambda: sorted(t.name for t in set(threading.enumerate()) - before)  # noqa: E731
    with contextlib.suppress(AssertionError):
        wait_until(lambda: not started(), timeout=5)
    return started()


def test_a_run_stops_its_keeper_and_connection_without_anyios_worker_threads(
    make_worker: MakeWorker, store: tenure.Store, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short run (a burst, a rolling restart) pays its start and stop in full: anyio's
    # worker threads would be started for the stop alone, so the stop runs on a thread of
    # the worker's own. The keeper's threads and its connection must still be gone after.
    used: list[Any] = []
    run_sync = anyio.to_thread.run_sync

    async def recorded(function: Any, *args: Any, **kwargs: Any) -> Any:
        used.append(function)
        return await run_sync(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", recorded)
    opened = _recorded_opens(monkeypatch)
    worker = make_worker()

    @worker.handler("default")
    async def handler(ctx: JobContext) -> str:
        return "done"

    store.submit("a", None)
    before = set(threading.enumerate())
    run_burst(worker)
    assert store.get("a").result == "done"
    # Its job ended long before a renewal was due: the keeper never opened its connection.
    assert opened == []
    if backend.name != "sqlite":  # (whose async store runs each call on anyio's threads)
        assert used == []
    assert _threads_left(before) == []


def test_a_run_that_finds_no_job_starts_no_keeper_thread(
    make_worker: MakeWorker, store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The keeper's renewer and watchdog start with the first claim: a burst that finds the
    # queue empty (a cron'd drain, a fleet's late process) starts neither.
    names: list[str] = []
    start = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        names.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", recorded)
    worker = make_worker()

    @worker.handler("default")
    async def handler(ctx: JobContext) -> None:
        pass

    keeper = {"tenure-renewer", "tenure-lease-watchdog"}
    run_burst(worker)
    assert keeper.isdisjoint(names), names
    store.submit("a", None)
    run_burst(worker)
    assert store.get("a").state == "done"
    assert keeper <= set(names), names


def test_a_run_cancelled_from_outside_still_stops_its_keeper_and_closes_its_connection(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = _recorded_opens(monkeypatch)
    closed = _recorded_closes(monkeypatch)
    worker = make_worker()  # ttl 10: renewed 2.5-3.3 s after its claim, opened 1.7 s before
    started: list[anyio.Event] = []  # made on the run's loop

    @worker.handler("default")
    async def handler(ctx: JobContext) -> None:
        started[0].set()
        await anyio.sleep_forever()

    store.submit("a", None)
    before = set(threading.enumerate())

    async def main() -> None:
        started.append(anyio.Event())
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(partial(worker.run_async, install_signal_handlers=False))
            with anyio.fail_after(10):
                await started[0].wait()
                clock.advance(1.7)  # the keeper opens its connection ahead of the renewal
                # Opened on the keeper's thread, which no event of this loop hears.
                while not opened:  # noqa: ASYNC110
                    await anyio.sleep(0.005)
            task_group.cancel_scope.cancel()

    anyio.run(main)
    assert closed == opened  # the keeper's connection, closed though the run was cancelled
    assert store.get("a").state == "ready"  # the job was given back
    assert _threads_left(before) == []


def test_sync_jobs_settle_with_sniffio_installed(
    make_worker: MakeWorker, store: tenure.Store, caplog: pytest.LogCaptureFixture
) -> None:
    # A sync handler's job is settled from a callback of the event loop, which has no
    # current task; with sniffio installed anyio finds the loop through that task, so a
    # task started straight from the callback failed there ("Exception in callback"), and
    # the jobs were never completed or failed.
    import sniffio  # the test extra installs it, as many libraries do

    assert sniffio.__name__ == "sniffio"
    caplog.set_level(logging.ERROR)
    worker = make_worker(concurrency=4)

    def handler(ctx: JobContext) -> str:
        if ctx.job_id == "bad":
            raise ValueError("bad job")
        return ctx.job_id

    worker.register("q", handler)
    ids = [f"j{n}" for n in range(12)]
    for job_id in ids:
        store.submit(job_id, queue="q")
    store.submit("bad", queue="q", max_attempts=1)
    run_burst(worker)
    assert [store.get(job_id).result for job_id in ids] == ids
    assert store.get("bad").state == "dead"
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_a_run_cancelled_from_outside_gives_back_a_sync_handlers_job(
    make_worker: MakeWorker, store: tenure.Store, caplog: pytest.LogCaptureFixture
) -> None:
    # A sync handler's job has no task of its own while its thread runs: the cancelled run
    # still releases it (claimable at once, its attempt refunded) and tells its handler.
    caplog.set_level(logging.WARNING, logger="tenure")
    worker = make_worker()
    gate = Gate()

    @worker.handler("default")
    def handler(ctx: JobContext) -> None:
        gate.block()
        gate.seen["lost"] = ctx.lost

    store.submit("a", None)

    async def main() -> None:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(partial(worker.run_async, install_signal_handlers=False))
            with anyio.fail_after(10):
                await anyio.to_thread.run_sync(gate.wait_started)
            task_group.cancel_scope.cancel()

    anyio.run(main)
    job = store.get("a")
    assert (job.state, job.attempts, job.generation) == ("ready", 0, 1)  # given back
    gate.proceed.set()
    wait_until(lambda: "lost" in gate.seen, what="the handler to return")
    assert gate.seen["lost"] is True
    assert any(
        "still running after its lease was revoked" in r.getMessage() for r in caplog.records
    )
    run_burst(worker)  # the same worker runs again, and does the job
    assert (store.get("a").state, store.get("a").generation) == ("done", 2)


def test_jobs_finishing_together_are_completed_together(
    make_worker: MakeWorker, store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = make_worker(concurrency=20)
    claims: list[int] = []  # jobs claimed by each claim call of the claim loop
    refills: list[int] = []  # jobs claimed by each completion call (complete_and_claim)
    claim_jobs = tenure.aio.AsyncStore.claim_jobs
    complete_and_claim_jobs = tenure.aio.AsyncStore.complete_and_claim_jobs

    async def counting(self: tenure.aio.AsyncStore, *args: Any, **kwargs: Any) -> Any:
        claimed = await claim_jobs(self, *args, **kwargs)
        claims.append(len(claimed))
        return claimed

    async def counting_refills(self: tenure.aio.AsyncStore, *args: Any, **kwargs: Any) -> Any:
        lost, claimed = await complete_and_claim_jobs(self, *args, **kwargs)
        refills.append(len(claimed))
        return lost, claimed

    monkeypatch.setattr(tenure.aio.AsyncStore, "claim_jobs", counting)
    monkeypatch.setattr(tenure.aio.AsyncStore, "complete_and_claim_jobs", counting_refills)
    running = [0]
    most = [0]

    @worker.handler("q")
    async def work(ctx: JobContext) -> str:
        running[0] += 1
        most[0] = max(most[0], running[0])
        for _ in range(int(ctx.job_id[1:]) % 7):  # finish at staggered moments
            await anyio.lowlevel.checkpoint()
        running[0] -= 1
        return ctx.job_id

    for index in range(200):
        store.submit(f"J{index:03d}", queue="q")
    run_burst(worker)
    done = store.jobs(state="done", limit=1000)
    assert sorted(job.result for job in done) == [f"J{index:03d}" for index in range(200)]
    assert {job.generation for job in done} == {1}
    stats = worker.stats()
    assert (stats["claimed"], stats["completed"]) == (200, 200)
    # Handlers finish close together: while the first completion is on its way, the others
    # queue up and go to the store together (group commit), not one call per job.
    assert worker._completer is not None
    assert 1 <= worker._completer.calls <= 60, worker._completer.calls
    # The slots a completion call frees are claimed by that same call, not by one claim per
    # slot: the claim loop claims at the start (and when a call found nothing to claim).
    assert sum(claims) + sum(refills) == 200
    assert sum(refills) >= 100, (claims, refills)
    assert len([size for size in claims if size]) <= 15, claims
    assert most[0] <= 20  # never more handlers at once than the worker's concurrency


def test_sync_jobs_of_one_claim_are_completed_together(
    make_worker: MakeWorker, store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim's sync jobs reach the thread pool over several loop turns, and the first
    one's thread can report before the last is in the pool: the completer waits for those
    too (`Invoker.expect`), so a claim's jobs go back in one call, not one job and then
    the rest. Without that wait, about every other claim of 8 here sent a job alone."""
    worker = make_worker(concurrency=8)
    sizes: list[int] = []  # completions sent by each completion call
    complete_and_claim_jobs = tenure.aio.AsyncStore.complete_and_claim_jobs

    async def counting(self: tenure.aio.AsyncStore, leases: Any, *args: Any, **kw: Any) -> Any:
        sizes.append(len(leases))
        return await complete_and_claim_jobs(self, leases, *args, **kw)

    monkeypatch.setattr(tenure.aio.AsyncStore, "complete_and_claim_jobs", counting)

    @worker.handler("q")
    def work(ctx: JobContext) -> None:
        return None

    for index in range(160):
        store.submit(f"J{index:03d}", queue="q")
    run_burst(worker)
    assert worker.stats()["completed"] == 160
    assert sum(sizes) == 160
    # On a loaded machine a thread may still miss its batch now and then.
    assert len([size for size in sizes if size < 8]) <= 4, sizes


def test_a_handler_ends_on_the_task_it_started_on_with_its_cancel_scopes(
    make_worker: MakeWorker, store: tenure.Store
) -> None:
    # The jobs of one claim start one after the other on one task; one that suspends must
    # be finished on that same task, or a cancel scope its handler entered before its first
    # await (`move_on_after`, `asyncio.timeout`) is exited on another task: RuntimeError,
    # or its timeout cancels the wrong task. A design with one task per claimed batch that
    # finished suspended handlers elsewhere did exactly that (docs/benchmarks.md).
    worker = make_worker(concurrency=4)

    @worker.handler("default")
    async def handler(ctx: JobContext) -> Any:
        entered = anyio.get_current_task().id
        with anyio.move_on_after(0.01) as scope:
            await anyio.sleep(10)
        return {"timed_out": scope.cancelled_caught, "same": anyio.get_current_task().id == entered}

    jobs = [f"j{n}" for n in range(4)]
    for job_id in jobs:
        store.submit(job_id, None)
    run_burst(worker)
    assert [store.get(job_id).result for job_id in jobs] == [{"timed_out": True, "same": True}] * 4
    stats = worker.stats()
    assert (stats["claimed"], stats["completed"]) == (4, 4)


def test_explicit_register_and_bare_decorator(make_worker: MakeWorker, store: tenure.Store) -> None:
    worker = make_worker()

    @worker.handler
    def default_handler(ctx: JobContext) -> str:
        return "default"

    assert worker.register("other", apps.return_payload) is apps.return_payload
    assert set(worker.handlers) == {"default", "other"}
    assert worker.handlers["default"].function is default_handler
    store.submit("d")
    store.submit("o", {"k": 1}, queue="other")
    run_burst(worker)
    assert store.get("d").result == "default"
    assert store.get("o").result == {"k": 1}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_exception_fails_with_backoff_then_dead(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock, kind: str
) -> None:
    worker = make_worker(retry=tenure.RetryPolicy(base=4.0, cap=4.0))

    def boom(ctx: JobContext) -> None:
        raise ValueError(f"boom {ctx.attempt}")

    async def aboom(ctx: JobContext) -> None:
        raise ValueError(f"boom {ctx.attempt}")

    worker.register("q", boom if kind == "sync" else aboom)
    store.submit("J", queue="q", max_attempts=2)
    run_burst(worker)
    job = store.get("J")
    assert (job.state, job.attempts, job.error) == ("ready", 1, "ValueError: boom 1")
    # Backoff: half fixed, half jitter, from the policy (base 4 s on attempt 1).
    assert 2.0 <= job.available_at - job.as_of <= 4.0
    run_burst(worker)  # not due yet: nothing happens
    assert store.get("J").attempts == 1
    clock.advance(4.0)
    run_burst(worker)
    job = store.get("J")
    assert (job.state, job.attempts, job.error) == ("dead", 2, "ValueError: boom 2")
    stats = worker.stats()
    assert (stats["failed"], stats["dead"], stats["completed"]) == (2, 1, 0)


def test_release_gives_the_job_back_without_counting_the_attempt(
    make_worker: MakeWorker, store: tenure.Store
) -> None:
    worker = make_worker()
    calls: list[int] = []

    @worker.handler("q")
    def release_once(ctx: JobContext) -> str:
        calls.append(ctx.lease.generation)
        if len(calls) == 1:
            with contextlib.suppress(BaseException):  # even swallowed, the decision stands
                ctx.release()
            return "ignored"
        return "second time"

    store.submit("J", queue="q")
    run_burst(worker)
    job = store.get("J")
    assert (job.state, job.attempts, job.generation, job.result) == ("done", 1, 2, "second time")
    assert calls == [1, 2]
    assert worker.stats()["released"] == 1


def test_retry_after_records_the_attempt_and_delays(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    worker = make_worker()

    @worker.handler("q")
    async def later(ctx: JobContext) -> None:
        if ctx.attempt == 1:
            ctx.retry(after=7)
        return None

    store.submit("J", queue="q")
    run_burst(worker)
    job = store.get("J")
    assert (job.state, job.attempts) == ("ready", 1)
    assert job.available_at - job.as_of == pytest.approx(7.0, abs=1e-3)
    assert "retry requested" in (job.error or "")
    clock.advance(7)
    run_burst(worker)
    assert (store.get("J").state, store.get("J").attempts) == ("done", 2)
    assert worker.stats()["retried"] == 1


def test_a_result_that_is_not_json_fails_the_attempt(
    make_worker: MakeWorker, store: tenure.Store
) -> None:
    worker = make_worker()
    worker.register("q", lambda ctx: {1, 2})  # a set has no JSON form
    store.submit("J", queue="q", max_attempts=1)
    run_burst(worker)
    job = store.get("J")
    assert job.state == "dead"
    assert "result" in (job.error or "")
    assert "JSON" in (job.error or "")


# -- loss --------------------------------------------------------------------------------


def test_local_deadline_loss_sync_handler_sees_lost_and_is_not_completed(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    worker = make_worker(owner="A")
    gate = Gate()

    @worker.handler("q")
    def slow(ctx: JobContext) -> str:
        if ctx.lease.generation > 1:
            return "fresh"  # the worker takes the job again once its lease expired
        gate.seen["token"] = ctx.token
        assert token_state(ctx.token) == "held"
        check_token(ctx)  # held: no error
        gate.block()
        gate.seen["lost"] = ctx.lost
        gate.seen["reason"] = ctx.lost_reason
        with pytest.raises(tenure.LeaseLost, match="local deadline"):
            ctx.check()
        with pytest.raises(tenure.LeaseLost):
            check_token(ctx.token)
        return "stale result"

    store.submit("J", queue="q")
    with running(worker):
        gate.wait_started()
        # Nothing renewed yet (the clock has not moved); jump past the local deadline.
        clock.advance(TTL)
        # Decided when asked: no watchdog needs to have run yet.
        assert token_state(gate.seen["token"]) == "lost"
        gate.proceed.set()
        wait_until(lambda: store.get("J").state == "done", what="completion")
    assert gate.seen["lost"] is True
    assert "local deadline passed" in gate.seen["reason"]
    # The stale result never landed: the job was taken again (its lease had expired in
    # the store too) at the next generation, and that attempt's result is the one kept.
    job = store.get("J")
    assert (job.state, job.generation, job.result) == ("done", 2, "fresh")
    stats = worker.stats()
    assert (stats["leases_lost"], stats["lost_deadline_passed"]) == (1, 1)
    assert (stats["completions_refused"], stats["completed"]) == (1, 1)
    assert token_state(gate.seen["token"]) == "lost"
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("lease lost") for m in messages)
    refusal = [r for r in caplog.records if r.getMessage().startswith("not completing job")]
    assert refusal
    assert (refusal[0].job_id, refusal[0].generation) == ("J", 1)  # type: ignore[attr-defined]


def test_rejected_renewal_is_a_loss_before_the_local_deadline(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    worker = make_worker(owner="A")
    gate = Gate()

    @worker.handler("q")
    def loop_until_lost(ctx: JobContext) -> str:
        gate.started.set()
        deadline = time.monotonic() + 10
        while not ctx.lost and time.monotonic() < deadline:
            time.sleep(0.002)
        gate.seen["reason"] = ctx.lost_reason
        gate.seen["remaining"] = ctx.remaining()
        return "stale"

    store.submit("J", queue="q")
    with running(worker):
        gate.wait_started()
        # The host sleeps: store time (wall and boot clock) moves on, so the store sees the
        # lease expired, while the worker's monotonic clock (its local deadline) stood still.
        clock.suspend(2 * TTL)
        lease_b = store.claim_next("B", TTL, queues=["q"])
        assert lease_b is not None
        assert lease_b.generation == 2
        clock.advance(TTL / 2.5)  # a renewal falls due; the local deadline has not passed
        wait_until(lambda: worker.stats()["completions_refused"] == 1, what="refusal")
    assert "renewal rejected" in gate.seen["reason"]
    assert gate.seen["remaining"] == 0.0
    stats = worker.stats()
    assert (stats["lost_renewal_rejected"], stats["lost_deadline_passed"]) == (1, 0)
    store.complete(lease_b, "by B")
    assert (store.get("J").owner, store.get("J").result) == ("B", "by B")


@pytest.mark.parametrize("loop", LOOPS)
def test_async_handler_is_cancelled_at_loss(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock, loop: Loop
) -> None:
    worker = make_worker()
    cancelled = threading.Event()
    started = threading.Event()
    seen: dict[str, Any] = {}

    @worker.handler("q")
    async def forever(ctx: JobContext) -> str:
        if ctx.lease.generation > 1:
            return "second"
        started.set()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            seen["lost"] = ctx.lost
            seen["at"] = time.monotonic()
            cancelled.set()
            raise
        return "never"

    store.submit("J", queue="q")
    with running(worker, loop=loop):  # (on trio the loss reaches the loop by its token)
        assert started.wait(10)
        moved_at = time.monotonic()
        clock.advance(TTL)
        assert cancelled.wait(5), "the async handler was not cancelled"
        wait_until(lambda: store.get("J").state == "done", what="the second attempt")
    assert seen["lost"] is True
    # The watchdog wakes at least every 50 ms of real time on a manual clock.
    assert seen["at"] - moved_at < 0.5
    stats = worker.stats()
    assert (stats["cancelled_on_loss"], stats["completed"], stats["failed"]) == (1, 1, 0)
    assert (store.get("J").generation, store.get("J").result) == (2, "second")


@pytest.mark.parametrize("kind", ["async", "process"])
def test_a_handler_whose_lease_was_lost_before_it_started_is_never_started(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    kind: str,
) -> None:
    # Two jobs of one claim: the first handler blocks the event loop, so the second has not
    # started when the watchdog finds both leases lost (as when a worker is paused between
    # its claim and the start). The loss finds no handler of it to stop then; its handler
    # must not be started under the lost lease, and the job runs again at generation 2.
    caplog.set_level(logging.INFO, logger="tenure")
    worker = make_worker(concurrency=2)
    blocking = threading.Event()
    unblock = threading.Event()
    calls: list[tuple[str, int]] = []

    @worker.handler("block")
    async def blocker(ctx: JobContext) -> str:
        calls.append((ctx.job_id, ctx.lease.generation))
        if ctx.lease.generation == 1:
            blocking.set()
            unblock.wait(10)  # blocks the loop on purpose
        return "blocker"

    async def second(ctx: JobContext) -> str:
        calls.append((ctx.job_id, ctx.lease.generation))
        return "second"

    events = tmp_path / "events.jsonl"  # the process handler's first attempt records its start
    if kind == "async":
        worker.register("q", second)
    else:
        worker.register("q", apps.write_pid_and_sleep, isolation="process")
    store.submit("first", queue="block")
    store.submit("second", {"events": str(events)}, queue="q")
    with running(worker):
        assert blocking.wait(10)
        clock.advance(TTL)
        wait_until(lambda: worker.stats()["leases_lost"] == 2, what="both leases lost")
        unblock.set()
        wait_until(
            lambda: [store.get(j).state for j in ("first", "second")] == ["done", "done"],
            what="the second attempts",
        )
    # The second job's handler ran once, at generation 2: never under the lost lease.
    assert sorted(calls) == [("first", 1), ("first", 2)] + [("second", 2)] * (kind == "async")
    assert apps.read_events(events) == []
    assert [store.get(j).generation for j in ("first", "second")] == [2, 2]
    assert [store.get(j).result for j in ("first", "second")] == ["blocker", "second"]
    stats = worker.stats()
    assert (stats["cancelled_on_loss"], stats["killed_on_loss"]) == (0, 0)
    assert (stats["completions_refused"], stats["completed"]) == (1, 2)  # 1: the blocker's
    not_started = [r for r in caplog.records if r.getMessage().startswith("handler not started")]
    assert [(r.job_id, r.generation) for r in not_started] == [("second", 1)]  # type: ignore[attr-defined]


def test_a_sync_handler_starts_at_its_claim_while_another_handler_holds_the_loop(
    make_worker: MakeWorker, store: tenure.Store
) -> None:
    # A sync handler's thread is started with the claim, not by a task of the event loop:
    # an async handler that blocks the loop does not hold it back.
    worker = make_worker(concurrency=2)
    blocking = threading.Event()
    sync_ran = threading.Event()

    @worker.handler("block")
    async def blocker(ctx: JobContext) -> None:
        blocking.set()
        sync_ran.wait(10)  # blocks the loop until the sync handler has run

    worker.register("q", lambda ctx: sync_ran.set() or "ran")
    store.submit("first", queue="block")
    store.submit("second", queue="q")
    with running(worker):
        assert blocking.wait(10)
        assert sync_ran.wait(5), "the sync handler waited for the loop"
        wait_until(
            lambda: [store.get(j).state for j in ("first", "second")] == ["done", "done"],
            what="both jobs",
        )
    assert store.get("second").result == "ran"


def test_sync_handler_that_ignores_its_loss_is_reported(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    worker = make_worker(ttl=0.5)
    gate = Gate()

    @worker.handler("q")
    def stubborn(ctx: JobContext) -> None:
        if ctx.lease.generation == 1:
            gate.block()  # never looks at ctx.lost

    store.submit("J", queue="q")
    with running(worker):
        gate.wait_started()
        clock.advance(1)
        wait_until(
            lambda: any("still running" in r.getMessage() for r in caplog.records),
            5,
            "the warning about the stubborn handler",
        )
        assert worker.stats()["in_flight"] == 1  # it keeps its slot until it returns
        gate.proceed.set()
        wait_until(lambda: store.get("J").state == "done", what="the next attempt")
    assert store.get("J").generation == 2


def test_process_handler_is_killed_at_loss(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock, tmp_path: Path
) -> None:
    worker = make_worker()
    worker.register("q", apps.write_pid_and_sleep, isolation="process")
    events = tmp_path / "events.jsonl"
    store.submit("J", {"events": str(events)}, queue="q")
    with running(worker):
        started = wait_until(lambda: apps.read_events(events), what="child start")
        pid = started[0]["pid"]
        assert pid != os.getpid()
        clock.advance(TTL)
        wait_until(lambda: worker.stats()["killed_on_loss"] == 1, what="kill")
        assert not _alive(pid)
        wait_until(lambda: store.get("J").state == "done", what="the second attempt")
    assert (store.get("J").generation, store.get("J").result) == (2, "second")
    assert worker.stats()["completed"] == 1


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_renewals_keep_the_lease_while_the_clock_moves(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    worker = make_worker()
    gate = Gate()

    @worker.handler("q")
    def long(ctx: JobContext) -> Any:
        gate.block()
        return {"lost": ctx.lost, "generation": ctx.lease.generation}

    store.submit("J", queue="q")
    with running(worker):
        gate.wait_started()
        first_until = store.get("J").lease_until
        assert first_until is not None
        for step in range(1, 10):  # 9 periods of TTL/3: 3 TTLs in all
            clock.advance(TTL / 3)
            wait_until(partial(_renewed, worker, step), what=f"renewal {step}")
        gate.proceed.set()
        wait_until(lambda: store.get("J").state == "done", what="completion")
    job = store.get("J")
    assert job.result == {"lost": False, "generation": 1}
    assert worker.stats()["leases_lost"] == 0


def _renewed(worker: tenure.Worker, count: int) -> bool:
    return worker.stats()["renewals"] >= count


def test_concurrency_limits_running_handlers(make_worker: MakeWorker, store: tenure.Store) -> None:
    worker = make_worker(concurrency=3)
    release = threading.Event()
    lock = threading.Lock()
    active = [0, 0]  # now, most ever

    @worker.handler("q")
    def work(ctx: JobContext) -> None:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        release.wait(10)
        with lock:
            active[0] -= 1

    for index in range(7):
        store.submit(f"J{index}", queue="q")
    with running(worker):
        wait_until(lambda: active[0] == 3, what="three handlers")
        assert len(store.jobs(state="leased")) == 3
        release.set()
        wait_until(lambda: len(store.jobs(state="done")) == 7, what="all done")
    assert active[1] == 3


# -- stopping ----------------------------------------------------------------------------


def test_stop_lets_in_flight_handlers_finish(make_worker: MakeWorker, store: tenure.Store) -> None:
    worker = make_worker()
    gate = Gate()

    @worker.handler("q")
    def finish_after_stop(ctx: JobContext) -> str:
        gate.block()
        return "finished"

    store.submit("J", queue="q")
    store.submit("K", queue="q")
    with running(worker):
        gate.wait_started()
        worker.stop()
        gate.proceed.set()
    assert store.get("J").result == "finished"
    assert store.get("K").state == "ready"  # never claimed after the stop


def test_jobs_a_completion_claims_as_the_worker_stops_are_given_back(
    make_worker: MakeWorker, store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = make_worker(concurrency=2)
    complete_and_claim_jobs = tenure.aio.AsyncStore.complete_and_claim_jobs
    refilled: list[str] = []

    async def stop_meanwhile(self: tenure.aio.AsyncStore, *args: Any, **kwargs: Any) -> Any:
        lost, claimed = await complete_and_claim_jobs(self, *args, **kwargs)
        refilled.extend(lease.job_id for lease, _job in claimed)
        worker.stop()  # the stop arrives while the call is on its way back
        return lost, claimed

    monkeypatch.setattr(tenure.aio.AsyncStore, "complete_and_claim_jobs", stop_meanwhile)

    @worker.handler("q")
    async def work(ctx: JobContext) -> str:
        return ctx.job_id

    for job_id in ("A", "B", "C", "D"):
        store.submit(job_id, queue="q")
    run_burst(worker)
    assert refilled  # the first completion call claimed for the slots it freed
    for job_id in refilled:  # ... and, the worker stopping, gave those jobs back
        job = store.get(job_id)
        assert (job.state, job.attempts, job.generation) == ("ready", 0, 1), job
    assert {store.get(job_id).state for job_id in "ABCD"} <= {"done", "ready"}
    assert worker.stats()["completed"] == len([j for j in "ABCD" if store.get(j).state == "done"])


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_grace_period_over_releases_the_job(
    make_worker: MakeWorker, store: tenure.Store, kind: str, loop: Loop
) -> None:
    worker = make_worker(grace=0.2)
    seen: dict[str, Any] = {}
    started = threading.Event()

    stubborn = until_lost(started, seen)

    async def astubborn(ctx: JobContext) -> str:
        started.set()
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            seen["reason"] = ctx.lost_reason
            raise
        return "late"

    worker.register("q", stubborn if kind == "sync" else astubborn)
    store.submit("J", queue="q")
    with running(worker, loop=loop):
        assert started.wait(10)
        stopped_at = time.monotonic()
        worker.stop()  # (on trio, from this thread into trio's loop by its token)
    took = time.monotonic() - stopped_at
    assert took < 3
    wait_until(lambda: "reason" in seen, what="the handler to see the loss")
    assert "grace period ended" in seen["reason"]
    job = store.get("J")
    assert (job.state, job.attempts, job.generation) == ("ready", 0, 1)
    stats = worker.stats()
    assert (stats["released_at_stop"], stats["leases_lost"]) == (1, 0)


def test_a_run_with_no_task_but_a_sync_job_gives_it_back_at_the_end_of_its_grace(
    make_worker: MakeWorker, store: tenure.Store
) -> None:
    # A burst run with no summaries and no schedules has no task of its own, and a sync
    # handler's job has none either while its thread runs: the job given back at the end
    # of the grace period goes to a new slot task (from its loss's loop callback), which
    # the run must still take and wait for.
    worker = make_worker(grace=0.2, summary_every=0)
    started = threading.Event()
    seen: dict[str, Any] = {}

    worker.register("q", until_lost(started, seen))
    store.submit("J", queue="q")
    run = threading.Thread(target=partial(worker.run, burst=True, install_signal_handlers=False))
    run.start()
    assert started.wait(10)
    worker.stop()
    run.join(10)
    assert not run.is_alive()
    wait_until(lambda: "reason" in seen, what="the handler to see the loss")
    assert "grace period ended" in seen["reason"]
    job = store.get("J")
    assert (job.state, job.attempts, job.generation) == ("ready", 0, 1)
    assert worker.stats()["released_at_stop"] == 1


def test_immediate_stop_releases_at_once(make_worker: MakeWorker, store: tenure.Store) -> None:
    worker = make_worker(grace=60, concurrency=2)
    started = threading.Semaphore(0)

    @worker.handler("q")
    def ignore_everything(ctx: JobContext) -> None:
        started.release()
        time.sleep(3)  # does not check ctx.lost: it is abandoned (a daemon thread)

    store.submit("J", queue="q")
    store.submit("K", queue="q")
    with running(worker):
        assert started.acquire(timeout=10)
        assert started.acquire(timeout=10)
        stopped_at = time.monotonic()
        worker.stop()
        worker.stop(immediate=True)
    assert time.monotonic() - stopped_at < 2
    assert [job.state for job in store.jobs()] == ["ready", "ready"]
    assert worker.stats()["released_at_stop"] == 2


def test_process_poison_ends_dead_after_max_attempts(url: str, real_store: tenure.Store) -> None:
    worker = tenure.Worker(url, ttl=5, retry=tenure.RetryPolicy(base=0.0), poll_interval=0.02)
    worker.register("poison-proc", apps.poison_process, isolation="process")
    real_store.submit("P", queue="poison-proc", max_attempts=3)
    run_burst(worker, timeout=30)
    job = real_store.get("P")
    assert (job.state, job.attempts) == ("dead", 3)
    assert "killed by SIGKILL" in (job.error or "")
    assert worker.stats()["failed"] == 3


# -- registry and validation -------------------------------------------------------------


def test_registry_states_follow_the_lease(make_worker: MakeWorker, store: tenure.Store) -> None:
    worker = make_worker()
    seen: dict[str, Any] = {}

    @worker.handler("q")
    def record(ctx: JobContext) -> None:
        seen["token"] = ctx.token
        seen["during"] = token_state(ctx.lease)

    store.submit("J", queue="q")
    run_burst(worker)
    assert seen["during"] == "held"
    assert token_state(seen["token"]) == "ended"
    with pytest.raises(tenure.LeaseLost, match="already ended"):
        check_token(seen["token"])
    assert token_state(tenure.FencingToken("never-seen", 1)) == "unknown"
    check_token(tenure.FencingToken("never-seen", 1))
    with pytest.raises(tenure.InvalidArgument, match="token"):
        token_state("J")


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"ttl": 0}, "ttl"),
        ({"ttl": "30"}, "ttl"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"renew_every": 20}, "renew_every"),
        ({"grace": -1}, "grace"),
        ({"isolation": "fiber"}, "isolation"),
        ({"poll_interval": float("nan")}, "poll_interval"),
        ({"owner": ""}, "owner"),
        ({"queues": "q"}, "queues"),
        ({"url": "ftp://x"}, "url"),
        ({"retry": 3}, "retry"),
        ({"start_method": "fork"}, "start_method"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], argument: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.Worker(**options)
    assert caught.value.argument == argument
    worker = tenure.Worker()
    with pytest.raises(tenure.InvalidArgument) as caught:
        worker.configure(**options)
    assert caught.value.argument == argument


def test_bad_registrations_are_refused(make_worker: MakeWorker) -> None:
    worker = make_worker()
    worker.register("q", apps.return_payload)
    with pytest.raises(tenure.InvalidArgument, match="already has a handler"):
        worker.register("q", apps.return_payload)
    with pytest.raises(tenure.InvalidArgument, match="callable"):
        worker.register("r", "not a function")  # type: ignore[type-var]
    with pytest.raises(tenure.InvalidArgument, match="queue"):
        worker.register("", apps.return_payload)
    with pytest.raises(tenure.InvalidArgument, match="unknown option"):
        worker.configure(colour="blue")
    with pytest.raises(tenure.InvalidArgument, match="handlers"):
        make_worker().run(install_signal_handlers=False)
    with pytest.raises(tenure.InvalidArgument, match="no handler registered"):
        make_worker(queues=["nope"]).run(install_signal_handlers=False)


def test_process_isolation_needs_an_importable_handler(make_worker: MakeWorker) -> None:
    worker = make_worker()

    @worker.handler("q", isolation="process")
    def local(ctx: JobContext) -> None:
        return None

    with pytest.raises(tenure.InvalidArgument, match="top level of a module"):
        worker.run(install_signal_handlers=False)


def test_owner_is_traceable_and_stats_are_plain_numbers() -> None:
    owner = tenure.worker.default_owner()
    host, pid, suffix = owner.rsplit(":", 2)
    assert host
    assert int(pid) == os.getpid()
    assert len(suffix) == 6
    stats = tenure.Worker().stats()
    assert set(tenure.worker.COUNTERS) <= set(stats)
    assert all(isinstance(value, (int, float)) for value in stats.values())
