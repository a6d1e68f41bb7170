"""The worker's one retry rule (tenure.worker._retry) and its outage lines, on a manual
clock: what is retried, the backoff schedule, and where it stops."""

from __future__ import annotations

import logging
import random
import threading

import pytest

import tenure
from tenure.worker._retry import RETRY, DeadlinePassed, Outage, RetryRule
from tenure.worker._stats import Stats


def unavailable(unknown: bool = True) -> tenure.StoreUnavailable:
    return tenure.StoreUnavailable("down", operation="complete", outcome_unknown=unknown)


def lost() -> tenure.StoreLost:
    return tenure.StoreLost("gone", operation="renew", outcome_unknown=False)


def schedule(
    rule: RetryRule, clock: tenure.ManualClock, deadline: float, rng: random.Random
) -> list[float]:
    """The waits a caller makes, failing every attempt, until the rule says stop."""
    waits = []
    failures = 0
    while True:
        failures += 1
        wait = rule.next_wait(unavailable(), failures, clock.monotonic(), deadline, rng)
        if wait is None:
            return waits
        waits.append(wait)
        clock.advance(wait)


def test_the_backoff_doubles_up_to_its_cap_with_jitter_within_bounds() -> None:
    rng = random.Random(7)
    for failures, base in [(1, 0.05), (2, 0.1), (3, 0.2), (4, 0.4), (5, 0.5), (9, 0.5)]:
        waits = [RETRY.delay(failures, rng) for _ in range(500)]
        assert all(base * 0.5 <= wait <= base for wait in waits), (failures, min(waits))
        # Jitter spreads the waits over the whole range (workers do not retry in step).
        assert min(waits) < base * 0.55
        assert max(waits) > base * 0.95
    assert RETRY.delay(100, rng) <= RETRY.cap  # no overflow far down the schedule


def test_retries_stop_at_the_deadline_without_starting_a_late_attempt() -> None:
    clock = tenure.ManualClock()
    rng = random.Random(1)
    deadline = clock.monotonic() + 3.0
    waits = schedule(RETRY, clock, deadline, rng)
    assert len(waits) >= 6  # 3 s of backoff: 0.05, 0.1, 0.2, 0.4 then 0.5 at most each
    assert all(wait <= RETRY.cap for wait in waits)
    # The last attempt started with time left to finish before the deadline; the next one
    # would not have had it.
    assert clock.monotonic() + RETRY.attempt_time <= deadline
    assert clock.monotonic() + RETRY.cap * RETRY.jitter[1] + RETRY.attempt_time > deadline - 1e-9
    # Past the deadline: not a single attempt more.
    clock.advance(5)
    assert RETRY.next_wait(unavailable(), 1, clock.monotonic(), deadline, rng) is None


def test_a_longer_lease_allows_more_attempts() -> None:
    rng = random.Random(3)
    clocks = tenure.ManualClock(), tenure.ManualClock()
    short = schedule(RETRY, clocks[0], clocks[0].monotonic() + 1.0, rng)
    long = schedule(RETRY, clocks[1], clocks[1].monotonic() + 10.0, rng)
    assert 0 < len(short) < len(long)


@pytest.mark.parametrize(
    "error",
    [
        tenure.LeaseLost("stale", job_id="J", generation=1),
        tenure.InvalidArgument("result", "not JSON"),
        lost(),
        DeadlinePassed("gave up", operation="complete", outcome_unknown=True),
        RuntimeError("a bug"),
    ],
    ids=["lease-lost", "invalid-argument", "store-lost", "deadline-passed", "bug"],
)
def test_definite_answers_and_a_lost_store_end_the_retries(error: BaseException) -> None:
    assert RETRY.retryable(error) is False
    assert RETRY.next_wait(error, 1, 0.0, 1000.0, random.Random()) is None


def test_store_unavailable_is_retried_whether_or_not_its_outcome_is_known() -> None:
    for unknown in (True, False):
        assert RETRY.next_wait(unavailable(unknown), 1, 0.0, 10.0, random.Random()) is not None


def test_an_outage_is_one_warning_and_one_info_line_however_many_calls_fail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tenure")
    clock = tenure.ManualClock()
    stats = Stats()
    outage = Outage(clock, stats)
    outage.ok()  # no outage: nothing to say
    failing = [
        threading.Thread(target=lambda: [outage.failed(unavailable()) for _ in range(50)])
        for _ in range(4)
    ]
    for thread in failing:
        thread.start()
    for thread in failing:
        thread.join()
    assert outage.active
    clock.advance(2.5)
    for _ in range(3):
        outage.ok()
    assert not outage.active
    records = [r for r in caplog.records if r.name == "tenure"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, "store unavailable: down; retrying"),
        (logging.INFO, "store available again after 2.5 s (200 call(s) failed or went unanswered)"),
    ]
    assert records[1].outage == 2.5  # type: ignore[attr-defined]
    assert stats.snapshot()["outages"] == 1
    # The next outage is a new one.
    outage.failed(unavailable())
    assert stats.snapshot()["outages"] == 2


def test_a_lost_store_is_reported_once_and_is_no_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tenure")
    found: list[tenure.StoreLost] = []
    outage = Outage(tenure.ManualClock(), Stats(), on_lost=found.append)
    first = lost()
    assert outage.failed(first) is False
    outage.store_lost(lost())
    outage.failed(lost())
    assert found == [first]
    assert outage.lost is first
    assert not outage.active
    assert [r for r in caplog.records if r.name == "tenure"] == []  # the worker says it
