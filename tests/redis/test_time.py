"""Store time is Redis's TIME: client clocks do not matter, a paused server does.

Real time, short TTLs: these tests take about three seconds together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import tenure

pytestmark = pytest.mark.slow


class OffsetClock:
    """A client whose wall clock is off by ``offset`` seconds (monotonic time is fine)."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def time(self) -> float:
        return time.time() + self.offset

    def monotonic(self) -> float:
        return time.monotonic()


def redis_time(raw: Any) -> float:
    seconds, micros = raw.time()
    return float(seconds) + float(micros) / 1e6


@pytest.mark.parametrize("offset", [3600.0, -3600.0])
def test_client_an_hour_off_neither_steals_nor_loses(
    open_real_store: Callable[..., tenure.Store], raw: Any, offset: float
) -> None:
    skewed = open_real_store(clock=OffsetClock(offset))
    honest = open_real_store()
    skewed.submit("mine")
    honest.submit("theirs")

    # The skewed client's lease is measured on Redis's clock, not its own.
    before = redis_time(raw)
    mine = skewed.claim("mine", "skewed", 0.6)
    after = redis_time(raw)
    assert mine is not None
    assert before + 0.6 <= mine.lease_until <= after + 0.6
    assert abs(skewed.now() - redis_time(raw)) < 0.5
    # ...and its local deadline on its own monotonic clock, unaffected by the offset.
    assert mine.local_deadline <= time.monotonic() + 0.6

    # It cannot steal a live lease, and nobody can steal its own.
    theirs = honest.claim("theirs", "honest", 0.6)
    assert theirs is not None
    assert skewed.claim("theirs", "skewed", 0.6) is None
    assert honest.claim("mine", "honest", 0.6) is None

    # It keeps its lease by renewing within the TTL, for longer than one TTL.
    for _ in range(3):
        time.sleep(0.25)
        mine = skewed.renew(mine)
        assert honest.claim("mine", "honest", 0.6) is None
    skewed.complete(mine, "done")
    assert honest.get("mine").state == "done"

    # The honest lease, not renewed, expires by Redis time; only then is it taken over.
    time.sleep(max(0.0, theirs.lease_until - redis_time(raw)) + 0.05)
    taken = skewed.claim("theirs", "skewed", 0.6)
    assert taken is not None
    assert taken.generation == 2
    with pytest.raises(tenure.LeaseLost):
        honest.complete(theirs)


def test_client_pause_longer_than_the_lease(
    open_real_store: Callable[..., tenure.Store], raw: Any
) -> None:
    """The renewal is sent before the lease expires but reaches Redis only after the
    pause (1 s) outlasted the lease (0.5 s): Redis time decides, so it is refused."""
    holder, other = open_real_store(), open_real_store()
    holder.submit("J")
    lease = holder.claim("J", "A", 0.5)
    assert lease is not None

    raw.execute_command("CLIENT", "PAUSE", 1000, "WRITE")
    started = time.monotonic()
    caught: list[BaseException] = []

    def renew() -> None:
        try:
            holder.renew(lease)
        except BaseException as exc:
            caught.append(exc)

    renewer = threading.Thread(target=renew)
    renewer.start()
    renewer.join(5)
    assert not renewer.is_alive()
    assert time.monotonic() - started >= 0.9  # the renewal really waited for the pause
    assert len(caught) == 1
    assert isinstance(caught[0], tenure.LeaseLost)
    assert "expired" in str(caught[0])

    job = holder.get("J")
    assert job.lease_until == lease.lease_until  # unchanged by the refused renewal
    with pytest.raises(tenure.LeaseLost):
        holder.complete(lease)
    taken = other.claim("J", "B", 10)
    assert taken is not None
    assert taken.generation == 2
