"""`Store.queue_stats` stays exact through every operation that changes a job's state or
lease (issue #20: on Redis the counts come from bookkeeping each script keeps, so each
operation is checked): after each step the counts equal those recomputed from the jobs
themselves. Deterministic: manual clock."""

from __future__ import annotations

import tenure
from tests.conformance._support import counted_stats, recomputed_stats


def _check(store: tenure.Store, step: str) -> None:
    assert counted_stats(store) == recomputed_stats(store), step


def test_counts_stay_exact_through_every_operation(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    for index, priority in enumerate((0, 0, -2, 5)):
        store.submit(f"a{index}", queue="alpha", priority=priority)
    store.submit("later", queue="alpha", delay=60)
    store.submit_many([{"job_id": "b0", "queue": "beta"}, {"job_id": "b1", "queue": "beta"}])
    _check(store, "submit, submit_many")
    top = store.claim_next("w", 10, queues=["alpha"])  # a3: priority 5
    held = store.claim("a0", "w", 10)
    assert top is not None
    assert held is not None
    _check(store, "claim_next, claim")
    held = store.renew(held, 30)
    _check(store, "renew")
    clock.advance(15)  # top's lease expired
    _check(store, "expiry by the clock")
    taken = store.claim_next("w2", 10, queues=["alpha"])  # takes the expired lease over
    assert taken is not None
    assert taken.job_id == "a3"
    _check(store, "claim of an expired lease")
    store.complete(taken)
    _check(store, "complete")
    store.fail(held, "boom", retry_in=5)
    _check(store, "fail to retry")
    clock.advance(6)
    _check(store, "a retry falls due")

    store.submit("once", queue="beta", max_attempts=1)
    once = store.claim("once", "w", 10)
    assert once is not None
    store.fail(once, "boom")
    _check(store, "fail to dead")
    b0 = store.claim("b0", "w", 10)
    assert b0 is not None
    store.release(b0)
    _check(store, "release")
    assert store.claim("b1", "w", 10) is not None
    store.cancel("b1", "no longer wanted")
    _check(store, "cancel of a leased job")

    # An expired lease ahead of a ready job in its set: the oldest ready job is the latter.
    store.submit("x0", queue="gamma")
    store.submit("last", queue="gamma", max_attempts=1)
    assert store.claim("x0", "w", 1) is not None
    assert store.claim("last", "w", 1) is not None
    clock.advance(2)
    store.submit("x1", queue="gamma")
    _check(store, "expired leases ahead of a ready job")
    buried = store.claim("last", "w", 10)  # its last attempt: buried
    assert buried is None
    assert store.get("last").state == "dead"
    _check(store, "bury")

    store.requeue("once")
    store.requeue("b1")
    _check(store, "requeue")
    leases = store.claim_many("w", 10, 3, queues=["alpha", "beta", "gamma"])
    assert len(leases) == 3
    _check(store, "claim_many")
    assert store.complete_many(leases[:1]) == []
    _check(store, "complete_many")
    store.complete_and_claim(leases[1:], "w", 10, 2, queues=["alpha", "beta", "gamma"])
    _check(store, "complete_and_claim")
    store.delete("a3")
    _check(store, "delete")
    clock.advance(1)
    assert store.purge(older_than=0) > 0
    _check(store, "purge")
    clock.advance(60)  # "later" falls due
    for lease_queue in ("alpha", "beta", "gamma"):
        while (lease := store.claim_next("w", 10, queues=[lease_queue])) is not None:
            store.complete(lease)
    _check(store, "all done")
    store.purge(older_than=0)
    assert counted_stats(store) == {}
