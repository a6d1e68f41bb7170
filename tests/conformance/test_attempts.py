"""The attempt history of a job on every store (issue #17): each claim starts an attempt,
each end of that lease ends it, in the same store operation, at store time."""

from __future__ import annotations

from datetime import timedelta

import pytest

import tenure
import tenure.aio
from tenure.models import ATTEMPTS_KEPT


def endings(store: tenure.Store, job_id: str = "J") -> list[tuple[int, str, str | None]]:
    return [(a.generation, a.owner, a.ending) for a in store.attempts(job_id)]


def test_a_job_never_claimed_has_no_attempts(store: tenure.Store) -> None:
    assert store.attempts("nothing") == []
    store.submit("J")
    assert store.attempts("J") == []


def test_claim_then_complete_is_one_completed_attempt_at_store_time(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J")
    started = store.now()
    lease = store.claim("J", "A", 30)
    assert lease is not None
    (open_attempt,) = store.attempts("J")
    assert open_attempt == tenure.Attempt("J", lease.generation, "A", started)
    clock.advance(2.5)
    store.complete(lease, "ok")
    (attempt,) = store.attempts("J")
    assert attempt.ending == tenure.AttemptEnding.COMPLETED
    assert (attempt.started_at, attempt.ended_at) == (started, started + 2.5)
    assert attempt.error is None
    assert attempt.to_dict()["ending"] == "completed"


def test_fail_release_and_lost_end_attempts_in_generation_order(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J", max_attempts=5)
    first = store.claim("J", "A", 30)
    assert first is not None
    store.fail(first, "boom <b>", retry_in=0)
    second = store.claim("J", "B", 30)
    assert second is not None
    store.release(second)
    third = store.claim("J", "C", 1)
    assert third is not None
    clock.advance(5)  # the lease expires; a newer claim takes the job: C lost it
    fourth = store.claim("J", "D", 30)
    assert fourth is not None
    assert fourth.generation == third.generation + 1
    attempts = store.attempts("J")
    assert [(a.generation, a.owner, a.ending) for a in attempts] == [
        (first.generation, "A", "failed"),
        (second.generation, "B", "released"),
        (third.generation, "C", "lost"),
        (fourth.generation, "D", None),
    ]
    assert attempts[0].error == "boom <b>"
    assert attempts[1].error is None
    assert attempts[2].error is None
    assert attempts[2].ended_at == store.get("J").updated_at  # at the claim that took over
    with pytest.raises(tenure.LeaseLost):
        store.complete(third, "late")  # the stale holder changes nothing
    assert store.attempts("J")[2].ending == "lost"


def test_owners_and_errors_that_look_like_json_come_back_as_written(
    store: tenure.Store,
) -> None:
    # Redis ends an attempt by appending to its JSON entry's text: what the owner and the
    # error hold must not be taken for the entry's own fields.
    owner = 'w"en":1,"x":"completed"}\\ é'
    error = 'boom "en":"0","x":"lost"} \\" \u2603 \n end'
    store.submit("J", max_attempts=3)
    first = store.claim("J", owner, 30)
    assert first is not None
    store.fail(first, error, retry_in=0)
    second = store.claim("J", owner, 30)
    assert second is not None
    store.complete(second)
    attempts = store.attempts("J")
    assert [(a.owner, a.ending, a.error) for a in attempts] == [
        (owner, "failed", error),
        (owner, "completed", None),
    ]


def test_cancel_of_a_leased_job_ends_its_attempt_as_cancelled(store: tenure.Store) -> None:
    store.submit("J")
    lease = store.claim("J", "A", 30)
    assert lease is not None
    store.cancel("J", "not needed")
    (attempt,) = store.attempts("J")
    assert (attempt.generation, attempt.ending, attempt.error) == (
        lease.generation,
        "cancelled",
        "not needed",
    )
    assert attempt.ended_at is not None
    with pytest.raises(tenure.LeaseLost):
        store.complete(lease)
    assert store.attempts("J") == [attempt]


def test_cancel_of_a_ready_job_records_no_attempt(store: tenure.Store) -> None:
    store.submit("J")
    store.cancel("J")
    assert store.attempts("J") == []


def test_an_expired_last_attempt_buried_is_dead(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J", max_attempts=1)
    assert store.claim("J", "A", 1) is not None
    clock.advance(5)
    assert store.claim("J", "B", 30) is None  # buried, not claimed
    assert store.get("J").state == "dead"
    assert endings(store) == [(1, "A", "dead")]


def test_a_fail_that_kills_the_job_is_failed(store: tenure.Store) -> None:
    store.submit("J", max_attempts=1)
    lease = store.claim("J", "A", 30)
    assert lease is not None
    store.fail(lease, "last", retry_in=0)
    assert store.get("J").state == "dead"
    assert [(a.ending, a.error) for a in store.attempts("J")] == [("failed", "last")]


def test_requeue_keeps_the_history_and_the_next_claim_adds_to_it(store: tenure.Store) -> None:
    store.submit("J", max_attempts=1)
    lease = store.claim("J", "A", 30)
    assert lease is not None
    store.fail(lease, "boom", retry_in=0)
    store.requeue("J")
    again = store.claim("J", "B", 30)
    assert again is not None
    store.complete(again)
    assert endings(store) == [(1, "A", "failed"), (2, "B", "completed")]


def test_claim_next_claim_many_and_batch_completions_record_attempts(
    store: tenure.Store,
) -> None:
    for job_id in ("J1", "J2", "J3"):
        store.submit(job_id)
    leases = store.claim_many("A", 30, 2)
    assert len(leases) == 2
    assert store.complete_many(leases) == []
    nxt = store.claim_next("B", 30)
    assert nxt is not None
    store.submit("J4")
    lost, (after,) = store.complete_and_claim([nxt], "C", 30, 1)
    assert lost == []
    store.complete(after)
    assert endings(store, "J1") == [(1, "A", "completed")]
    assert endings(store, "J2") == [(1, "A", "completed")]
    assert endings(store, "J3") == [(1, "B", "completed")]
    assert endings(store, "J4") == [(1, "C", "completed")]


def test_delete_and_purge_remove_the_history(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    for job_id in ("J1", "J2"):
        store.submit(job_id)
        lease = store.claim(job_id, "A", 30)
        assert lease is not None
        store.complete(lease)
    store.delete("J1")
    assert store.attempts("J1") == []
    clock.advance(60)
    store.purge(older_than=timedelta(seconds=1))
    assert store.attempts("J2") == []
    store.submit("J2")  # the same id again: a fresh history, above the old generations
    lease = store.claim("J2", "B", 30)
    assert lease is not None
    assert lease.generation > 1
    assert endings(store, "J2") == [(lease.generation, "B", None)]


def test_the_history_keeps_only_the_newest_attempts(store: tenure.Store) -> None:
    store.submit("J", max_attempts=ATTEMPTS_KEPT + 10)
    for _ in range(ATTEMPTS_KEPT + 5):
        lease = store.claim("J", "A", 30)
        assert lease is not None
        store.release(lease)
    attempts = store.attempts("J")
    assert len(attempts) == ATTEMPTS_KEPT
    assert [a.generation for a in attempts] == list(range(6, ATTEMPTS_KEPT + 6))


def test_attempts_refuses_a_bad_job_id(store: tenure.Store) -> None:
    with pytest.raises(tenure.InvalidArgument, match="job_id"):
        store.attempts("")


@pytest.mark.anyio
async def test_attempts_async(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("J")
    lease = await astore.claim("J", "A", 30)
    assert lease is not None
    await astore.complete(lease)
    assert [(a.generation, a.ending) for a in await astore.attempts("J")] == [(1, "completed")]
