"""Periodic jobs (issue #18): each tick of a schedule is one job across a fleet, whatever the
workers' clocks say; on every store, with the store's clock and the workers' own as numbers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone

import pytest

import tenure
import tenure.aio
from tenure import JobContext
from tenure._schedule import LATE_GRACE, STALL_GRACE, make_schedule, tick_job_id
from tenure.worker._periodic import Periodic
from tests.worker._support import running, wait_until

pytestmark = pytest.mark.anyio

SKEWS = (-30.0, -7.5, 0.0, 12.25, 30.0)  # seconds each worker's clock is off the store's


def _skewed(clock: tenure.ManualClock, skew: float) -> Callable[[], float]:
    return lambda: clock.time() + skew


async def test_a_skewed_fleet_submits_every_tick_once(
    url: str, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    schedule = make_schedule("beat", "* * * * * *", queue="beat", payload={"n": 1})
    stores = [await tenure.aio.connect(url, clock=clock, store_clock=clock) for _ in SKEWS]
    try:
        fleet = [
            Periodic(s, [schedule], _skewed(clock, skew))
            for s, skew in zip(stores, SKEWS, strict=True)
        ]
        start = clock.time()
        created: Counter[str] = Counter()
        for step in range(240):  # two simulated minutes, half a second a step
            clock.advance(0.5)
            member = fleet[step % len(fleet)]  # each looks at its own pace
            for job in await member.tick():
                created[job.job_id] += job.created is True
            for other in fleet:
                if other is not member and step % 3 == 0:
                    for job in await other.tick():
                        created[job.job_id] += job.created is True
        end = clock.time()
    finally:
        for s in stores:
            await s.close()
    jobs = {job.job_id: job for job in store.jobs(queue="beat", limit=1000)}
    window = [tick_job_id("beat", t) for t in range(int(start) + 1, int(end) - 31)]
    missing = [job_id for job_id in window if job_id not in jobs]
    assert not missing, f"ticks never submitted: {missing[:5]}"
    assert all(created[job_id] == 1 for job_id in jobs), "a tick created twice"
    for job in jobs.values():
        tick = job.job_id.removeprefix("cron:beat:")
        assert job.payload == {"n": 1}
        # Submitted early by a worker ahead: not claimable before its tick by store time.
        assert job.available_at >= _epoch(tick) - 1e-6, job


def _epoch(iso: str) -> float:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


async def test_catch_up_after_an_outage(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    skip = make_schedule("skip", "* * * * *", queue="q", catch_up="skip")
    once = make_schedule("once", "* * * * *", queue="q", catch_up="once")
    start = clock.time()
    member = Periodic(astore, [skip, once], clock.time)
    clock.advance(10 * 60 + 1)  # ten minutes nobody submitted (an outage, a stalled loop)
    jobs = await member.tick()
    ids = sorted(job.job_id for job in jobs)
    latest = (int(start) // 60 + 10) * 60
    if latest > clock.time():
        latest -= 60
    first = (int(start) // 60 + 1) * 60
    assert ids == sorted(
        [tick_job_id("skip", latest), tick_job_id("once", first), tick_job_id("once", latest)]
    )
    assert await member.tick() == []  # nothing more due


async def test_a_running_worker_stalled_for_a_minute_misses_no_tick(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    # A look a minute late (a loop starved of CPU, a slow store call) of a worker that was
    # submitting all along is late, not an outage: every tick it passed is submitted. Only
    # past STALL_GRACE (a clock stepped forward) does the catch-up policy decide again.
    schedule = make_schedule("s", "* * * * * *", queue="q", catch_up="skip")
    member = Periodic(astore, [schedule], clock.time)
    clock.advance(1 + (-clock.time()) % 1)
    await member.tick()
    clock.advance(60)
    late = await member.tick()
    assert len(late) == 60
    assert [job.created for job in late] == [True] * 60
    clock.advance(STALL_GRACE + 60)
    stepped = await member.tick()
    assert len(stepped) == int(LATE_GRACE)  # the last LATE_GRACE seconds' ticks only


async def test_a_tick_already_there_is_not_created_again(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    schedule = make_schedule("s", "* * * * * *", queue="q")
    behind = Periodic(astore, [schedule], _skewed(clock, -5))
    ahead = Periodic(astore, [schedule], _skewed(clock, 5))
    clock.advance(1 + (-clock.time()) % 1)  # to a whole second: ahead sees tick now + 5
    first = await ahead.tick()
    assert [(job.created, job.available_at - job.created_at) for job in first] == [(True, 5.0)]
    clock.advance(10)  # behind's clock reaches that tick now
    again = await behind.tick()
    assert (again[-1].job_id, again[-1].created) == (first[0].job_id, False)
    assert all(job.created for job in again[:-1])  # the ticks before it were behind's to add


def test_a_worker_runs_its_periodic_handler(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store, clock: tenure.ManualClock
) -> None:
    worker = make_worker()
    seen: list[str] = []

    @worker.periodic("*/5 * * * * *", queue="beat", payload="hi", tz="Europe/Paris")
    def beat(ctx: JobContext) -> None:
        seen.append(ctx.job_id)

    def three_run() -> bool:
        clock.advance(0.5)  # the worker's and the store's time go on as the test looks
        return len(seen) >= 3

    with running(worker):
        wait_until(three_run, what="three ticks run")
    assert all(job_id.startswith("cron:beat:") for job_id in seen)
    assert len(set(seen)) == len(seen)


def test_bad_periodic_arguments(make_worker: Callable[..., tenure.Worker]) -> None:
    worker = make_worker()
    with pytest.raises(tenure.InvalidArgument) as caught:
        worker.periodic("nope", queue="q")
    assert caught.value.argument == "cron"
    worker.periodic("* * * * *", queue="q")(lambda ctx: None)
    with pytest.raises(tenure.InvalidArgument) as caught:
        worker.periodic("* * * * *", queue="q")
    assert caught.value.argument == "name"


@pytest.mark.parametrize("catch_up", ["skip", "once"])
async def test_a_fleet_back_from_downtime_catches_up_by_policy(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock, catch_up: str
) -> None:
    schedule = make_schedule("m", "* * * * *", queue="q", catch_up=catch_up)
    clock.advance(60 - clock.time() % 60)  # to a whole minute
    before = Periodic(astore, [schedule], clock.time)
    clock.advance(60)
    [last_run] = await before.tick()  # the tick of this minute, then every worker stops
    clock.advance(10 * 60 + 30)  # ten minutes and a half without a worker
    after = Periodic(astore, [schedule], clock.time)
    await after.resume()
    ids = [job.job_id for job in await after.tick()]
    tick = _epoch(last_run.job_id.removeprefix("cron:m:"))
    latest = tick_job_id("m", tick + 600)
    expected = [tick_job_id("m", tick + 60), latest] if catch_up == "once" else [latest]
    assert ids == expected


async def test_a_worker_on_a_fresh_store_starts_from_now(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    schedule = make_schedule("m", "* * * * *", queue="q", catch_up="once")
    member = Periodic(astore, [schedule], clock.time)
    await member.resume()  # nothing to take up: no tick before its start is its own
    assert await member.tick() == []
