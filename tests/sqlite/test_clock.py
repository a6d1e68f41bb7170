"""SQLite's store time (manual clocks): within one boot of the host it runs on the boot
clock from an anchor kept in the file, so a wall-clock step, in one process or the whole
host, neither expires a live lease nor freezes store time for anyone; across reboots it
re-anchors at max(host wall clock, floor); a clock without a boot clock gets wall clock and
floor. The real-process version of the same story is test_faketime.py.

The clients are the suite's ``open_store`` (tests/conftest.py): on the test's manual
``clock`` (the host's clocks), or on another clock given by ``on(...)``."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure._clock import BootReading
from tenure._resources import migrations
from tests.backends import sqlite_path

T0 = tenure.ManualClock().time()  # where the test's `clock` starts
TTL = 30.0
HOURS_2 = 7200.0

OpenStore = Callable[..., tenure.Store]


class SkewedProcess:
    """Another process of the same host whose wall clock is ``offset`` off (an NTP step in
    that process alone, `faketime`): it shares the host's monotonic and boot clocks."""

    def __init__(self, host: tenure.ManualClock, offset: float) -> None:
        self.host = host
        self.offset = offset

    def time(self) -> float:
        return self.host.time() + self.offset

    def monotonic(self) -> float:
        return self.host.monotonic()

    def boot(self) -> BootReading:
        return self.host.boot()


class WallOnly:
    """A clock without a boot clock (macOS, Windows, a user's clock)."""

    def __init__(self, host: tenure.ManualClock) -> None:
        self.host = host

    def time(self) -> float:
        return self.host.time()

    def monotonic(self) -> float:
        return self.host.monotonic()


@pytest.fixture
def path(url: str) -> Path:
    """The test's store file."""
    return sqlite_path(url)


def on(clock: tenure.Clock) -> dict[str, Any]:
    """``open_store`` options for a client whose client and store clock are ``clock``."""
    return {"clock": clock, "store_clock": clock}


def claimed(store: tenure.Store, job_id: str = "J") -> tenure.Lease:
    store.submit(job_id)
    lease = store.claim(job_id, "A", TTL)
    assert lease is not None
    return lease


# -- within one boot -------------------------------------------------------------------------


@pytest.mark.parametrize("step", [HOURS_2, -HOURS_2])
def test_a_host_wall_step_does_not_move_store_time(
    open_store: OpenStore, clock: tenure.ManualClock, step: float
) -> None:
    store = open_store()
    assert store.now() == T0
    clock.jump(step)
    assert store.now() == T0
    assert open_store().now() == T0  # a client opened after the step too
    store.submit("J")
    assert store.get("J").as_of == T0  # reads as well as writes
    clock.advance(5)  # real time passes: store time goes with it, at its rate
    assert store.now() == T0 + 5
    clock.jump(-step)
    assert store.now() == T0 + 5


@pytest.mark.parametrize("offset", [HOURS_2, -HOURS_2])
@pytest.mark.parametrize("stepped", ["the host", "one process"])
def test_a_live_lease_survives_a_wall_clock_step(
    open_store: OpenStore, clock: tenure.ManualClock, offset: float, stepped: str
) -> None:
    holder = open_store()
    lease = claimed(holder)
    if stepped == "the host":  # the holder's clock too
        clock.jump(offset)
        skewed = open_store()
    else:
        skewed = open_store(**on(SkewedProcess(clock, offset)))
    assert skewed.now() == T0
    assert skewed.claim("J", "B", TTL) is None
    assert skewed.claim_next("B", TTL) is None
    job = skewed.get("J")
    assert (job.as_of, job.lease_expired) == (T0, False)
    # The holder keeps it past its first TTL by renewing within it, then completes.
    clock.advance(TTL - 1)
    lease = holder.renew(lease)
    assert lease.lease_until == T0 + TTL - 1 + TTL
    clock.advance(TTL - 1)
    assert skewed.claim("J", "B", TTL) is None
    holder.complete(lease, "by A")
    assert (holder.get("J").state, holder.get("J").result) == ("done", "by A")


def test_a_process_ahead_does_not_freeze_store_time(
    open_store: OpenStore, clock: tenure.ManualClock
) -> None:
    # A process two hours ahead writes: with the wall clock and a floor, store time would
    # stand at T0+2h until the host caught up, and no lease taken meanwhile expire.
    holder = open_store()
    holder.submit("first")
    open_store(**on(SkewedProcess(clock, HOURS_2))).submit("other")
    lease = claimed(holder)  # then its holder crashes
    assert lease.lease_until == T0 + TTL
    reclaimer = open_store()
    clock.advance(TTL - 0.5)
    assert reclaimer.claim("J", "B", TTL) is None
    clock.advance(0.5)
    taken = reclaimer.claim("J", "B", TTL)
    assert taken is not None
    assert taken.generation == 2
    assert reclaimer.now() == T0 + TTL


def test_a_first_writer_with_a_wrong_clock_sets_the_boots_anchor(
    open_store: OpenStore, clock: tenure.ManualClock
) -> None:
    # The first write of a boot anchors at its own wall clock, right or wrong: store time is
    # then two hours ahead of the host's clock for the whole boot, but it runs at the real
    # rate, so every lease still lasts its TTL.
    open_store(**on(SkewedProcess(clock, HOURS_2))).submit("first")
    holder = open_store()
    lease = claimed(holder)
    assert lease.lease_until == T0 + HOURS_2 + TTL
    clock.advance(TTL - 0.5)
    assert open_store().claim("J", "B", TTL) is None
    clock.advance(0.5)
    assert open_store().claim("J", "B", TTL) is not None


