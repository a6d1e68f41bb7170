"""The keeper's own connection is opened on demand (`OnDemandStore`): half a renewal period
ahead of the first renewal, never by a worker whose leases all end before that, and by the
renewal itself when the early open failed."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import tenure
from tenure.worker._keeper import LeaseKeeper
from tenure.worker._lease import LeaseHandle
from tenure.worker._renewer_store import OnDemandStore
from tenure.worker._stats import Stats
from tests.worker._support import running, wait_until

TTL = 10.0
PERIOD = TTL / 3


def period(_lease: tenure.Lease) -> float:
    return PERIOD


def test_nothing_is_opened_until_asked_and_a_close_before_that_closes_nothing() -> None:
    opened: list[str] = []
    store = OnDemandStore(lambda: opened.append("opened"))  # type: ignore[arg-type,func-returns-value]
    assert not store.is_open
    store.close()
    assert opened == []


def test_a_renewal_opens_the_connection_once_and_close_closes_it(
    open_store: Callable[..., tenure.Store], store: tenure.Store
) -> None:
    opened: list[tenure.Store] = []
    on_demand = OnDemandStore(lambda: opened.append(open_store()) or opened[-1])  # type: ignore[func-returns-value]
    store.submit("a")
    store.submit("b")
    first, second = store.claim_many("A", TTL, 2)
    renewed = on_demand.renew(first)
    assert renewed.generation == first.generation == 1
    assert [answer.job_id for answer in on_demand.renew_many([second])] == ["b"]  # type: ignore[union-attr]
    assert len(opened) == 1
    assert on_demand.is_open
    closed: list[tenure.Store] = []
    opened[0].close = lambda: closed.append(opened[0])  # type: ignore[method-assign]
    on_demand.close()
    assert closed == opened
    assert not on_demand.is_open


def test_a_connection_arriving_after_close_is_closed_and_the_renewal_refused(
    open_store: Callable[..., tenure.Store], store: tenure.Store
) -> None:
    # The worker stopped while its renewer was still connecting (its stop waits 5 s at
    # most): the late connection must not be left open.
    arrived = threading.Event()
    go_on = threading.Event()
    late: list[tenure.Store] = []

    def slow_open() -> tenure.Store:
        arrived.set()
        go_on.wait(10)
        late.append(open_store())
        closes: list[bool] = []
        late[0].close = lambda: closes.append(True)  # type: ignore[method-assign]
        late.append(closes)  # type: ignore[arg-type]
        return late[0]

    on_demand = OnDemandStore(slow_open)
    store.submit("a")
    (lease,) = store.claim_many("A", TTL, 1)
    errors: list[BaseException] = []

    def renew() -> None:
        try:
            on_demand.renew(lease)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=renew)
    thread.start()
    assert arrived.wait(10)
    on_demand.close()
    go_on.set()
    thread.join(10)
    assert late[1] == [True]  # closed as it arrived
    assert isinstance(errors[0], tenure.StoreUnavailable)
    assert not on_demand.is_open


@contextmanager
def _keeping_a_lease(
    on_demand: OnDemandStore, store: tenure.Store, clock: tenure.ManualClock
) -> Iterator[tuple[LeaseHandle, tenure.Lease]]:
    """A keeper over ``on_demand`` keeping one new lease (its handle, the lease as claimed);
    stopped after, the lease never lost."""
    keeper = LeaseKeeper(on_demand, clock, Stats(), renew_every=period, rng=random.Random(3))
    store.submit("a")
    (lease,) = store.claim_many("A", TTL, 1)
    handle = LeaseHandle(lease, clock)
    keeper.start()
    try:
        keeper.add_many([handle])
        yield handle, lease
    finally:
        keeper.stop()
        on_demand.close()
    assert not handle.is_lost()


def test_the_keeper_opens_half_a_period_ahead_of_its_first_renewal(
    open_store: Callable[..., tenure.Store], store: tenure.Store, clock: tenure.ManualClock
) -> None:
    opens: list[float] = []
    renewals: list[tuple[float, bool]] = []  # (when, whether the connection was open then)

    def open_now() -> tenure.Store:
        opens.append(clock.monotonic())
        return open_store()

    on_demand = OnDemandStore(open_now)
    renew_many = on_demand.renew_many

    def recorded(leases: Any) -> Any:
        renewals.append((clock.monotonic(), on_demand.is_open))
        return renew_many(leases)

    on_demand.renew_many = recorded  # type: ignore[method-assign]
    with _keeping_a_lease(on_demand, store, clock) as (handle, lease):
        renew_at = handle.next_renew_at
        open_at = renew_at - PERIOD / 2
        clock.advance(open_at - clock.monotonic() - 0.01)
        threading.Event().wait(0.2)  # the renewer looks at least every TICK (0.05 s)
        assert opens == []
        clock.advance(0.02)
        wait_until(lambda: opens, what="the early open")
        assert open_at <= opens[0] < renew_at
        assert renewals == []
        clock.advance(renew_at - clock.monotonic())
        wait_until(lambda: renewals, what="the first renewal")
        assert renewals[0][1] is True  # the renewal did not wait for a connect
        wait_until(lambda: handle.lease.local_deadline > lease.local_deadline, what="renewed")
        assert len(opens) == 1


def test_a_failed_early_open_is_tried_again_by_the_renewal(
    open_store: Callable[..., tenure.Store], store: tenure.Store, clock: tenure.ManualClock
) -> None:
    tries: list[float] = []

    def flaky_open() -> tenure.Store:
        tries.append(clock.monotonic())
        if len(tries) == 1:
            raise tenure.StoreUnavailable("connect: refused", operation="connect")
        return open_store()

    on_demand = OnDemandStore(flaky_open)
    with _keeping_a_lease(on_demand, store, clock) as (handle, lease):
        renew_at = handle.next_renew_at
        clock.advance(renew_at - PERIOD / 2 - clock.monotonic())
        wait_until(lambda: tries, what="the early open")
        threading.Event().wait(0.2)
        assert len(tries) == 1  # not tried again before the renewal
        clock.advance(renew_at - clock.monotonic())
        wait_until(lambda: handle.lease.local_deadline > lease.local_deadline, what="renewed")
        assert len(tries) == 2
        assert tries[1] >= renew_at  # by the renewal itself


@pytest.mark.parametrize("job_length", [0.3, 1.9])
def test_a_worker_opens_its_keepers_connection_only_for_jobs_that_near_a_renewal(
    make_worker: Callable[..., tenure.Worker],
    store: tenure.Store,
    clock: tenure.ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    job_length: float,
) -> None:
    # ttl 10: each claim is renewed 2.5-3.3 s after it, and its connection opened 1.7 s
    # before that, so from 0.8 s at the earliest to 1.7 s at the latest.
    from tenure.worker import _worker as worker_module

    opened: list[tenure.Store] = []
    real_connect = worker_module.connect
    monkeypatch.setattr(
        worker_module,
        "connect",
        lambda url, **o: opened.append(real_connect(url, **o)) or opened[-1],
    )
    worker = make_worker(concurrency=1)
    started, release = threading.Event(), threading.Event()

    @worker.handler("default")
    def job(ctx: tenure.JobContext) -> str:
        started.set()
        release.wait(10)
        return "done"

    store.submit("a")
    with running(worker):
        assert started.wait(10)
        clock.advance(job_length)
        threading.Event().wait(0.3)  # the renewer looks at least every TICK (0.05 s)
        release.set()
        wait_until(lambda: worker.stats()["completed"] == 1, what="the job's completion")
    assert len(opened) == (1 if job_length > 1.7 else 0)
    assert store.get("a").result == "done"
