"""claim_jobs and complete_and_claim_jobs: the claims of claim_many / complete_and_claim, each
lease with the snapshot of its job read in the same store operation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import tenure
import tenure.aio
from tests.conformance._bad_values import BAD_IDS, BAD_LIMITS, BAD_QUEUES, BAD_TTLS
from tests.conformance._support import claim_all, snapshot

T0 = tenure.ManualClock().time()


def submit_all(store: tenure.Store, clock: tenure.ManualClock, *job_ids: str) -> None:
    """Submit each job 0.5 s after the previous one, each with a payload of its own."""
    for job_id in job_ids:
        store.submit(job_id, {"id": job_id, "n": [1, None, "é"]}, max_attempts=3)
        clock.advance(0.5)


def check_claims(store: tenure.Store, claims: list[tenure.Claim], owner: str, ttl: float) -> None:
    """Each snapshot is what `get` reads right after the claim, and belongs to its lease."""
    for claim in claims:
        assert isinstance(claim, tenure.Claim)
        lease, job = claim  # a tuple too
        assert (lease, job) == (claim.lease, claim.job)
        assert job == store.get(lease.job_id)
        assert (job.job_id, job.state, job.owner) == (lease.job_id, "leased", owner)
        assert (job.generation, job.attempts) == (lease.generation, lease.attempt)
        assert job.lease_until == lease.lease_until
        assert lease.ttl == ttl
        assert job.payload == {"id": job.job_id, "n": [1, None, "é"]}
        assert job.created is None


def test_claim_jobs(store: tenure.Store, clock: tenure.ManualClock) -> None:
    submit_all(store, clock, "j0", "j1", "j2", "j3")
    store.submit("other", queue="mail")
    claims = store.claim_jobs("A", 10, 3)
    assert [lease.job_id for lease, _ in claims] == ["j0", "j1", "j2"]  # oldest first
    check_claims(store, claims, "A", 10.0)
    assert all(job.lease_until == T0 + 2 + 10 and job.as_of == T0 + 2 for _, job in claims)
    rest = store.claim_jobs("B", 5, 10)
    assert [lease.job_id for lease, _ in rest] == ["j3"]
    check_claims(store, rest, "B", 5.0)
    assert store.claim_jobs("C", 10, 10) == []
    (mail,) = store.claim_jobs("C", 10, 10, queues=["mail", "nope"])
    assert (mail.lease.job_id, mail.job.queue) == ("other", "mail")
    for lease, _ in claims + rest:
        store.complete(lease)  # every lease is real
    assert [job.state for job in store.jobs(queue="default")] == ["done"] * 4


def test_claim_jobs_of_an_expired_lease(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    submit_all(store, clock, "J")
    (first,) = store.claim_jobs("A", 10, 1)
    clock.advance(10)
    other = open_store()
    (second,) = other.claim_jobs("B", 10, 5)
    assert (second.lease.generation, second.lease.attempt) == (2, 2)
    check_claims(other, [second], "B", 10.0)
    with pytest.raises(tenure.LeaseLost):
        store.complete(first.lease)


def test_complete_and_claim_jobs(store: tenure.Store, clock: tenure.ManualClock) -> None:
    submit_all(store, clock, "a", "b", "c", "d", "e")
    (a, _), (b, _) = store.claim_jobs("A", 10, 2)
    clock.advance(1)
    lost, claims = store.complete_and_claim_jobs([a, b], "A", 20, 2, results=["ra", "rb"])
    assert lost == []
    assert [lease.job_id for lease, _ in claims] == ["c", "d"]
    check_claims(store, claims, "A", 20.0)
    assert [(store.get(k).state, store.get(k).result) for k in "ab"] == [
        ("done", "ra"),
        ("done", "rb"),
    ]
    # One store time for the completions and the claim.
    assert {job.as_of for _, job in claims} == {store.get("a").updated_at}
    # A stale lease comes back as LeaseLost, and the claim still happens.
    clock.advance(20)
    c = claims[0].lease
    fresh = store.claim("c", "B", 10)
    assert fresh is not None
    lost, claims = store.complete_and_claim_jobs([c], "B", 10, 5, results=[1])
    assert [(error.job_id, error.generation) for error in lost] == [("c", 1)]
    assert [(lease.job_id, lease.generation) for lease, _ in claims] == [("e", 1), ("d", 2)]
    check_claims(store, claims, "B", 10.0)
    leases = [fresh, *(lease for lease, _ in claims)]
    lost, none = store.complete_and_claim_jobs(leases, "B", 10, 5)
    assert (lost, none) == ([], [])
    assert store.complete_and_claim_jobs([], "B", 10, 5) == ([], [])
    assert {job.state for job in store.jobs()} == {"done"}


def test_complete_and_claim_jobs_with_no_leases_is_claim_jobs(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    submit_all(store, clock, "j0", "j1", "j2")
    lost, claims = store.complete_and_claim_jobs([], "A", 10, 2, queues=("default",))
    assert lost == []
    assert [lease.job_id for lease, _ in claims] == ["j0", "j1"]
    check_claims(store, claims, "A", 10.0)


# -- bad input: refused exactly as by claim_many / complete_and_claim --------------------

ClaimCall = Callable[[tenure.Store, Any], object]

# (argument, bad values, the established call, the call with snapshots)
BAD_CLAIMS: list[tuple[str, list[Any], ClaimCall, ClaimCall]] = [
    ("owner", BAD_IDS, lambda s, v: s.claim_many(v, 10, 2), lambda s, v: s.claim_jobs(v, 10, 2)),
    ("ttl", BAD_TTLS, lambda s, v: s.claim_many("B", v, 2), lambda s, v: s.claim_jobs("B", v, 2)),
    (
        "limit",
        BAD_LIMITS,
        lambda s, v: s.claim_many("B", 10, v),
        lambda s, v: s.claim_jobs("B", 10, v),
    ),
    (
        "queues",
        BAD_QUEUES,
        lambda s, v: s.claim_many("B", 10, 2, queues=v),
        lambda s, v: s.claim_jobs("B", 10, 2, queues=v),
    ),
    (
        "leases",
        [None, "L", 42, [None], [object()]],
        lambda s, v: s.complete_and_claim(v, "B", 10, 2),
        lambda s, v: s.complete_and_claim_jobs(v, "B", 10, 2),
    ),
    (
        "results",
        ["r", 42, ["r"]],
        lambda s, v: s.complete_and_claim([], "B", 10, 2, results=v),
        lambda s, v: s.complete_and_claim_jobs([], "B", 10, 2, results=v),
    ),
    (
        "owner",
        BAD_IDS,
        lambda s, v: s.complete_and_claim([], v, 10, 2),
        lambda s, v: s.complete_and_claim_jobs([], v, 10, 2),
    ),
    (
        "ttl",
        BAD_TTLS,
        lambda s, v: s.complete_and_claim([], "B", v, 2),
        lambda s, v: s.complete_and_claim_jobs([], "B", v, 2),
    ),
    (
        "limit",
        BAD_LIMITS,
        lambda s, v: s.complete_and_claim([], "B", 10, v),
        lambda s, v: s.complete_and_claim_jobs([], "B", 10, v),
    ),
    (
        "queues",
        BAD_QUEUES,
        lambda s, v: s.complete_and_claim([], "B", 10, 2, queues=v),
        lambda s, v: s.complete_and_claim_jobs([], "B", 10, 2, queues=v),
    ),
]


def _refusal(call: ClaimCall, store: tenure.Store, value: Any) -> tenure.InvalidArgument:
    with pytest.raises(tenure.InvalidArgument) as caught:
        call(store, value)
    return caught.value


@pytest.mark.parametrize(
    ("argument", "values", "established", "call"),
    BAD_CLAIMS,
    ids=[f"{i}-{case[0]}" for i, case in enumerate(BAD_CLAIMS)],
)
def test_bad_input_is_refused_as_by_the_calls_without_snapshots(
    store: tenure.Store,
    clock: tenure.ManualClock,
    argument: str,
    values: list[Any],
    established: ClaimCall,
    call: ClaimCall,
) -> None:
    submit_all(store, clock, "R")
    (held,) = claim_all(store, "L")
    before = snapshot(store)
    for value in values:
        expected = _refusal(established, store, value)
        refusal = _refusal(call, store, value)
        assert (refusal.argument, refusal.rule) == (expected.argument, expected.rule), value
        assert refusal.argument.startswith(argument), refusal
        assert snapshot(store) == before, value
    store.complete(held)  # the store is intact


# -- the async twin ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_twin(astore: tenure.aio.AsyncStore, clock: tenure.ManualClock) -> None:
    for job_id in ("a", "b", "c"):
        await astore.submit(job_id, {"id": job_id})
        clock.advance(0.5)
    claims = await astore.claim_jobs("A", 10, 2)
    assert [(lease.job_id, job.payload) for lease, job in claims] == [
        ("a", {"id": "a"}),
        ("b", {"id": "b"}),
    ]
    for lease, job in claims:
        assert isinstance((lease, job), tuple)
        assert job == await astore.get(lease.job_id)
        assert (job.owner, job.generation, job.lease_until) == ("A", 1, lease.lease_until)
    leases = [claim.lease for claim in claims]
    lost, more = await astore.complete_and_claim_jobs(leases, "B", 5, 5, results=["x", "y"])
    assert lost == []
    assert [(claim.lease.job_id, claim.lease.owner) for claim in more] == [("c", "B")]
    assert more[0].job == await astore.get("c")
    assert [(await astore.get(k)).result for k in "ab"] == ["x", "y"]
    for bad in (
        lambda: astore.claim_jobs("A", 10, 0),
        lambda: astore.complete_and_claim_jobs([], "A", 10, 0),
    ):
        with pytest.raises(tenure.InvalidArgument) as caught:
            await bad()
        assert caught.value.argument == "limit"