def test_the_host_sleeping_is_time_passing(
    open_store: OpenStore, clock: tenure.ManualClock
) -> None:
    # The boot clock counts a suspend (CLOCK_MONOTONIC would not): a lease does not outlive
    # the real time its TTL promised because the laptop's lid was closed.
    holder = open_store()
    claimed(holder)
    clock.suspend(TTL)
    assert holder.now() == T0 + TTL
    assert open_store().claim("J", "B", TTL) is not None


def test_reads_do_not_anchor(open_store: OpenStore, clock: tenure.ManualClock) -> None:
    store = open_store()
    store.submit("J")
    late_boot = tenure.ManualClock(T0 + 50, boot_id="boot-2")
    assert open_store(**on(late_boot)).get("J").as_of == T0 + 50  # the time it would anchor at
    clock.jump(-HOURS_2)
    assert store.now() == T0  # the first boot's anchor is untouched


# -- across reboots ---------------------------------------------------------------------------


def test_a_reboot_reanchors_at_the_host_wall_clock(
    open_store: OpenStore, clock: tenure.ManualClock
) -> None:
    store = open_store()
    claimed(store)
    clock.advance(100)
    assert store.now() == T0 + 100
    clock.reboot()
    clock.jump(3600)  # the host was down an hour
    after = open_store()
    assert after.now() == T0 + 3700
    assert after.claim("J", "B", TTL) is not None  # its holder died with the old boot
    clock.jump(-HOURS_2)  # and within the new boot steps are ignored again
    clock.advance(1)
    assert after.now() == T0 + 3701


def test_a_reboot_with_the_wall_clock_behind_reanchors_at_the_floor(
    open_store: OpenStore, clock: tenure.ManualClock
) -> None:
    store = open_store()
    clock.advance(100)
    assert store.now() == T0 + 100
    clock.reboot()
    clock.jump(-HOURS_2)  # the new boot's wall clock is behind the last store time
    after = open_store()
    assert after.now() == T0 + 100  # never backwards
    clock.advance(5)  # and it runs on at the boot clock's rate, not frozen
    assert after.now() == T0 + 105


# -- without a boot clock: wall clock and floor --------------------------------------------


def test_without_a_boot_clock_store_time_is_the_wall_clock_floored(
    open_store: OpenStore, clock: tenure.ManualClock
) -> None:
    store = open_store(**on(WallOnly(clock)))
    lease = claimed(store)
    clock.jump(-100)
    other = open_store(**on(WallOnly(clock)))
    for step in (0, 50, 49.5):  # host time: T0-100, -50, -0.5
        clock.advance(step)
        assert store.now() == T0  # frozen while the host clock is behind
        assert other.claim("J", "B", 10) is None
    clock.advance(TTL)  # host T0+29.5: moving again, from the floor
    assert store.now() == T0 + TTL - 0.5
    assert other.claim("J", "B", TTL) is None
    clock.advance(0.5)  # the lease ends at T0+30 by the wall clock: 130 s after its claim
    assert other.claim("J", "B", TTL) is not None
    with pytest.raises(tenure.LeaseLost):
        store.complete(lease)
    clock.jump(HOURS_2)  # a step ahead is followed (and then floors the store's time)
    assert store.now() == T0 + TTL + HOURS_2
    clock.jump(-HOURS_2)
    assert store.now() == T0 + TTL + HOURS_2


def test_a_client_without_a_boot_clock_leaves_the_anchor_alone(
    open_store: OpenStore, clock: tenure.ManualClock
) -> None:
    store = open_store()
    assert store.now() == T0  # anchored
    clock.jump(-HOURS_2)
    wall_only = open_store(**on(WallOnly(clock)))
    assert wall_only.now() == T0  # the floor
    clock.advance(5)
    assert store.now() == T0 + 5  # still on the boot clock from the same anchor
    assert wall_only.now() == T0 + 5  # and the floor it raised


# -- upgrading a version-1 store file -------------------------------------------------------


def test_a_version_1_store_upgrades_in_place(path: Path, open_store: OpenStore) -> None:
    (number, name, text), *later = migrations("tenure.stores.sqlite")
    assert (number, name) == (1, "0001_initial.sql")
    assert [name for _, name, _ in later][:1] == ["0002_boot_clock.sql"]
    conn = sqlite3.connect(path)
    with conn:  # what the previous tenure made: schema 1, a job at generation 3, a floor
        conn.executescript(text)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO tenure_meta VALUES ('store_id', 'old-store')")
        conn.execute("UPDATE tenure_clock SET floor = ?", (T0 + 500,))
        conn.execute(
            "INSERT INTO tenure_jobs (job_id, queue, state, generation, available_at,"
            " max_attempts, created_at, updated_at)"
            " VALUES ('J', 'default', 'ready', 3, ?, 5, ?, ?)",
            (T0, T0, T0),
        )
    conn.close()
    store = open_store()
    assert store.store_id == "old-store"
    conn = sqlite3.connect(path)
    with conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(tenure_clock)")]
    conn.close()
    assert version == later[-1][0]
    assert {"floor", "boot_id", "anchor_wall", "anchor_boot"} <= set(columns)
    # Never anchored: the first write anchors at max(wall, floor), which is the old floor.
    assert store.now() == T0 + 500
    lease = store.claim("J", "A", TTL)
    assert lease is not None
    assert (lease.generation, lease.lease_until) == (4, T0 + 500 + TTL)
