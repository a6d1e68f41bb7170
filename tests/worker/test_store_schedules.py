"""Store schedules run by workers (issue #18): a worker serving the queue submits the ticks
of the store's schedules as of its own ``@worker.periodic`` ones, one job per tick across a
fleet; it reads the list again every SCHEDULES_EVERY seconds of its clock, so an added one
starts and a removed one stops without a restart. Time is the manual clock's."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import pytest

import tenure
import tenure.aio
from tenure import JobContext
from tenure._schedule import make_schedule, tick_job_id
from tenure._validate import DEFAULT_MAX_ATTEMPTS
from tenure.worker import SCHEDULES_EVERY
from tenure.worker._periodic import Periodic
from tests.worker._support import running, wait_until

pytestmark = pytest.mark.anyio

SKEWS = (-7.5, 0.0, 12.25)  # seconds each worker's clock is off the store's


def _skewed(clock: tenure.ManualClock, skew: float) -> Callable[[], float]:
    return lambda: clock.time() + skew


async def test_a_fleet_submits_a_store_schedules_ticks_once_until_it_is_removed(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    fleet = [Periodic(astore, [], _skewed(clock, skew), queues=["beat"]) for skew in SKEWS]
    for member in fleet:
        await member.resume()  # nothing in the store yet: nothing to run
        assert member.schedules == []
    await astore.add_schedule("s", "* * * * * *", queue="beat", payload={"n": 1})
    await astore.add_schedule("other", "* * * * * *", queue="elsewhere")
    start = clock.time()
    created: Counter[str] = Counter()
    for step in range(2 * int(SCHEDULES_EVERY) * 2):  # a minute, half a second a step
        clock.advance(0.5)
        for member in (fleet[step % len(fleet)], fleet[(step + 1) % len(fleet)]):
            for job in await member.tick():
                created[job.job_id] += job.created is True
    assert all(member.schedules[0].name == "s" for member in fleet)  # "other": not served
    jobs = {job.job_id: job for job in await astore.jobs(queue="beat", limit=1000)}
    assert all(created[job_id] == 1 for job_id in jobs), "a tick created twice"
    # Every tick from when the last member read the list (SCHEDULES_EVERY at most) on.
    window = [tick_job_id("s", t) for t in range(int(start + SCHEDULES_EVERY), int(clock.time()))]
    assert [job_id for job_id in window if job_id not in jobs] == []
    assert all(job.payload == {"n": 1} for job in jobs.values())
    assert await astore.jobs(queue="elsewhere") == []

    assert await astore.remove_schedule("s") is True
    clock.advance(SCHEDULES_EVERY + 1)  # every member's next look reads the list again
    for member in fleet:
        assert await member.tick() == []
        assert member.schedules == []
    clock.advance(5)
    assert [await member.tick() for member in fleet] == [[], [], []]


async def test_a_changed_store_schedule_is_followed(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    await astore.add_schedule("s", "* * * * * *", queue="q", payload="old", max_attempts=2)
    member = Periodic(astore, [], clock.time, queues=["q"])
    await member.resume()
    clock.advance(1)
    [first, *_] = await member.tick()
    assert (first.payload, first.max_attempts) == ("old", 2)
    await astore.add_schedule("s", "* * * * * *", queue="q", payload="new")
    clock.advance(SCHEDULES_EVERY)
    jobs = await member.tick()
    assert jobs, "the changed schedule goes on from where it was"
    assert (jobs[-1].payload, jobs[-1].max_attempts) == ("new", DEFAULT_MAX_ATTEMPTS)


async def test_the_workers_own_schedule_of_the_same_name_wins(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    own = make_schedule("beat", "* * * * * *", queue="beat", payload="code")
    await astore.add_schedule("beat", "* * * * * *", queue="beat", payload="store")
    member = Periodic(astore, [own], clock.time, queues=["beat"])
    with caplog.at_level(logging.WARNING, logger="tenure"):
        await member.resume()
        clock.advance(SCHEDULES_EVERY + 1)
        jobs = await member.tick()
    assert jobs
    assert {job.payload for job in jobs} == {"code"}
    assert member.schedules == [own]
    warned = [r for r in caplog.records if "not run by this worker" in r.getMessage()]
    assert len(warned) == 1, "said once, not at every read"


async def test_a_failed_read_is_said_once_and_the_own_schedules_go_on(
    astore: tenure.aio.AsyncStore,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def unreachable() -> list[tenure.StoredSchedule]:
        raise tenure.StoreUnavailable("down", operation="schedules", outcome_unknown=False)

    own = make_schedule("own", "* * * * * *", queue="q")
    await astore.add_schedule("stored", "* * * * * *", queue="q")
    member = Periodic(astore, [own], clock.time, queues=["q"])
    caplog.set_level(logging.INFO, logger="tenure")
    with monkeypatch.context() as patched:
        patched.setattr(astore, "schedules", unreachable)
        await member.resume()
        for _ in range(3):
            clock.advance(1)
            jobs = await member.tick()
            assert [job.job_id.split(":")[1] for job in jobs] == ["own"]
    assert len([r for r in caplog.records if "not read" in r.getMessage()]) == 1
    clock.advance(5)  # the read is tried again, and works: "stored" starts from then
    assert {job.job_id.split(":")[1] for job in await member.tick()} == {"own"}
    clock.advance(1)
    names = {job.job_id.split(":")[1] for job in await member.tick()}
    assert names == {"own", "stored"}
    assert any("read again" in r.getMessage() for r in caplog.records)


def test_a_worker_runs_a_store_schedule(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.add_schedule("s1", "*/5 * * * * *", queue="beat", payload="hi", timezone="Asia/Tokyo")
    worker = make_worker()
    seen: list[str] = []

    @worker.handler("beat")
    def beat(ctx: JobContext) -> None:
        seen.append(ctx.job_id)

    def three_run() -> bool:
        clock.advance(0.5)  # the worker's and the store's time go on as the test looks
        return len(seen) >= 3

    with running(worker):
        wait_until(three_run, what="three ticks of the store schedule run")
    assert all(job_id.startswith("cron:s1:") for job_id in seen)
    assert len(set(seen)) == len(seen)
