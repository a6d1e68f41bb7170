"""The keeper renews the leases it holds in batches: one `renew_many` call per renewal period
for all of a worker's leases, not one call per lease."""

from __future__ import annotations

import math
import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import tenure
from tenure.worker import _worker as worker_module
from tenure.worker._keeper import JITTER, LeaseKeeper, joined_renewal, renewal_batch
from tenure.worker._lease import LeaseHandle
from tenure.worker._stats import Stats
from tests.worker._support import running, wait_until

TTL = 10.0
PERIOD = TTL / 3  # the worker's renewal period; each lease's is jittered to 75-100 % of it


def period(_lease: tenure.Lease) -> float:
    return PERIOD


@pytest.fixture
def leases(store: tenure.Store) -> list[tenure.Lease]:
    for index in range(4):
        store.submit(f"j{index}")
    return store.claim_many("A", TTL, 4)


def handles_due_at(
    leases: list[tenure.Lease], clock: tenure.ManualClock, *due_in: float
) -> list[LeaseHandle]:
    handles = []
    for lease, delay in zip(leases, due_in, strict=False):
        handle = LeaseHandle(lease, clock)
        handle.next_renew_at = clock.monotonic() + delay
        handles.append(handle)
    return handles


def test_a_due_lease_takes_along_those_at_least_half_way_to_their_renewal(
    leases: list[tenure.Lease], clock: tenure.ManualClock
) -> None:
    due, half_way, early, later = handles_due_at(
        leases, clock, 0.0, PERIOD / 2, PERIOD / 2 + 0.01, PERIOD
    )
    batch = renewal_batch([later, early, half_way, due], clock.monotonic(), period)
    assert set(batch) == {due, half_way}
    # Overdue ones go too, and the soonest local deadline leads.
    overdue = handles_due_at(leases[3:], clock, -1.0)[0]
    batch = renewal_batch([later, overdue, due], clock.monotonic(), period)
    assert set(batch) == {due, overdue}
    assert [h.lease.local_deadline for h in batch] == sorted(h.lease.local_deadline for h in batch)


def test_nothing_is_taken_along_a_lease_that_is_not_half_way(
    leases: list[tenure.Lease], clock: tenure.ManualClock
) -> None:
    handles = handles_due_at(leases, clock, PERIOD * 0.51, PERIOD, PERIOD * 2)
    assert renewal_batch(handles, clock.monotonic(), period) == []


def test_a_claims_leases_fall_due_together_and_claims_are_spread(
    store: tenure.Store, leases: list[tenure.Lease], clock: tenure.ManualClock
) -> None:
    # One jittered renewal time per claim: its leases go in one `renew_many`, and the
    # jitter still spreads the claims (and the workers) over the period.
    keeper = LeaseKeeper(store, clock, Stats(), renew_every=period, rng=random.Random(7))
    first, second = (
        [LeaseHandle(lease, clock) for lease in claim] for claim in (leases[:2], leases[2:])
    )
    keeper.add_many(first)
    keeper.add_many(second)
    low, high = (clock.monotonic() + PERIOD * factor for factor in JITTER)
    due = []
    for claim in (first, second):
        (at,) = {handle.next_renew_at for handle in claim}
        assert low <= at <= high
        due.append(at)
    assert due[0] != due[1]


def test_a_claim_drawn_before_the_renewers_wake_is_renewed_with_it() -> None:
    now, wake = 100.0, 100.0 + PERIOD * 0.9  # an earlier claim's renewal, slept until
    # Drawn before it: renewed with it, still within the claim's jitter range.
    drawn = now + PERIOD * 0.8
    assert joined_renewal(drawn, wake, now, PERIOD) == wake
    assert now + PERIOD * JITTER[0] <= wake <= now + PERIOD * JITTER[1]
    # Drawn after it: its own time (the renewer wakes first and sleeps on until then).
    assert joined_renewal(now + PERIOD * 0.95, wake, now, PERIOD) == now + PERIOD * 0.95


@pytest.mark.parametrize(
    "wake",
    [
        math.inf,  # asleep with no lease to renew: woken for this one
        -math.inf,  # awake: it looks at every lease again before sleeping
        100.0 + PERIOD * 1.5,  # past the claim's period (a longer ttl's renewal)
    ],
)
def test_a_claim_keeps_its_own_renewal_time_when_the_renewers_wake_is_no_use(
    wake: float,
) -> None:
    drawn = 100.0 + PERIOD * 0.8
    assert joined_renewal(drawn, wake, 100.0, PERIOD) == drawn


class CountingDriver:
    """A real driver that counts the calls reaching it, by operation."""

    def __init__(self, inner: Any, calls: Counter[str], sizes: list[int]) -> None:
        self._inner = inner
        self._calls = calls
        self._sizes = sizes

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name.startswith("_") or not callable(value):
            return value
        calls, sizes = self._calls, self._sizes

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            if name == "renew_many":
                sizes.append(len(args[0]))
            return value(*args, **kwargs)

        return call


