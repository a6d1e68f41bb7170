"""Job control on every store: cancel, requeue, delete, purge, and the generation floor
that keeps a deleted job's tokens from ever being issued again (issue #17)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta

import pytest

import tenure
from tenure.fence import apply_once

HOLDER_OPS: dict[str, Callable[[tenure.Store, tenure.Lease], object]] = {
    "renew": lambda store, lease: store.renew(lease),
    "complete": lambda store, lease: store.complete(lease, "late"),
    "release": lambda store, lease: store.release(lease),
    "fail": lambda store, lease: store.fail(lease, "late", retry_in=0),
}


def claimed(store: tenure.Store, job_id: str = "J", owner: str = "A") -> tenure.Lease:
    lease = store.claim(job_id, owner, 30)
    assert lease is not None
    return lease


def finished(store: tenure.Store, state: str, job_id: str = "J") -> tenure.Job:
    """A job ``job_id`` in the finished ``state``, reached the way users reach it."""
    store.submit(job_id, max_attempts=1)
    lease = claimed(store, job_id)
    if state == "done":
        store.complete(lease, "ok")
    elif state == "dead":
        store.fail(lease, "boom", retry_in=0)
    else:
        store.cancel(job_id, "stop")
    job = store.get(job_id)
    assert job.state == state
    return job


# -- cancel -------------------------------------------------------------------------------


def test_cancel_a_ready_job_keeps_its_generation_and_shows_the_reason(
    store: tenure.Store,
) -> None:
    store.submit("J")
    job = store.cancel("J", "not needed")
    assert (job.state, job.generation, job.error) == ("cancelled", 0, "not needed")
    assert store.get("J").state == tenure.JobState.CANCELLED
    assert store.claim("J", "A", 30) is None  # final: not claimable
    assert store.claim_next("A", 30) is None


def test_cancel_a_scheduled_job(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J", delay=60)
    assert store.cancel("J").state == "cancelled"
    clock.advance(61)
    assert store.claim_next("A", 30) is None  # never becomes due


def test_cancel_without_reason_says_cancelled(store: tenure.Store) -> None:
    store.submit("J")
    assert store.cancel("J").error == "cancelled"


@pytest.mark.parametrize("op", list(HOLDER_OPS))
def test_cancel_a_leased_job_moves_the_generation_and_the_holder_is_told(
    store: tenure.Store, op: str
) -> None:
    store.submit("J")
    lease = claimed(store)
    job = store.cancel("J", "operator")
    assert (job.state, job.generation) == ("cancelled", lease.generation + 1)
    with pytest.raises(tenure.LeaseLost) as caught:
        HOLDER_OPS[op](store, lease)
    error = caught.value
    assert error.reason == "cancelled"
    assert "cancelled" in str(error)
    assert "operator" in str(error)
    assert error.current_generation == lease.generation + 1
    after = store.get("J")
    assert (after.state, after.generation, after.error) == ("cancelled", job.generation, "operator")


def test_a_lease_taken_by_another_is_not_called_cancelled(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J")
    lease = claimed(store)
    clock.advance(31)
    claimed(store, owner="B")
    with pytest.raises(tenure.LeaseLost) as caught:
        store.renew(lease)
    assert caught.value.reason == "claimed"


def test_a_lease_cancelled_then_requeued_is_told_it_was_superseded(
    store: tenure.Store,
) -> None:
    store.submit("J")
    lease = claimed(store)
    store.cancel("J")
    store.requeue("J")
    with pytest.raises(tenure.LeaseLost) as caught:
        store.complete(lease)
    assert caught.value.reason == "superseded"
    assert "generation 2" in str(caught.value)


def test_cancel_twice_answers_as_the_first_time(store: tenure.Store) -> None:
    store.submit("J")
    claimed(store)
    first = store.cancel("J", "once")
    second = store.cancel("J", "twice")
    assert (second.state, second.generation, second.error) == (
        "cancelled",
        first.generation,
        "once",
    )


@pytest.mark.parametrize("state", ["done", "dead"])
def test_cancel_a_finished_job_is_refused_naming_its_state(store: tenure.Store, state: str) -> None:
    before = finished(store, state)
    with pytest.raises(tenure.JobStateConflict) as caught:
        store.cancel("J")
    assert caught.value.state == state
    assert state in str(caught.value)
    assert "'J'" in str(caught.value)
    # What to do, for a caller of the library and of the CLI alike.
    assert "(store.requeue, tenure jobs requeue)" in str(caught.value)
    after = store.get("J")
    assert after == dataclasses.replace(before, as_of=after.as_of)


def test_cancel_missing_job(store: tenure.Store) -> None:
    with pytest.raises(tenure.JobNotFound):
        store.cancel("nope")


def test_fenced_destination_rejects_the_cancelled_holders_late_effect(
    store: tenure.Store, tmp_path: object
) -> None:
    import sqlite3

    ledger = sqlite3.connect(":memory:", isolation_level=None)
    store.submit("J")
    lease = claimed(store)
    store.cancel("J")
    store.requeue("J")
    successor = claimed(store, owner="B")
    assert successor.generation == lease.generation + 2
    assert apply_once(ledger, successor.token, "effect", lambda cur: "new").value == "new"
    with pytest.raises(tenure.StaleToken):
        apply_once(ledger, lease.token, "effect", lambda cur: "late")


@pytest.mark.anyio
async def test_async_cancel_and_requeue(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("J")
    job = await astore.cancel("J", "a")
    assert job.state == "cancelled"
    job = await astore.requeue("J", delay=5)
    assert (job.state, job.available_at) == ("ready", job.as_of + 5)
    with pytest.raises(tenure.JobStateConflict):
        await astore.delete("J")
    await astore.cancel("J")
    assert await astore.delete("J") is None
    with pytest.raises(tenure.JobNotFound):
        await astore.get("J")
    assert await astore.purge(older_than=0) == 0


# -- requeue ------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["done", "dead", "cancelled"])
def test_requeue_a_finished_job_makes_it_claimable_with_the_next_generation(
    store: tenure.Store, state: str
) -> None:
    before = finished(store, state)
    job = store.requeue("J")
    assert (job.state, job.generation, job.attempts) == ("ready", before.generation, 1)
    assert job.result is None
    lease = claimed(store, owner="B")
    assert lease.generation == before.generation + 1
    store.complete(lease, "again")
    assert store.get("J").result == "again"


def test_requeue_with_delay_by_store_clock(store: tenure.Store, clock: tenure.ManualClock) -> None:
    finished(store, "dead")
    job = store.requeue("J", delay=timedelta(seconds=60))
    assert job.available_at == pytest.approx(job.as_of + 60)
    assert store.claim("J", "A", 30) is None
    clock.advance(60)
    assert store.claim("J", "A", 30) is not None


def test_requeue_resets_attempts_on_request(store: tenure.Store) -> None:
    store.submit("J", max_attempts=3)
    for _ in range(3):
        store.fail(claimed(store), "boom", retry_in=0)
    assert store.get("J").state == "dead"
    kept = store.requeue("J")
    assert (kept.attempts, kept.max_attempts) == (3, 4)  # one more attempt
    store.fail(claimed(store), "boom", retry_in=0)
    reset = store.requeue("J", reset_attempts=True)
    assert (reset.attempts, reset.max_attempts) == (0, 4)


@pytest.mark.parametrize("leased", [False, True])
def test_requeue_a_live_job_is_refused(store: tenure.Store, leased: bool) -> None:
    store.submit("J")
    if leased:
        claimed(store)
    with pytest.raises(tenure.JobStateConflict) as caught:
        store.requeue("J")
    assert caught.value.state == ("leased" if leased else "ready")
    assert "(store.cancel, tenure jobs cancel)" in str(caught.value)
    assert store.get("J").state == caught.value.state


def test_requeue_missing_job(store: tenure.Store) -> None:
    with pytest.raises(tenure.JobNotFound):
        store.requeue("nope")


# -- delete, purge and the generation floor ---------------------------------------------


@pytest.mark.parametrize("state", ["done", "dead", "cancelled"])
def test_delete_a_finished_job(store: tenure.Store, state: str) -> None:
    finished(store, state)
    assert store.delete("J") is None
    with pytest.raises(tenure.JobNotFound):
        store.get("J")
    assert store.jobs() == []


@pytest.mark.parametrize("leased", [False, True])
def test_delete_a_live_job_is_refused(store: tenure.Store, leased: bool) -> None:
    store.submit("J")
    if leased:
        claimed(store)
    with pytest.raises(tenure.JobStateConflict):
        store.delete("J")
    assert store.get("J").state == ("leased" if leased else "ready")


def test_delete_missing_job(store: tenure.Store) -> None:
    with pytest.raises(tenure.JobNotFound):
        store.delete("nope")


def _claim_to(store: tenure.Store, clock: tenure.ManualClock, job_id: str, times: int) -> int:
    store.submit(job_id, max_attempts=times + 1)
    lease = None
    for _ in range(times):
        lease = claimed(store, job_id)
        clock.advance(31)
    assert lease is not None
    lease = claimed(store, job_id)
    store.complete(lease, "ok")
    return lease.generation


@pytest.mark.parametrize("how", ["delete", "purge"])
def test_a_deleted_jobs_generation_is_never_issued_again(
    store: tenure.Store, clock: tenure.ManualClock, how: str
) -> None:
    top = _claim_to(store, clock, "x", 4)
    assert top == 5
    if how == "delete":
        store.delete("x")
    else:
        assert store.purge(older_than=0) == 1
    assert store.submit("x").created is True
    again = claimed(store, "x")
    assert again.generation > top
    # The floor holds after another round too.
    store.complete(again, None)
    store.delete("x")
    store.submit("x")
    assert claimed(store, "x").generation > again.generation


def test_purge_by_age_and_state(store: tenure.Store, clock: tenure.ManualClock) -> None:
    finished(store, "done", "old-done")
    finished(store, "dead", "old-dead")
    finished(store, "cancelled", "old-cancelled")
    clock.advance(3600)
    finished(store, "done", "new-done")
    store.submit("ready")
    store.submit("leased")
    claimed(store, "leased")
    assert store.purge(older_than=timedelta(minutes=30), states=["done", "dead"]) == 2
    assert {job.job_id for job in store.jobs()} == {
        "old-cancelled",
        "new-done",
        "ready",
        "leased",
    }
    assert store.purge(older_than=0) == 2
    assert {job.job_id for job in store.jobs()} == {"ready", "leased"}


def test_purge_runs_in_batches(store: tenure.Store) -> None:
    for n in range(25):
        store.submit(f"j{n}")
        store.cancel(f"j{n}")
    store.submit("keep")
    assert store.purge(older_than=0, batch=4) == 25
    assert [job.job_id for job in store.jobs()] == ["keep"]
