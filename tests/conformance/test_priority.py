"""Job priorities and a job's own timeout on every store (issue #18): claims take the highest
priority first and the oldest (available_at, then submission) within a priority, in
claim_next, claim_many and complete_and_claim; expired leases stay claimable in that order;
requeue keeps the priority; submit and submit_many refuse a bad priority or timeout and
change nothing; the timeout round-trips."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import tenure
import tenure.aio
from tests.conformance._support import snapshot

LOW, HIGH = -(2**31), 2**31 - 1


def _ids(leases: list[tenure.Lease]) -> list[str]:
    return [lease.job_id for lease in leases]


def test_claims_take_the_highest_priority_first_then_fifo(store: tenure.Store) -> None:
    for job_id, priority in [("a0", 0), ("b5", 5), ("c-1", -1), ("d5", 5), ("e0", 0), ("f9", 9)]:
        store.submit(job_id, priority=priority)
    first = store.claim_next("W", 30)
    assert first is not None
    assert first.job_id == "f9"
    assert _ids(store.claim_many("W", 30, 10)) == ["b5", "d5", "a0", "e0", "c-1"]
    assert store.get("b5").priority == 5
    assert store.get("c-1").priority == -1


def test_within_a_priority_the_oldest_due_job_goes_first(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("late", priority=1, delay=5)
    store.submit("soon", priority=1, delay=1)
    store.submit("now", priority=1)
    store.submit("low", priority=0)
    assert _ids(store.claim_many("W", 30, 10)) == ["now", "low"]
    clock.advance(5)
    assert _ids(store.claim_many("W", 30, 10)) == ["soon", "late"]


def test_the_extreme_priorities_and_several_queues(store: tenure.Store) -> None:
    store.submit("min", priority=LOW, queue="a")
    store.submit("zero", queue="b")
    store.submit("max", priority=HIGH, queue="b")
    store.submit("one", priority=1, queue="a")
    assert _ids(store.claim_many("W", 30, 10, queues=["a", "b"])) == ["max", "one", "zero", "min"]
    assert store.get("min").priority == LOW


def test_an_expired_lease_is_claimable_again_by_its_priority(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("high", priority=3)
    lease = store.claim_next("A", 5)
    assert lease is not None
    store.submit("low", priority=0)
    store.submit("mid", priority=2)
    clock.advance(6)  # high's lease has expired
    again = store.claim_next("B", 30)
    assert again is not None
    assert (again.job_id, again.generation) == ("high", 2)
    assert _ids(store.claim_many("B", 30, 10)) == ["mid", "low"]


def test_expired_leases_and_ready_jobs_are_claimed_in_one_order(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    # An expired lease is due from its lease's end; ready jobs from when they were made
    # ready: one order over both, priority first, then due time (SQLite reads the two from
    # two indexes since migration 0012).
    store.submit("x2", priority=2)
    store.submit("y1", priority=1)
    store.submit("z1", priority=1)
    assert _ids(store.claim_many("A", 5, 2)) == ["x2", "y1"]  # leases end at 5
    clock.advance(1)
    assert _ids(store.claim_many("A", 2, 1)) == ["z1"]  # its lease ends at 3
    store.submit("r1", priority=1)  # due at 1
    store.submit("r2", priority=2)
    store.submit("r0", priority=0)
    clock.advance(5)  # every lease has expired
    first = store.claim_next("B", 30)
    assert first is not None
    assert first.job_id == "r2"
    assert _ids(store.claim_many("B", 30, 10)) == ["x2", "r1", "z1", "y1", "r0"]
    assert [store.get(job_id).generation for job_id in ("x2", "y1", "z1")] == [2, 2, 2]


def test_complete_and_claim_takes_the_highest_priority_next(store: tenure.Store) -> None:
    store.submit("first", priority=1)
    lease = store.claim_next("W", 30)
    assert lease is not None
    store.submit("low", priority=-5)
    store.submit("urgent", priority=50)
    store.submit("normal")
    lost, claimed = store.complete_and_claim([lease], "W", 30, 2)
    assert lost == []
    assert _ids(claimed) == ["urgent", "normal"]
    jobs = store.complete_and_claim_jobs(claimed, "W", 30, 5)[1]
    assert [(job.job_id, job.priority) for _, job in jobs] == [("low", -5)]


def test_submit_many_carries_priority_and_timeout(store: tenure.Store) -> None:
    jobs = store.submit_many(
        [
            tenure.JobSpec("spec", priority=2, timeout=timedelta(seconds=3)),
            {"job_id": "dict", "priority": 7, "timeout": 1.5},
            {"job_id": "plain"},
        ]
    )
    assert [(job.priority, job.timeout) for job in jobs] == [(2, 3.0), (7, 1.5), (0, None)]
    assert _ids(store.claim_many("W", 30, 10)) == ["dict", "spec", "plain"]
    assert store.get("spec").timeout == 3.0


def test_a_jobs_timeout_round_trips_and_an_existing_job_is_left_alone(
    store: tenure.Store,
) -> None:
    job = store.submit("J", timeout=2.5, priority=4)
    assert (job.timeout, job.priority, job.created) == (2.5, 4, True)
    again = store.submit("J", timeout=9, priority=1)  # idempotent: nothing changes
    assert (again.timeout, again.priority, again.created) == (2.5, 4, False)
    assert store.submit("K").timeout is None
    lease = store.claim("J", "W", 30)
    assert lease is not None
    claimed = store.get("J")
    assert (claimed.timeout, claimed.priority) == (2.5, 4)
    assert claimed.to_dict()["priority"] == 4
    assert claimed.to_dict()["timeout"] == 2.5
    assert [job.priority for job in store.jobs()] == [4, 0]


def test_requeue_keeps_the_priority(store: tenure.Store) -> None:
    store.submit("P", priority=8, timeout=4)
    lease = store.claim_next("W", 30)
    assert lease is not None
    store.complete(lease)
    store.submit("Q", priority=1)
    job = store.requeue("P")
    assert (job.priority, job.timeout) == (8, 4.0)
    assert _ids(store.claim_many("W", 30, 10)) == ["P", "Q"]


def test_a_cancelled_job_of_a_priority_leaves_the_rest_claimable(store: tenure.Store) -> None:
    store.submit("gone", priority=6)
    store.submit("kept", priority=6)
    store.cancel("gone")
    store.delete("gone")
    assert _ids(store.claim_many("W", 30, 10)) == ["kept"]
    assert store.claim_next("W", 30) is None


BAD_PRIORITIES: list[Any] = [True, 1.0, "1", None, 2**31, -(2**31) - 1, 10**30]
BAD_TIMEOUTS: list[Any] = [0, -1, 0.001, float("nan"), float("inf"), "5", True, 10**9]


@pytest.mark.parametrize("priority", BAD_PRIORITIES, ids=repr)
def test_a_bad_priority_is_refused_and_changes_nothing(store: tenure.Store, priority: Any) -> None:
    store.submit("keep")
    before = snapshot(store)
    with pytest.raises(tenure.InvalidArgument, match="priority"):
        store.submit("J", priority=priority)
    with pytest.raises(tenure.InvalidArgument, match=r"jobs\[1\]\.priority"):
        store.submit_many([{"job_id": "K"}, {"job_id": "L", "priority": priority}])
    assert snapshot(store) == before


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_a_bad_timeout_is_refused_and_changes_nothing(store: tenure.Store, timeout: Any) -> None:
    store.submit("keep")
    before = snapshot(store)
    with pytest.raises(tenure.InvalidArgument, match="timeout"):
        store.submit("J", timeout=timeout)
    with pytest.raises(tenure.InvalidArgument, match=r"jobs\[0\]\.timeout"):
        store.submit_many([tenure.JobSpec("K", timeout=timeout)])
    assert snapshot(store) == before


@pytest.mark.anyio
async def test_async_priorities(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("low", priority=-1)
    await astore.submit("high", priority=1, timeout=0.5)
    await astore.submit_many([{"job_id": "mid", "priority": 0}])
    leases = await astore.claim_many("W", 30, 10)
    assert _ids(leases) == ["high", "mid", "low"]
    assert (await astore.get("high")).timeout == 0.5
