"""complete_many: many completions in one store operation, each checked as `complete` is."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

import tenure
import tenure.aio
from tenure.stores import open_driver
from tests.conformance._support import LosingReplies, claim_all, forge, job_view, snapshot

T0 = tenure.ManualClock().time()


def test_completes_every_lease_with_its_result(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    leases = claim_all(store, "a", "b", "c")
    clock.advance(2)
    assert store.complete_many(leases, [{"n": 1}, None, [2, "x"]]) == []
    jobs = {job_id: store.get(job_id) for job_id in "abc"}
    assert {j.job_id: (j.state, j.generation, j.owner) for j in jobs.values()} == {
        "a": ("done", 1, "A"),
        "b": ("done", 1, "A"),
        "c": ("done", 1, "A"),
    }
    assert [jobs[k].result for k in "abc"] == [{"n": 1}, None, [2, "x"]]
    assert all(j.lease_until is None and j.updated_at == T0 + 2 for j in jobs.values())


def test_results_default_to_none_and_empty_batch_does_nothing(store: tenure.Store) -> None:
    leases = claim_all(store, "a", "b")
    before = snapshot(store)
    assert store.complete_many([]) == []
    assert store.complete_many((), ()) == []
    assert snapshot(store) == before
    assert store.complete_many(tuple(leases)) == []
    assert [store.get(k).result for k in "ab"] == [None, None]
    assert [store.get(k).state for k in "ab"] == ["done", "done"]


def test_stale_leases_are_reported_and_change_nothing_while_the_rest_complete(
    open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    a_store, b_store = open_store(), open_store()
    live, expired, reclaimed, forged, released = claim_all(
        a_store, "live", "expired", "reclaimed", "forged", "released", ttl=10
    )
    a_store.renew(live, 30)
    a_store.renew(reclaimed, 5)
    a_store.renew(forged, 30)
    a_store.renew(released, 30)
    a_store.release(released)
    clock.advance(11)  # "expired" and "reclaimed" expired; "live" still has 19 s
    reclaimed_by_b = b_store.claim("reclaimed", "B", 10)
    assert reclaimed_by_b is not None
    assert reclaimed_by_b.generation == 2
    wrong_secret = forge(forged, secret="0" * 48)
    before = {job.job_id: job_view(job) for job in a_store.jobs(limit=100)}

    lost = a_store.complete_many(
        [expired, live, reclaimed, wrong_secret, released], ["e", "l", "r", "f", "x"]
    )

    assert [(e.job_id, e.generation) for e in lost] == [
        ("expired", 1),
        ("reclaimed", 1),
        ("forged", 1),
        ("released", 1),
    ]
    assert all(isinstance(e, tenure.LeaseLost) for e in lost)
    assert "complete rejected for job 'reclaimed' generation 1" in str(lost[1])
    assert lost[1].current_generation == 2
    assert lost[1].current_owner == "B"
    assert "expired" in str(lost[0])
    done = a_store.get("live")
    assert (done.state, done.result, done.generation) == ("done", "l", 1)
    after = {job.job_id: job_view(job) for job in a_store.jobs(limit=100)}
    for job_id in ("expired", "reclaimed", "forged", "released"):
        assert after[job_id] == before[job_id], job_id
    # B's lease on the reclaimed job is intact.
    b_store.complete(reclaimed_by_b, "b's")
    assert a_store.get("reclaimed").result == "b's"


def test_a_deleted_or_unknown_job_is_lost_not_an_error(
    open_store: Callable[[], tenure.Store],
) -> None:
    store = open_store()
    (lease,) = claim_all(store, "a")
    ghost = forge(lease, job_id="never-submitted")
    lost = store.complete_many([ghost, lease])
    assert [(e.job_id, e.generation) for e in lost] == [("never-submitted", 1)]
    assert "no longer exists" in str(lost[0])
    assert store.get("a").state == "done"


def test_repeating_a_batch_that_took_effect_succeeds_and_changes_nothing(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    leases = claim_all(store, "a", "b")
    assert store.complete_many(leases, ["1", "2"]) == []
    after_first = snapshot(store)
    clock.advance(1)
    assert store.complete_many(leases, ["1", "2"]) == []
    assert snapshot(store) == after_first
    # Other results are not a repeat: each is refused and nothing changes.
    lost = store.complete_many(leases, ["other", "values"])
    assert [error.job_id for error in lost] == ["a", "b"]
    assert snapshot(store) == after_first
    # A single complete with one of the same leases is a repeat too, and vice versa.
    store.complete(leases[0], "1")
    (c,) = claim_all(store, "c")
    store.complete(c)
    assert store.complete_many([c, leases[1]], [None, "2"]) == []
    assert [store.get(k).result for k in "abc"] == ["1", "2", None]


def test_a_lost_reply_is_retried_and_answered_as_success(url: str, tmp_path: Path) -> None:
    clock = tenure.ManualClock()
    driver = LosingReplies(open_driver(url, clock), "complete_many")
    store = tenure.Store(driver, clock=clock)
    try:
        leases = claim_all(store, "a", "b")
        assert store.complete_many(leases, ["x", "y"]) == []
        assert driver.calls["complete_many"] == 2  # applied, reply lost, retried
        assert [(store.get(k).state, store.get(k).result) for k in "ab"] == [
            ("done", "x"),
            ("done", "y"),
        ]
    finally:
        store.close()


def test_bad_items_refuse_the_whole_batch(store: tenure.Store) -> None:
    a, b = claim_all(store, "a", "b")
    before = snapshot(store)
    cases: list[tuple[object, object, str]] = [
        ([a, b, "lease"], None, "leases[2]"),
        ([a, b, None], None, "leases[2]"),
        ([a, a], None, "leases"),
        ([a, b], ["ok", float("nan")], "results[1]"),
        ([a, b], ["only one"], "results"),
        ([a, b], "ab", "results"),
        (a, None, "leases"),
        ("ab", None, "leases"),
        ({a, b}, None, "leases"),
        ([a] * 1001, None, "leases"),
    ]
    for leases, results, argument in cases:
        with pytest.raises(tenure.InvalidArgument) as caught:
            store.complete_many(leases, results)  # type: ignore[arg-type]
        assert caught.value.argument == argument, caught.value
        assert snapshot(store) == before


def test_a_malformed_lease_is_refused_before_anything_is_sent(store: tenure.Store) -> None:
    a, b = claim_all(store, "a", "b")
    before = snapshot(store)
    malformed = dataclasses.replace(b, generation=0)  # no claim grants generation 0
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.complete_many([a, malformed])
    assert caught.value.argument == "leases[1].generation"
    assert "from 1 to 2**63-1" in caught.value.rule
    assert snapshot(store) == before


def test_an_edited_lease_is_refused_by_the_store_alone(store: tenure.Store) -> None:
    """Well-formed but not what the store granted: only that job is refused."""
    a, b = claim_all(store, "a", "b")
    lost = store.complete_many([a, dataclasses.replace(b, generation=2)])
    assert [(error.job_id, error.generation) for error in lost] == [("b", 2)]
    assert store.get("a").state == "done"
    job = store.get("b")
    assert (job.state, job.generation, job.owner) == ("leased", 1, "A")
    store.complete(b)  # the genuine lease still holds the job


def test_many_jobs_in_one_call(store: tenure.Store) -> None:
    for i in range(300):
        store.submit(f"job-{i:03}")
    leases = store.claim_many("A", 30, 300)
    assert len(leases) == 300
    assert store.complete_many(leases, [i for i in range(300)]) == []
    done = store.jobs(state="done", limit=1000)
    assert len(done) == 300
    assert sorted(job.result for job in done) == list(range(300))


@pytest.mark.anyio
async def test_async_twin(astore: tenure.aio.AsyncStore, clock: tenure.ManualClock) -> None:
    for job_id in ("a", "b", "c"):
        await astore.submit(job_id)
    leases = await astore.claim_many("A", 10, 3)
    clock.advance(11)
    fresh = await astore.claim("a", "B", 10)
    assert fresh is not None
    renewed = await astore.renew(fresh)
    lost = await astore.complete_many([renewed, leases[1], leases[2]], ["a2", "b1", "c1"])
    assert [(e.job_id, e.generation) for e in lost] == [("b", 1), ("c", 1)]
    job = await astore.get("a")
    assert (job.state, job.generation, job.result) == ("done", 2, "a2")
    assert (await astore.get("b")).state == "leased"
    assert await astore.complete_many([]) == []
