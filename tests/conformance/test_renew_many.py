"""renew_many: many renewals in one store operation, each checked as `renew` is."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta

import pytest

import tenure
import tenure.aio
from tenure.stores import open_driver
from tests.conformance._support import LosingReplies, claim_all, forge, job_view, snapshot

T0 = tenure.ManualClock().time()


def test_renews_each_lease_by_its_own_ttl_at_one_store_time(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    (a,) = claim_all(store, "a", ttl=10)
    (b,) = claim_all(store, "b", ttl=20)
    clock.advance(3)
    renewed = store.renew_many([a, b])
    assert all(isinstance(lease, tenure.Lease) for lease in renewed)
    new_a, new_b = renewed
    assert isinstance(new_a, tenure.Lease)
    assert isinstance(new_b, tenure.Lease)
    assert (new_a.job_id, new_a.ttl, new_a.lease_until) == ("a", 10, T0 + 13)
    assert (new_b.job_id, new_b.ttl, new_b.lease_until) == ("b", 20, T0 + 23)
    for old, new in ((a, new_a), (b, new_b)):
        # The same lease, extended: no new generation, owner or secret.
        assert (new.owner, new.generation, new.secret) == (old.owner, old.generation, old.secret)
        job = store.get(new.job_id)
        assert (job.state, job.lease_until, job.updated_at) == ("leased", new.lease_until, T0 + 3)
    clock.advance(9)  # past a's first expiry (T0 + 10), before its renewed one
    assert store.claim("a", "B", 10) is None
    store.complete(new_a, "done by A")
    assert store.get("a").result == "done by A"


def test_a_ttl_for_the_whole_batch(store: tenure.Store, clock: tenure.ManualClock) -> None:
    a, b = claim_all(store, "a", "b", ttl=10)
    renewed = store.renew_many([a, b], timedelta(seconds=45))
    assert [(lease.ttl, lease.lease_until) for lease in renewed] == [  # type: ignore[union-attr]
        (45, T0 + 45),
        (45, T0 + 45),
    ]
    clock.advance(1)
    shorter = store.renew_many(renewed, 2.5)  # type: ignore[arg-type]
    assert [lease.lease_until for lease in shorter] == [T0 + 3.5, T0 + 3.5]  # type: ignore[union-attr]


def test_a_shortened_lease_expires_when_it_says(
    open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    """A renewal may shorten a lease: claims must find it expired at its new end, not at
    the end it had (PostgreSQL indexes leases by the earliest end they were ever given)."""
    a_store, b_store = open_store(), open_store()
    (lease,) = claim_all(a_store, "a", ttl=60)
    (shortened,) = a_store.renew_many([lease], 2)
    assert isinstance(shortened, tenure.Lease)
    clock.advance(2.5)
    (taken,) = b_store.claim_many("B", 10, 1)
    assert (taken.job_id, taken.generation) == ("a", 2)
    (lost,) = a_store.renew_many([shortened])
    assert isinstance(lost, tenure.LeaseLost)
    assert (lost.current_generation, lost.current_owner) == (2, "B")


def test_an_empty_batch_does_nothing(store: tenure.Store) -> None:
    claim_all(store, "a")
    before = snapshot(store)
    assert store.renew_many([]) == []
    assert store.renew_many((), 10) == []
    assert snapshot(store) == before


def test_stale_leases_are_answered_lost_and_change_nothing_while_the_rest_renew(
    open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    a_store, b_store = open_store(), open_store()
    live, expired, reclaimed, forged, released, completed = claim_all(
        a_store, "live", "expired", "reclaimed", "forged", "released", "completed", ttl=10
    )
    a_store.renew(live, 30)
    a_store.renew(reclaimed, 5)
    a_store.renew(forged, 30)
    a_store.renew(released, 30)
    a_store.renew(completed, 30)
    a_store.release(released)
    a_store.complete(completed, "c")
    clock.advance(11)  # "expired" and "reclaimed" expired; "live" still has 19 s
    reclaimed_by_b = b_store.claim("reclaimed", "B", 10)
    assert reclaimed_by_b is not None
    assert reclaimed_by_b.generation == 2
    wrong_secret = forge(forged, secret="0" * 48)
    wrong_owner = forge(live, owner="Z")
    ghost = forge(live, job_id="never-submitted")
    before = {job.job_id: job_view(job) for job in a_store.jobs(limit=100)}

    answers = a_store.renew_many(
        [expired, reclaimed, wrong_secret, released, completed, ghost, live], 20
    )

    *lost, renewed = answers
    assert all(isinstance(error, tenure.LeaseLost) for error in lost), answers
    assert [(e.job_id, e.generation) for e in lost] == [  # type: ignore[union-attr]
        ("expired", 1),
        ("reclaimed", 1),
        ("forged", 1),
        ("released", 1),
        ("completed", 1),
        ("never-submitted", 1),
    ]
    by_job = {error.job_id: error for error in lost}  # type: ignore[union-attr]
    assert "renew rejected for job 'reclaimed' generation 1" in str(by_job["reclaimed"])
    assert (by_job["reclaimed"].current_generation, by_job["reclaimed"].current_owner) == (2, "B")
    assert "expired" in str(by_job["expired"])
    assert "no longer exists" in str(by_job["never-submitted"])
    assert isinstance(renewed, tenure.Lease)
    assert (renewed.job_id, renewed.lease_until) == ("live", T0 + 31)
    after = {job.job_id: job_view(job) for job in a_store.jobs(limit=100)}
    for job_id in ("expired", "reclaimed", "forged", "released", "completed"):
        assert after[job_id] == before[job_id], job_id
    # A lease under another owner's name is refused on its own as well.
    (refused,) = a_store.renew_many([wrong_owner])
    assert isinstance(refused, tenure.LeaseLost)
    assert a_store.get("live").lease_until == T0 + 31
    # B's lease on the reclaimed job is intact.
    b_store.complete(reclaimed_by_b, "b's")
    assert a_store.get("reclaimed").result == "b's"


def test_the_answers_match_single_renewals(
    open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    """What the batch says of each lease is what `renew` says of it alone."""
    a_store, b_store = open_store(), open_store()
    leases = claim_all(a_store, "p", "q", "r", ttl=10)
    clock.advance(11)
    b_store.claim("q", "B", 10)
    stale = [forge(leases[0], generation=5), leases[1], leases[2]]
    batch = a_store.renew_many(stale)
    for lease, answer in zip(stale, batch, strict=True):
        with pytest.raises(tenure.LeaseLost) as caught:
            a_store.renew(lease)
        assert isinstance(answer, tenure.LeaseLost)
        assert str(answer) == str(caught.value)
        assert (answer.reason, answer.current_generation, answer.current_owner) == (
            caught.value.reason,
            caught.value.current_generation,
            caught.value.current_owner,
        )


def test_a_lost_reply_is_retried_and_answered(url: str) -> None:
    clock = tenure.ManualClock()
    driver = LosingReplies(open_driver(url, clock), "renew_many")
    store = tenure.Store(driver, clock=clock)
    try:
        leases = claim_all(store, "a", "b", ttl=10)
        clock.advance(4)
        renewed = store.renew_many(leases)
        assert driver.calls["renew_many"] == 2  # applied, reply lost, retried
        assert [lease.lease_until for lease in renewed] == [T0 + 14, T0 + 14]  # type: ignore[union-attr]
        assert [store.get(k).lease_until for k in "ab"] == [T0 + 14, T0 + 14]
    finally:
        store.close()


def test_bad_input_refuses_the_whole_batch(store: tenure.Store) -> None:
    a, b = claim_all(store, "a", "b")
    before = snapshot(store)
    cases: list[tuple[object, object, str]] = [
        ([a, b, "lease"], None, "leases[2]"),
        ([a, b, None], None, "leases[2]"),
        ([a, a], None, "leases"),
        (a, None, "leases"),
        ("ab", None, "leases"),
        ({a, b}, None, "leases"),
        ([a] * 1001, None, "leases"),
        ([a, b], 0, "ttl"),
        ([a, b], -1.0, "ttl"),
        ([a, b], float("nan"), "ttl"),
        ([a, b], "10", "ttl"),
        ([a, b], 8 * 24 * 3600, "ttl"),
    ]
    for leases, ttl, argument in cases:
        with pytest.raises(tenure.InvalidArgument) as caught:
            store.renew_many(leases, ttl)  # type: ignore[arg-type]
        assert caught.value.argument == argument, (leases, ttl, caught.value)
        assert snapshot(store) == before


def test_a_malformed_lease_is_refused_before_anything_is_sent(store: tenure.Store) -> None:
    a, b = claim_all(store, "a", "b")
    before = snapshot(store)
    malformed = dataclasses.replace(b, generation=0)  # no claim grants generation 0
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.renew_many([a, malformed])
    assert caught.value.argument == "leases[1].generation"
    assert snapshot(store) == before


def test_many_leases_in_one_call(store: tenure.Store, clock: tenure.ManualClock) -> None:
    for i in range(300):
        store.submit(f"job-{i:03}")
    leases = store.claim_many("A", 30, 300)
    clock.advance(20)
    renewed = store.renew_many(leases)
    assert [lease.job_id for lease in renewed] == [lease.job_id for lease in leases]  # type: ignore[union-attr]
    assert {lease.lease_until for lease in renewed} == {T0 + 50}  # type: ignore[union-attr]
    clock.advance(20)  # past the first leases' end: the renewed ones still hold every job
    assert store.claim_many("B", 30, 300) == []
    assert store.complete_many(renewed) == []  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_async_twin(astore: tenure.aio.AsyncStore, clock: tenure.ManualClock) -> None:
    for job_id in ("a", "b"):
        await astore.submit(job_id)
    a, b = await astore.claim_many("A", 10, 2)
    clock.advance(11)
    fresh = await astore.claim("a", "B", 10)
    assert fresh is not None
    clock.advance(1)
    lost, renewed = await astore.renew_many([b, fresh], 30)
    assert isinstance(lost, tenure.LeaseLost)
    assert (lost.job_id, lost.generation) == ("b", 1)
    assert isinstance(renewed, tenure.Lease)
    assert (renewed.owner, renewed.generation, renewed.lease_until) == ("B", 2, T0 + 42)
    (replaced,) = await astore.renew_many([a])
    assert isinstance(replaced, tenure.LeaseLost)
    assert (replaced.current_generation, replaced.current_owner) == (2, "B")
    assert await astore.renew_many([]) == []
