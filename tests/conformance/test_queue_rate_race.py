"""A fleet-wide queue rate holds under a race of real OS processes, on every backend: eight
worker processes (the queue-limit race's, _limit_race_worker.py) take jobs of one queue
rate-limited to RATE a second with a bucket of BURST, by every kind of claim (claim_next,
claim_many, complete_and_claim, claim of a named job), as fast as they can. Then the
store's own history (`store.attempts`: each lease's start by store time) is checked: in no
window of store time did more leases start than the bucket allows, BURST + RATE times the
window (plus the 1e-5 s of refill the stores forgive for the rounding of store times)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tenure
from tests.conformance._support import run_queue_race

pytestmark = [pytest.mark.races, pytest.mark.slow]

PROCESSES = 8
RATE = 40.0
BURST = 4
JOBS = 150
QUEUE = "rated"
RUN_SECONDS = 0.6
# A token due within 1e-5 s counts as there (the stores' rounding allowance), and float sums.
SLACK = 1e-5 * RATE + 1e-6


def most_over_the_bucket(starts: list[float], rate: float, burst: int) -> float:
    """The largest excess, over every window [s_i, s_j] of the sorted start times, of the
    leases started in it over what a full bucket allows: (j - i + 1) - (burst + rate *
    (s_j - s_i)). At most 0 when the bucket held (give or take SLACK)."""
    ordered = sorted(starts)
    worst = float("-inf")
    for i, first in enumerate(ordered):
        for j in range(i, len(ordered)):
            worst = max(worst, (j - i + 1) - (burst + rate * (ordered[j] - first)))
    return worst


def test_the_checker_finds_a_burst_too_many() -> None:
    assert most_over_the_bucket([0.0, 0.0, 1.0, 2.0], 1.0, 2) <= 0
    assert most_over_the_bucket([0.0, 0.0, 0.1], 1.0, 2) > 0.8
    assert most_over_the_bucket([0.0, 0.5, 0.6, 0.7], 2.0, 1) > 0.5
    assert most_over_the_bucket([], 1.0, 1) == float("-inf")


def test_eight_processes_never_exceed_a_queue_rate(url: str, tmp_path: Path) -> None:
    job_ids = [f"job-{n:04d}" for n in range(JOBS)]
    with tenure.connect(url) as store:
        store.set_queue_rate(QUEUE, RATE, burst=BURST)
        store.submit_many([{"job_id": job_id, "queue": QUEUE} for job_id in job_ids])
        answers = run_queue_race(
            url,
            tmp_path,
            PROCESSES,
            RUN_SECONDS,
            "queue-rate race worker",
            queue=QUEUE,
            jobs=job_ids,
            ttl=0.25,
        )
        granted = {(lease["job"], lease["generation"]) for a in answers for lease in a["leases"]}
        starts = [attempt.started_at for job_id in job_ids for attempt in store.attempts(job_id)]

    assert len(starts) == len(granted)  # every lease granted is in the history, and no other
    assert most_over_the_bucket(starts, RATE, BURST) <= SLACK
    # The race ran against the bucket: it was emptied and refilled more than once.
    assert len(starts) > 2 * BURST