@pytest.fixture
def keeper_calls(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], list[int]]:
    """The calls the worker's keeper (its sync store) sends, by operation, and the size
    of each `renew_many`."""
    calls: Counter[str] = Counter()
    sizes: list[int] = []
    real_connect = worker_module.connect

    def connect(url: str, **options: Any) -> Any:
        store = real_connect(url, **options)
        store._driver = CountingDriver(store._driver, calls, sizes)
        return store

    monkeypatch.setattr(worker_module, "connect", connect)
    return calls, sizes


def test_a_worker_renews_all_its_leases_in_one_call_per_period(
    make_worker: Callable[..., tenure.Worker],
    store: tenure.Store,
    clock: tenure.ManualClock,
    keeper_calls: tuple[Counter[str], list[int]],
) -> None:
    calls, sizes = keeper_calls
    worker = make_worker(concurrency=6, ttl=TTL)
    started: set[str] = set()
    lock = threading.Lock()
    release = threading.Event()

    @worker.handler("q")
    def hold(ctx: tenure.JobContext) -> None:
        with lock:
            started.add(ctx.job_id)
        release.wait(30)

    for index in range(4):
        store.submit(f"first-{index}", queue="q")
    with running(worker):
        wait_until(lambda: len(started) == 4, what="the first four jobs")
        # Two more jobs claimed a little later: out of step with the first four.
        clock.advance(PERIOD / 3)
        for index in range(2):
            store.submit(f"later-{index}", queue="q")
        wait_until(lambda: len(started) == 6, what="the two later jobs")
        for step in range(1, 7):  # 6 periods: 2 TTLs
            clock.advance(PERIOD)
            wait_until(
                lambda: worker.stats()["renewals"] >= 6 * step - 2,  # noqa: B023
                what=f"the renewals of period {step}",
            )
        lost = worker.stats()["leases_lost"]
        release.set()
        wait_until(lambda: worker.stats()["completed"] == 6, what="the jobs completed")
    assert lost == 0
    assert calls["renew"] == 0  # never one lease on its own
    # The later two fell into step with the first four after their first renewal: every
    # call after that renews all six.
    assert sizes[-4:] == [6, 6, 6, 6], sizes
    assert len(sizes) <= 8, sizes
    assert all(job.state == "done" and job.generation == 1 for job in store.jobs(limit=10))


def test_a_keeper_is_stopped_without_waiting_only_while_its_renewer_sleeps(
    store: tenure.Store, leases: list[tenure.Lease], clock: tenure.ManualClock
) -> None:
    # A worker's stop waits on a thread of its own only when a renewal may be on its way.
    in_call, release = threading.Event(), threading.Event()

    class Slow:
        def renew(self, lease: tenure.Lease) -> tenure.Lease:
            in_call.set()
            release.wait(10)
            return store.renew(lease)

    keeper = LeaseKeeper(Slow(), clock, Stats(), renew_every=period)
    keeper.start()
    try:
        handle = LeaseHandle(leases[0], clock)
        keeper.add_many([handle])
        clock.advance(PERIOD)
        assert in_call.wait(10)
        assert keeper.stop_if_idle() is False  # a call on its way: nothing done
        release.set()
        wait_until(lambda: handle.lease is not leases[0], what="the renewal's answer")
        keeper.remove(handle)
        handle.finish(True)
        wait_until(keeper.stop_if_idle, what="the renewer asleep")
        threads = keeper._threads  # its renewer and its watchdog
        wait_until(lambda: not any(t.is_alive() for t in threads), what="the threads' end")
    finally:
        release.set()
        keeper.stop()


def test_a_keepers_threads_start_with_its_first_leases(
    store: tenure.Store, leases: list[tenure.Lease], clock: tenure.ManualClock
) -> None:
    # A run that holds no lease (a burst that finds no job, a worker idle since its start)
    # starts no thread; the first claim starts both, before its handlers run.
    keeper = LeaseKeeper(store, clock, Stats(), renew_every=period)
    renewer, watchdog = keeper._threads
    keeper.start()
    try:
        assert not any(thread.is_alive() for thread in (renewer, watchdog))
        handle = LeaseHandle(leases[0], clock)
        keeper.add_many([handle])
        assert all(thread.is_alive() for thread in (renewer, watchdog))
        keeper.add_many([LeaseHandle(leases[1], clock)])  # started once, not again
        clock.advance(PERIOD)
        wait_until(lambda: handle.lease is not leases[0], what="the first lease's renewal")
    finally:
        keeper.stop()
    assert not any(thread.is_alive() for thread in (renewer, watchdog))


def test_a_keeper_stopped_before_any_lease_starts_no_thread(
    store: tenure.Store, leases: list[tenure.Lease], clock: tenure.ManualClock
) -> None:
    keeper = LeaseKeeper(store, clock, Stats(), renew_every=period)
    keeper.start()
    assert keeper.stop_if_idle()  # no thread to wait for
    keeper.add_many([LeaseHandle(leases[0], clock)])  # a claim that raced the stop
    assert not any(thread.is_alive() for thread in keeper._threads)
