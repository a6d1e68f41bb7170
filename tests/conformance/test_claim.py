"""claim, claim_next, claim_many; retry safety of claims (docs/design.md §3)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

import tenure
from tenure.stores import open_driver
from tests.conformance._support import LosingReplies, job_view

T0 = tenure.ManualClock().time()


def test_claim_a_free_job(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J", {"x": 1})
    lease = store.claim("J", "A", 30)
    assert lease is not None
    assert (lease.job_id, lease.owner, lease.generation, lease.attempt) == ("J", "A", 1, 1)
    assert lease.lease_until == T0 + 30
    assert lease.ttl == 30.0
    assert lease.token == tenure.FencingToken("J", 1)
    assert len(lease.secret) >= 16
    assert lease.secret not in repr(lease)
    assert lease.local_deadline <= clock.monotonic() + 30
    job = store.get("J")
    assert (job.state, job.owner, job.generation, job.attempts) == ("leased", "A", 1, 1)
    assert job.lease_until == T0 + 30


def test_claim_accepts_a_timedelta(store: tenure.Store) -> None:
    store.submit("J")
    lease = store.claim("J", "A", timedelta(minutes=2))
    assert lease is not None
    assert lease.ttl == 120.0
    assert lease.lease_until == T0 + 120


def test_claim_held_by_another(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    store.submit("J")
    lease = store.claim("J", "A", 10)
    assert lease is not None
    before = job_view(store.get("J"))
    other = open_store()
    assert other.claim("J", "B", 10) is None
    assert store.claim("J", "A", 10) is None  # the same owner with a new claim: still held
    clock.advance(9.99)
    assert other.claim("J", "B", 10) is None
    assert job_view(store.get("J")) == before


def test_claim_an_expired_lease(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    store.submit("J")
    lease_a = store.claim("J", "A", 10)
    assert lease_a is not None
    clock.advance(10)  # expired at exactly lease_until
    lease_b = open_store().claim("J", "B", 5)
    assert lease_b is not None
    assert (lease_b.owner, lease_b.generation, lease_b.attempt) == ("B", 2, 2)
    assert lease_b.lease_until == T0 + 15
    assert lease_b.secret != lease_a.secret
    job = store.get("J")
    assert (job.state, job.owner, job.generation, job.attempts) == ("leased", "B", 2, 2)


def test_claim_done_dead_or_delayed_job_returns_none(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("done")
    lease = store.claim("done", "A", 10)
    assert lease is not None
    store.complete(lease)
    store.submit("dead", max_attempts=1)
    lease = store.claim("dead", "A", 10)
    assert lease is not None
    store.fail(lease, "boom")
    store.submit("later", delay=60)
    before = [job_view(store.get(j)) for j in ("done", "dead", "later")]
    for job_id in ("done", "dead", "later"):
        assert store.claim(job_id, "B", 10) is None, job_id
    clock.advance(59)
    for job_id in ("done", "dead", "later"):
        assert store.claim(job_id, "B", 10) is None, job_id
    assert [job_view(store.get(j)) for j in ("done", "dead", "later")] == before


def test_claim_missing_job(store: tenure.Store) -> None:
    with pytest.raises(tenure.JobNotFound) as caught:
        store.claim("nope", "A", 10)
    assert caught.value.job_id == "nope"
    assert "'nope'" in str(caught.value)
    assert store.jobs() == []


def test_every_claim_bumps_generation_and_attempts(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J", max_attempts=10)
    generations = []
    for round_ in range(6):
        lease = store.claim("J", f"w{round_}", 1)
        assert lease is not None
        generations.append(lease.generation)
        assert lease.attempt == round_ + 1
        clock.advance(1)
    assert generations == [1, 2, 3, 4, 5, 6]


# -- retries of a claim whose reply was lost -------------------------------------------


def test_driver_claim_repeated_with_the_same_secret_changes_nothing(
    url: str, clock: tenure.ManualClock
) -> None:
    driver = open_driver(url, clock)
    try:
        store = tenure.Store(driver, clock=clock)
        store.submit("J")
        first = driver.claim("J", "A", 10.0, "h" * 64)
        assert first.status == "applied"
        assert first.row is not None
        assert first.row.generation == 1
        clock.advance(1)
        again = driver.claim("J", "A", 10.0, "h" * 64)
        assert again.status != "applied"  # nothing new was granted
        assert again.row is not None
        assert (again.row.generation, again.row.attempts, again.row.owner) == (1, 1, "A")
        assert again.row.secret_hash == "h" * 64
        assert again.row.lease_until == T0 + 10
    finally:
        driver.close()


def test_retried_claim_returns_the_same_lease(url: str, clock: tenure.ManualClock) -> None:
    driver = LosingReplies(open_driver(url, clock), "claim")
    store = tenure.Store(driver, clock=clock)
    try:
        store.submit("J")
        lease = store.claim("J", "A", 10)
        assert driver.calls["claim"] == 2  # the first reply was lost, the store retried
        assert lease is not None
        assert (lease.generation, lease.attempt, lease.lease_until) == (1, 1, T0 + 10)
        job = store.get("J")
        assert (job.state, job.owner, job.generation, job.attempts) == ("leased", "A", 1, 1)
        store.complete(lease)  # the secret the store kept is the one in the lease
        assert store.get("J").state == "done"
    finally:
        store.close()


# -- claim_next and claim_many ---------------------------------------------------------


def test_claim_next_empty(store: tenure.Store) -> None:
    assert store.claim_next("A", 10) is None
    assert store.claim_many("A", 10, 5) == []
    store.submit("J", queue="other")
    assert store.claim_next("A", 10) is None
    assert store.claim_next("A", 10, queues=["nothing-here"]) is None


def test_claim_next_oldest_first(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("late", delay=5)  # available at T0+5
    store.submit("first")  # T0, submitted before "second"
    store.submit("second")  # T0
    clock.advance(1)
    store.submit("third")  # T0+1
    clock.advance(10)
    order = []
    while (lease := store.claim_next("A", 100)) is not None:
        order.append(lease.job_id)
    assert order == ["first", "second", "third", "late"]


def test_claim_next_orders_expired_leases_by_their_end(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("x")
    lease = store.claim("x", "A", 3)  # available again at T0+3
    assert lease is not None
    store.submit("y", delay=5)  # T0+5
    store.submit("z", delay=2)  # T0+2
    clock.advance(10)
    order = [lease.job_id for lease in store.claim_many("B", 100, 10)]
    assert order == ["z", "x", "y"]


def test_a_lease_renewed_shorter_is_claimable_when_its_shorter_lease_ends(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    """A renewal may shorten a lease (a smaller TTL): the job is claimable again when the
    shortened lease ends, not at the end it was first given. (PostgreSQL's expired-lease
    path walks leases by the earliest end each was given, migration 0013: a shortened one
    must be among them.)"""
    store.submit("long")
    lease = store.claim("long", "A", 100)
    assert lease is not None
    clock.advance(1)
    renewed = store.renew(lease, 5)
    assert renewed.lease_until == T0 + 6
    clock.advance(4.5)
    assert store.claim_next("B", 10) is None
    clock.advance(0.5)
    taken = store.claim_next("B", 10)
    assert taken is not None
    assert (taken.job_id, taken.generation, taken.owner) == ("long", 2, "B")
    # Lengthened again after a shortening, the lease holds to its new end.
    clock.advance(1)
    again = store.renew(store.renew(taken, 2), 50)
    clock.advance(10)
    assert store.claim_many("C", 10, 10) == []
    clock.advance(41)
    retaken = store.claim_many("C", 10, 10)
    assert [(x.job_id, x.generation) for x in retaken] == [("long", 3)]
    assert again.lease_until == T0 + 7 + 50


def test_claim_next_skips_held_and_takes_expired(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    store.submit("held")
    store.submit("expiring")
    store.submit("free")
    held = store.claim("held", "A", 100)
    expiring = store.claim("expiring", "A", 5)
    assert held is not None
    assert expiring is not None
    other = open_store()
    first = other.claim_next("B", 10)
    assert first is not None
    assert first.job_id == "free"
    assert other.claim_next("B", 10) is None
    clock.advance(5)
    taken = other.claim_next("B", 10)
    assert taken is not None
    assert (taken.job_id, taken.generation, taken.owner) == ("expiring", 2, "B")
    assert other.claim_next("B", 10) is None


def test_claim_next_over_several_queues(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("q1-a", queue="q1", delay=1)
    store.submit("q2-a", queue="q2")
    store.submit("q3-a", queue="q3")
    store.submit("q1-b", queue="q1", delay=2)
    clock.advance(5)
    assert store.claim_next("A", 10, queues=["nope"]) is None
    got = []
    while (lease := store.claim_next("A", 10, queues=("q1", "q2"))) is not None:
        got.append(lease.job_id)
    assert got == ["q2-a", "q1-a", "q1-b"]  # oldest across the queues, q3 untouched
    assert store.get("q3-a").state == "ready"
    lease = store.claim_next("A", 10, queues=["q3", "q3"])
    assert lease is not None
    assert lease.job_id == "q3-a"


def test_claim_next_default_queue_only(store: tenure.Store) -> None:
    store.submit("elsewhere", queue="mail")
    store.submit("here")
    lease = store.claim_next("A", 10)
    assert lease is not None
    assert lease.job_id == "here"
    assert store.claim_next("A", 10) is None


def test_claim_many(store: tenure.Store, clock: tenure.ManualClock) -> None:
    for i in range(5):
        store.submit(f"j{i}")
        clock.advance(0.5)
    leases = store.claim_many("A", 10, 3)
    assert [lease.job_id for lease in leases] == ["j0", "j1", "j2"]
    assert all(lease.generation == 1 and lease.owner == "A" for lease in leases)
    assert len({lease.secret for lease in leases}) == 3
    rest = store.claim_many("B", 10, 10)
    assert [lease.job_id for lease in rest] == ["j3", "j4"]
    assert store.claim_many("C", 10, 10) == []
    for lease in leases + rest:
        store.complete(lease)  # every lease is real and independent
    assert {job.state for job in store.jobs()} == {"done"}


def test_claim_many_limit_1000(store: tenure.Store) -> None:
    store.submit("J")
    leases = store.claim_many("A", 10, 1000)
    assert [lease.job_id for lease in leases] == ["J"]


def test_claim_next_leaves_not_yet_due_jobs(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("soon", delay=1)
    assert store.claim_next("A", 10) is None
    clock.advance(1)
    lease = store.claim_next("A", 10)
    assert lease is not None
    assert lease.job_id == "soon"
