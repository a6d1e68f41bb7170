"""A fleet-wide queue limit holds under a race of real OS processes, on every backend: eight
worker processes take jobs of one queue limited to LIMIT by every kind of claim
(claim_next, claim_many, complete_and_claim, claim of a named job), settle them or let some
expire. Then the store's own history (`store.attempts`: each lease's start and end by store
time) is checked: at no store time did more than LIMIT leases of the queue run. A lease that
expired ends at its last lease_until (what its holder was told by the claim or the last
renewal); one that was completed, released or failed ends when the store says."""

from __future__ import annotations

from pathlib import Path

import pytest

import tenure
from tests.conformance._support import run_queue_race

pytestmark = [pytest.mark.races, pytest.mark.slow]

PROCESSES = 8
LIMIT = 3
JOBS = 150
QUEUE = "limited"
RUN_SECONDS = 0.6
SETTLED = {"completed", "released", "failed"}


def most_running(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals [start, end) that share a moment."""
    # At one instant an end comes before a start: a lease ending at t frees its place for
    # a claim at t (a lease runs while lease_until > now).
    points = sorted([(end, -1) for _, end in intervals] + [(start, 1) for start, _ in intervals])
    running = most = 0
    for _, step in points:
        running += step
        most = max(most, running)
    return most


def lease_intervals(
    store: tenure.Store, job_ids: list[str], told: dict[tuple[str, int], float]
) -> tuple[list[tuple[float, float]], int]:
    """Each lease of the jobs, from its start to its end, in store time: the end the store
    recorded when its holder settled it, else (it expired) the last lease_until it was told;
    and how many expired."""
    intervals, expired = [], 0
    for job_id in job_ids:
        for attempt in store.attempts(job_id):
            if attempt.ending in SETTLED:
                assert attempt.ended_at is not None
                end = attempt.ended_at
            else:
                end = told[(job_id, attempt.generation)]
                expired += 1
            intervals.append((attempt.started_at, end))
    return intervals, expired


def test_the_checker_counts_overlaps() -> None:
    assert most_running([(0, 2), (1, 3), (2, 4)]) == 2
    assert most_running([(0, 5), (1, 2), (1.5, 3)]) == 3
    assert most_running([]) == 0


def test_eight_processes_never_exceed_a_queue_limit(url: str, tmp_path: Path) -> None:
    job_ids = [f"job-{n:04d}" for n in range(JOBS)]
    with tenure.connect(url) as store:
        store.set_queue_limit(QUEUE, LIMIT)
        store.submit_many([{"job_id": job_id, "queue": QUEUE} for job_id in job_ids])
        answers = run_queue_race(
            url,
            tmp_path,
            PROCESSES,
            RUN_SECONDS,
            "queue-limit race worker",
            queue=QUEUE,
            jobs=job_ids,
            ttl=0.25,
            stall_first=lambda i: i == 0,
        )
        told: dict[tuple[str, int], float] = {}
        for answer in answers:
            for lease in answer["leases"]:
                key = (lease["job"], lease["generation"])
                told[key] = max(told.get(key, 0.0), lease["lease_until"])
        intervals, expired = lease_intervals(store, job_ids, told)

    assert len(intervals) == len(told)  # every lease granted is in the history, and no other
    assert most_running(intervals) <= LIMIT
    # The race was run at the limit, with leases that expired and gave their place back.
    assert most_running(intervals) == LIMIT
    assert len(intervals) > 3 * LIMIT
    assert expired, "no lease expired: the limit's release of expired places went untested"
