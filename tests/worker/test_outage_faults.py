"""A worker whose store fails on cue (a wrapped driver on SQLite, a manual clock): settles
are retried within the lease, given up at its local deadline, and a lost store stops the
worker unsettled. Deterministic companions of test_store_outage.py's real outages."""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import tenure
import tenure.worker._worker as worker_module
from tests.worker._support import run_burst, wait_until


class Faults:
    """Which driver operations fail, and with what; shared by both of the worker's stores
    (its async store and the keeper's sync one). Counts the calls that reached the store."""

    def __init__(self) -> None:
        self.failing: dict[str, BaseException] = {}
        self.calls: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.lock = threading.Lock()
        # (operations, n): heal once calls of these operations have been refused n times.
        self._heal_when: tuple[frozenset[str], int] | None = None

    def check(self, operation: str) -> None:
        # The keeper sends its renewals in batches: a failing "renew" fails those too.
        operation = "renew" if operation == "renew_many" else operation
        with self.lock:
            error = self.failing.get(operation)
            if error is None:
                self.calls[operation] += 1
            else:
                self.refused[operation] += 1
                if self._heal_when is not None:
                    operations, times = self._heal_when
                    if sum(self.refused[name] for name in operations) >= times:
                        self.failing.clear()
                        self._heal_when = None
        if error is not None:
            raise error

    def heal_after(self, times: int, *operations: str) -> None:
        """Heal when calls of ``operations`` have been refused ``times`` times in all (on
        cue, not after some real time: a loaded machine may not reach them in time)."""
        with self.lock:
            self._heal_when = (frozenset(operations), times)

    def fail(self, error: BaseException, *operations: str) -> None:
        with self.lock:
            self.failing.update(dict.fromkeys(operations, error))

    def heal(self) -> None:
        with self.lock:
            self.failing.clear()


class _Faulty:
    def __init__(self, inner: Any, faults: Faults) -> None:
        self._inner = inner
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name.startswith("_") or not callable(value):
            return value
        faults = self._faults
        if inspect.iscoroutinefunction(value):

            async def call_async(*args: Any, **kwargs: Any) -> Any:
                faults.check(name)
                return await value(*args, **kwargs)

            return call_async

        def call(*args: Any, **kwargs: Any) -> Any:
            faults.check(name)
            return value(*args, **kwargs)

        return call


# The tries a store makes of one call before StoreUnavailable reaches the worker: the
# first and the store's own retries (``retries=2``, the default).
STORE_TRIES = 3

SETTLES = ("complete", "complete_many", "complete_and_claim", "fail", "release")


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Faults:
    faults = Faults()
    real_async, real_sync = worker_module.connect_async, worker_module.connect

    async def connect_async(url: str, **options: Any) -> Any:
        store = await real_async(url, **options)
        store._driver = _Faulty(store._driver, faults)
        return store

    def connect(url: str, **options: Any) -> Any:
        store = real_sync(url, **options)
        store._driver = _Faulty(store._driver, faults)
        return store

    monkeypatch.setattr(worker_module, "connect_async", connect_async)
    monkeypatch.setattr(worker_module, "connect", connect)
    return faults


@pytest.fixture
def clock() -> tenure.ManualClock:
    return tenure.ManualClock()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tenure.db'}"


@pytest.fixture
def store(url: str, clock: tenure.ManualClock) -> Iterator[tenure.Store]:
    with tenure.connect(url, clock=clock, store_clock=clock) as opened:
        yield opened


def unavailable(operation: str) -> tenure.StoreUnavailable:
    # Raised before the call reaches the store: nothing happened (a claim did not claim).
    return tenure.StoreUnavailable(
        f"{operation}: the test took the store away", operation=operation, outcome_unknown=False
    )


def make_worker(
    url: str, clock: tenure.ManualClock, handler: Callable[[tenure.JobContext], Any]
) -> tenure.Worker:
    worker = tenure.Worker(
        url,
        clock=clock,
        store_clock=clock,
        ttl=10.0,
        concurrency=2,
        poll_interval=0.02,
        grace=5.0,
        summary_every=0,
    )
    worker.register("default", handler)
    return worker


def tenure_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tenure" and r.levelno == level]


