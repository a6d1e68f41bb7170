"""A store schedule in a zone file of the host's own ("localtime", "posixrules", "right/...")
rather than an IANA zone: `add_schedule` refuses one now, but a store may hold one written
by an older tenure. A worker does not run it (its ticks would fall at different instants on
different hosts), says so once, and runs the store's other schedules."""

from __future__ import annotations

import logging

import pytest

import tenure
import tenure.aio
from tenure._schedule import ScheduleRow, upcoming
from tenure._validate import DEFAULT_MAX_ATTEMPTS
from tenure.worker import SCHEDULES_EVERY
from tenure.worker._periodic import Periodic

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "right/UTC"])
async def test_a_stored_schedule_in_a_hosts_own_zone_is_skipped_with_a_log_line(
    astore: tenure.aio.AsyncStore,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
    zone: str,
) -> None:
    # As an older tenure wrote it: the driver stores what it is given.
    row = ScheduleRow("local", "* * * * * *", "beat", None, zone, "skip", DEFAULT_MAX_ATTEMPTS)
    await astore._driver.put_schedule(row)
    await astore.add_schedule("utc", "* * * * * *", queue="beat")
    stored = {s.name: s for s in await astore.schedules()}
    assert stored["local"].timezone == zone  # listed as it is, for an operator to fix
    assert upcoming(stored["local"].cron, zone, clock.time()) is None  # (CLI, dashboard)
    member = Periodic(astore, [], clock.time, queues=["beat"])
    with caplog.at_level(logging.WARNING, logger="tenure"):
        await member.resume()
        for _ in range(3):
            clock.advance(1)
            await member.tick()
        clock.advance(SCHEDULES_EVERY + 1)  # the list is read again: still not run
        assert await member.tick()
    assert [schedule.name for schedule in member.schedules] == ["utc"]
    jobs = await astore.jobs(queue="beat", limit=1000)
    assert jobs
    assert {job.job_id.split(":")[1] for job in jobs} == {"utc"}
    warned = [r.getMessage() for r in caplog.records if "not run by this worker" in r.getMessage()]
    assert len(warned) == 1, "said once, not at every read"
    assert "store schedule local" in warned[0]
    assert "not an IANA time zone name" in warned[0]
