"""Paused queues on every store (issue #18): claims skip a paused queue inside their one
statement or script (claim_next, claim_many, complete_and_claim, and so the worker), other
queues are served, resume makes its jobs claimable again, leases already held go on, and
claim of a named job still takes it."""

from __future__ import annotations

import pytest

import tenure
from tenure.stores import open_driver
from tests.conformance._support import LosingReplies

QUEUES = ("a", "b")


def test_a_paused_queue_is_skipped_by_claim_next_and_claim_many(store: tenure.Store) -> None:
    store.submit("A1", queue="a")
    store.submit("B1", queue="b")
    store.submit("A2", queue="a")
    store.pause_queue("a")
    assert store.paused_queues() == ["a"]
    lease = store.claim_next("W", 30, queues=QUEUES)
    assert lease is not None
    assert lease.job_id == "B1"
    assert store.claim_next("W", 30, queues=QUEUES) is None
    assert store.claim_many("W", 30, 10, queues=["a"]) == []
    assert store.get("A1").state == "ready"


def test_resume_makes_the_queue_claimable_again(store: tenure.Store) -> None:
    store.submit("A1", queue="a")
    store.submit("A2", queue="a")
    store.pause_queue("a")
    assert store.claim_many("W", 30, 10, queues=QUEUES) == []
    store.resume_queue("a")
    assert store.paused_queues() == []
    assert [lease.job_id for lease in store.claim_many("W", 30, 10, queues=QUEUES)] == [
        "A1",
        "A2",
    ]


def test_complete_and_claim_completes_but_claims_nothing_of_a_paused_queue(
    store: tenure.Store,
) -> None:
    for job_id in ("A1", "A2"):
        store.submit(job_id, queue="a")
    store.submit("B1", queue="b")
    first = store.claim_next("W", 30, queues=["a"])
    assert first is not None
    assert first.job_id == "A1"
    store.pause_queue("a")
    lost, claimed = store.complete_and_claim([first], "W", 30, 10, queues=QUEUES)
    assert lost == []
    assert [lease.job_id for lease in claimed] == ["B1"]
    assert store.get("A1").state == "done"
    assert store.get("A2").state == "ready"


def test_a_held_lease_of_a_paused_queue_renews_and_completes(store: tenure.Store) -> None:
    store.submit("A1", queue="a")
    lease = store.claim_next("W", 30, queues=["a"])
    assert lease is not None
    store.pause_queue("a")
    lease = store.renew(lease, 60)
    store.complete(lease, "ok")
    assert store.get("A1").state == "done"


def test_an_expired_lease_of_a_paused_queue_is_not_taken_again(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("A1", queue="a")
    assert store.claim_next("W", 10, queues=["a"]) is not None
    store.pause_queue("a")
    clock.advance(11)
    assert store.claim_next("X", 10, queues=["a"]) is None
    store.resume_queue("a")
    lease = store.claim_next("X", 10, queues=["a"])
    assert lease is not None
    assert lease.job_id == "A1"


def test_claim_of_a_named_job_still_takes_it(store: tenure.Store) -> None:
    store.submit("A1", queue="a")
    store.pause_queue("a")
    lease = store.claim("A1", "W", 30)
    assert lease is not None
    assert lease.job_id == "A1"


def test_pause_and_resume_are_idempotent_and_listed_in_order(store: tenure.Store) -> None:
    store.resume_queue("never-paused")
    for queue in ("b", "a", "b"):
        store.pause_queue(queue)
    assert store.paused_queues() == ["a", "b"]
    store.resume_queue("b")
    store.resume_queue("b")
    assert store.paused_queues() == ["a"]


def test_the_pause_is_seen_by_every_client(open_store: object, store: tenure.Store) -> None:
    other = open_store()  # type: ignore[operator]
    store.submit("A1", queue="a")
    store.pause_queue("a")
    assert other.paused_queues() == ["a"]
    assert other.claim_next("W", 30, queues=["a"]) is None


@pytest.mark.parametrize("queue", ["", "x" * 300, 7, None])
def test_bad_queue_names_are_refused(store: tenure.Store, queue: object) -> None:
    for call in (store.pause, store.resume, store.pause_queue, store.resume_queue):
        with pytest.raises(tenure.InvalidArgument) as raised:
            call(queue)  # type: ignore[arg-type]
        assert raised.value.argument == "queue"
    assert store.paused_queues() == []


@pytest.mark.anyio
async def test_async_pause_and_resume(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("A1", queue="a")
    await astore.pause_queue("a")
    assert await astore.paused_queues() == ["a"]
    assert await astore.claim_next("W", 30, queues=["a"]) is None
    await astore.resume_queue("a")
    lease = await astore.claim_next("W", 30, queues=["a"])
    assert lease is not None
    assert lease.job_id == "A1"


def test_a_lost_claim_reply_is_recovered_while_a_queue_is_paused(
    url: str, clock: tenure.ManualClock
) -> None:
    # Regression: Redis's find_leases was sent the paused hash as if it were a candidate
    # set, and failed (WRONGTYPE) once any queue had been paused.
    driver = LosingReplies(open_driver(url, clock), "claim_next")
    store = tenure.Store(driver, clock=clock)
    try:
        store.pause_queue("b")
        store.submit("A1", queue="a")
        lease = store.claim_next("W", 10, queues=QUEUES)
        assert lease is not None
        assert lease.job_id == "A1"
        assert (driver.calls["claim_next"], driver.calls["find_leases"]) == (1, 1)
    finally:
        store.close()
