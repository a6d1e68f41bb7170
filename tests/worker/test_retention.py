"""Worker retention (issue #17): finished jobs older than ``retention`` are purged, by one
worker of the fleet per period, the period counted by the store's clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import tenure
import tenure.aio
from tenure import JobContext
from tenure.worker._retention import RETENTION_JOB, Retention
from tests.worker._support import running, wait_until

pytestmark = pytest.mark.anyio


def _finish(store: tenure.Store, job_id: str) -> None:
    store.submit(job_id)
    lease = store.claim(job_id, "w", 10)
    assert lease is not None
    store.complete(lease, "ok")


async def test_one_worker_purges_per_period(
    url: str, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    _finish(store, "old")
    clock.advance(100)
    _finish(store, "new")
    a = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    b = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    try:
        fleet = [Retention(a, "A", older_than=20, every=30), Retention(b, "B", 20, 30)]
        first = [await member.tick() for member in fleet]
        assert first == [1, None]  # A won the period; B found it taken
        assert [job.job_id for job in store.jobs() if job.queue == "default"] == ["new"]
        schedule = store.get(RETENTION_JOB)
        assert (schedule.state, schedule.available_at) == ("ready", schedule.as_of + 30)
        clock.advance(29)
        assert [await member.tick() for member in fleet] == [None, None]  # not due yet
        clock.advance(1)
        second = [await member.tick() for member in reversed(fleet)]
        assert second == [1, None]  # B went first this time; "new" is 30 s old now
        assert [job.job_id for job in store.jobs() if job.queue == "default"] == []
        assert store.get(RETENTION_JOB).owner == "B"
    finally:
        await a.close()
        await b.close()


async def test_a_schedule_left_finished_is_started_again(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    member = Retention(astore, "A", older_than=50, every=30)
    await member.tick()
    # As if the winner died between its complete and its requeue:
    clock.advance(30)
    lease = await astore.claim(RETENTION_JOB, "crashed", 10)
    assert lease is not None
    await astore.complete(lease)
    clock.advance(29)
    assert await member.tick() is None  # finished only 29 s ago: left alone
    clock.advance(1)
    assert await member.tick() is None  # ... now requeued
    assert await member.tick() == 0  # and the next check runs the period


def test_a_worker_with_retention_purges(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store, clock: tenure.ManualClock
) -> None:
    _finish(store, "old")
    clock.advance(timedelta(days=8).total_seconds())
    store.submit("fresh", queue="q")
    worker = make_worker(retention=timedelta(days=7), retention_every=0.05)

    @worker.handler("q")
    def handle(ctx: JobContext) -> str:
        return "done"

    with running(worker):
        wait_until(lambda: store.get("fresh").state == "done", what="the fresh job done")
        wait_until(lambda: "old" not in {job.job_id for job in store.jobs()}, what="the purge")
    assert store.get("fresh").state == "done"  # finished just now: kept


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"retention": 0}, "retention"),
        ({"retention": -1}, "retention"),
        ({"retention": "7d"}, "retention"),
        ({"retention": float("nan")}, "retention"),
        ({"retention": 60, "retention_every": 0}, "retention_every"),
        ({"retention": 60, "retention_every": 86401}, "retention_every"),
    ],
)
def test_bad_retention_is_refused(options: dict[str, Any], argument: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.Worker("sqlite:///:memory:", **options)
    assert caught.value.argument == argument
