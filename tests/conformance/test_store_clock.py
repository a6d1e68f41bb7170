"""A ``store_clock`` (`tenure.connect`'s hook standing in for the store's own clock) whose
reading is not a number of seconds from 0 to 1e12 (NaN, an infinity: a lease ending then
would never expire) is refused, with `InvalidArgument` naming ``store_clock``, before the
store writes anything: the job stays claimable, the store's time where it was."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

import tenure
import tenure.aio
from tests.conformance._support import snapshot

READINGS = [math.nan, math.inf, -math.inf, -1.0, 1e13]


class Reading:
    """A store clock that reads ``wall``, its monotonic time the test clock's."""

    def __init__(self, wall: float, clock: tenure.ManualClock) -> None:
        self.wall = wall
        self.clock = clock

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.clock.monotonic()


@pytest.mark.parametrize("wall", READINGS, ids=str)
def test_a_claim_on_a_broken_store_clock_is_refused_and_changes_nothing(
    open_store: Callable[..., tenure.Store],
    store: tenure.Store,
    clock: tenure.ManualClock,
    wall: float,
) -> None:
    store.submit("J", queue="q")
    before = snapshot(store)
    broken = open_store(store_clock=Reading(wall, clock))
    calls: dict[str, Callable[[], object]] = {
        "claim": lambda: broken.claim("J", "A", 10),
        "claim_next": lambda: broken.claim_next("A", 10, queues=["q"]),
        "claim_many": lambda: broken.claim_many("A", 10, 5, queues=["q"]),
        "submit": lambda: broken.submit("K", queue="q"),
    }
    for name, call in calls.items():
        with pytest.raises(tenure.InvalidArgument) as caught:
            call()
        assert caught.value.argument == "store_clock", (name, caught.value)
    assert snapshot(store) == before
    assert store.now() == clock.time()  # the store's time was not moved either
    lease = store.claim_next("B", 10, queues=["q"])
    assert lease is not None
    assert (lease.job_id, lease.generation, lease.lease_until) == ("J", 1, clock.time() + 10)


@pytest.mark.anyio
async def test_the_async_store_refuses_it_too(url: str, clock: tenure.ManualClock) -> None:
    good = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    broken = await tenure.aio.connect(url, clock=clock, store_clock=Reading(math.nan, clock))
    try:
        await good.submit("J")
        with pytest.raises(tenure.InvalidArgument) as caught:
            await broken.claim_next("A", 10)
        assert caught.value.argument == "store_clock"
        lease = await good.claim("J", "B", 10)
        assert lease is not None
        assert lease.lease_until == clock.time() + 10
    finally:
        await broken.close()
        await good.close()