def test_settles_wait_for_the_store_within_the_lease(
    url: str,
    clock: tenure.ManualClock,
    store: tenure.Store,
    faults: Faults,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    for index in range(6):
        store.submit(f"job-{index}")
    starts: Counter[str] = Counter()

    async def handle(ctx: tenure.JobContext) -> str:
        starts[ctx.job_id] += 1
        if ctx.job_id == "job-0":
            # Every settle and claim fails from now on, until the store has refused every
            # try of one settle call: its own retries did not ride the outage out, the
            # worker's must.
            faults.fail(unavailable("settle"), *SETTLES, "claim_next", "renew")
            faults.heal_after(STORE_TRIES, *SETTLES)
        await anyio.sleep(0.001)
        return ctx.job_id

    worker = make_worker(url, clock, handle)
    run_burst(worker, timeout=20)
    assert {job.job_id: job.state for job in store.jobs()} == {
        f"job-{index}": "done" for index in range(6)
    }
    assert set(starts.values()) == {1}  # nothing ran twice
    stats = worker.stats()
    assert stats["completed"] == 6
    assert stats["leases_lost"] == stats["settles_given_up"] == 0
    assert stats["settle_retries"] >= 1
    assert sum(faults.refused[name] for name in SETTLES) == STORE_TRIES
    assert stats["outages"] == 1
    warnings = tenure_records(caplog, logging.WARNING)
    assert len([w for w in warnings if w.startswith("store unavailable:")]) == 1, warnings
    assert warnings == [w for w in warnings if w.startswith("store unavailable:")]
    infos = tenure_records(caplog, logging.INFO)
    assert len([i for i in infos if i.startswith("store available again after")]) == 1
    assert tenure_records(caplog, logging.ERROR) == []


def test_a_settle_is_given_up_at_the_local_deadline_and_the_job_runs_again(
    url: str,
    clock: tenure.ManualClock,
    store: tenure.Store,
    faults: Faults,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    store.submit("J")
    starts: list[int] = []
    completing = threading.Event()

    async def handle(ctx: tenure.JobContext) -> str:
        starts.append(ctx.attempt)
        if len(starts) == 1:
            faults.fail(unavailable("complete"), *SETTLES, "renew")
            completing.set()
        return "done"

    worker = make_worker(url, clock, handle)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            worker.run(burst=True, install_signal_handlers=False)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    completing.wait(10)
    wait_until(lambda: worker.stats()["settle_retries"] >= 2, what="the complete being retried")
    assert store.get("J").state == "leased"  # retrying: not given up, not lost
    assert worker.stats()["leases_lost"] == 0
    clock.advance(11)  # past the local deadline (and the store's expiry: same clock)
    wait_until(lambda: worker.stats()["settles_given_up"] == 1, what="the settle given up")
    faults.heal()
    thread.join(20)
    assert not thread.is_alive()
    assert errors == []
    assert store.get("J").state == "done"
    assert starts == [1, 2]  # the lease was lost: the job ran again, once
    stats = worker.stats()
    assert stats["leases_lost"] == stats["lost_deadline_passed"] == 1
    assert stats["settles_given_up"] == 1
    warnings = tenure_records(caplog, logging.WARNING)
    assert len([w for w in warnings if w.startswith("could not complete the job")]) == 1
    assert len([w for w in warnings if w.startswith("lease lost:")]) == 1


@pytest.mark.parametrize("where", ["renew", "complete"])
def test_a_lost_store_stops_the_worker_without_settling(
    url: str,
    clock: tenure.ManualClock,
    store: tenure.Store,
    faults: Faults,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    for index in range(4):
        store.submit(f"job-{index}")
    error = tenure.StoreLost(
        f"{where}: the store is gone (test)", operation=where, outcome_unknown=False
    )
    started = threading.Event()

    async def handle(ctx: tenure.JobContext) -> str:
        if ctx.job_id == "job-0":
            faults.fail(error, "renew", *(SETTLES if where == "complete" else ()))
            started.set()
            if where == "renew":
                await anyio.sleep(30)  # until the renewal finds the store lost
        return "ok"

    worker = make_worker(url, clock, handle)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            worker.run(burst=True, install_signal_handlers=False)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    if where == "renew":
        time.sleep(0.1)
        clock.advance(5)  # the renewal is due
    thread.join(20)
    assert not thread.is_alive()
    assert errors == [error]
    # Nothing was settled or claimed after the store was found lost.
    calls_then = dict(faults.calls)
    assert calls_then.get("release", 0) == 0
    assert calls_then.get("fail", 0) == 0
    assert {job.job_id: job.state for job in store.jobs()}["job-0"] == "leased"
    errors_logged = tenure_records(caplog, logging.ERROR)
    assert len(errors_logged) == 1
    assert errors_logged[0].startswith("worker stopping: the store lost its data")
    assert "the store is gone (test)" in errors_logged[0]
    assert worker.stats()["in_flight"] == 0
