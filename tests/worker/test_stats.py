"""`Stats`: the handler-duration histogram and the counters the event loop keeps alone."""

from __future__ import annotations

import pytest

from tenure.worker import HANDLER_BUCKETS, Stats


def test_handler_durations_count_every_handler_the_slowest_past_every_bound() -> None:
    stats = Stats()
    slowest = HANDLER_BUCKETS[-1] + 1.0  # past the last bound: counted in +Inf only
    for seconds in (0.001, 0.001, 0.2, slowest):
        stats.handled("mail", "ok", seconds)
    stats.handled("mail", "error", 0.02)
    durations = stats.durations()
    cumulative, total, count = durations[("mail", "ok")]
    assert count == 4  # the +Inf bucket, which Prometheus reads as the count
    assert total == pytest.approx(0.202 + slowest)
    assert len(cumulative) == len(HANDLER_BUCKETS)
    assert cumulative[0] == 2  # <= 5 ms
    assert cumulative[HANDLER_BUCKETS.index(0.25)] == 3
    assert cumulative[-1] == 3  # <= the last bound: not the slowest
    assert durations[("mail", "error")][2] == 1


def test_completed_is_counted_on_the_loop_and_snapshot_in_its_place() -> None:
    stats = Stats()
    stats.incr("claimed", 3)
    stats.on_loop["completed"] += 2
    snapshot = stats.snapshot()
    assert (snapshot["claimed"], snapshot["completed"]) == (3, 2)
    names = list(snapshot)
    assert names.index("claimed") < names.index("completed") < names.index("failed")
    with pytest.raises(AssertionError, match="on_loop"):
        stats.incr("completed")
