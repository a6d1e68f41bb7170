"""complete_and_claim: complete_many then claim_many, as one store operation at one store time,
the claim seeing the store as the completions left it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import tenure
import tenure.aio
from tests.conformance._support import claim_all, forge, job_view

T0 = tenure.ManualClock().time()


def submit_all(store: tenure.Store, clock: tenure.ManualClock, *job_ids: str, **kw: object) -> None:
    """Submit each job 0.5 s after the previous one (so "oldest first" is unambiguous)."""
    for job_id in job_ids:
        store.submit(job_id, **kw)  # type: ignore[arg-type]
        clock.advance(0.5)


def states(store: tenure.Store, *job_ids: str) -> dict[str, tuple[str, str | None, int]]:
    jobs = [store.get(job_id) for job_id in job_ids]
    return {job.job_id: (job.state, job.owner, job.generation) for job in jobs}


def test_completes_with_results_and_claims_the_next_oldest_jobs(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    submit_all(store, clock, "a", "b", "c", "d", "e", "f")  # T0 .. T0+2.5
    a, b = store.claim_many("A", 10, 2)
    assert [a.job_id, b.job_id] == ["a", "b"]
    clock.advance(2)  # T0+5
    now = T0 + 5

    lost, leases = store.complete_and_claim([a, b], "A", 20, 3, results=[{"n": 1}, [2, "x"]])

    assert lost == []
    assert [lease.job_id for lease in leases] == ["c", "d", "e"]  # oldest first
    for lease in leases:
        assert (lease.owner, lease.generation, lease.attempt, lease.ttl) == ("A", 1, 1, 20.0)
        assert lease.lease_until == now + 20  # from store time
        assert lease.local_deadline <= clock.monotonic() + 20
        job = store.get(lease.job_id)
        assert (job.state, job.owner, job.generation, job.attempts) == ("leased", "A", 1, 1)
        assert job.lease_until == now + 20
    assert len({lease.secret for lease in leases}) == 3
    done = [store.get("a"), store.get("b")]
    assert [(j.state, j.owner, j.generation, j.result) for j in done] == [
        ("done", "A", 1, {"n": 1}),
        ("done", "A", 1, [2, "x"]),
    ]
    # One store time for the completions and the claim.
    assert all(j.lease_until is None and j.updated_at == now for j in done)
    assert store.get("f").state == "ready"
    # The new leases are real: they complete (and nothing else is claimable in between).
    lost, more = store.complete_and_claim(leases, "A", 20, 3, results=["c", "d", "e"])
    assert lost == []
    assert [lease.job_id for lease in more] == ["f"]
    assert [store.get(k).result for k in "cde"] == ["c", "d", "e"]


def test_the_claim_may_be_for_another_owner_and_results_default_to_none(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    submit_all(store, clock, "a", "b", "c")
    (a,) = store.claim_many("A", 10, 1)
    lost, leases = store.complete_and_claim((a,), "B", 5, 1)
    assert lost == []
    assert [(lease.job_id, lease.owner, lease.ttl) for lease in leases] == [("b", "B", 5.0)]
    assert (store.get("a").state, store.get("a").result) == ("done", None)
    assert states(store, "b", "c") == {"b": ("leased", "B", 1), "c": ("ready", None, 0)}


def test_the_claim_sees_the_completions_and_never_takes_them(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    submit_all(store, clock, "j0", "j1", "j2", "j3", "j4")
    first = store.claim_many("A", 10, 3)
    # A limit larger than what is left: exactly the remaining ready jobs come back.
    lost, rest = store.complete_and_claim(first, "A", 10, 10, results=[0, 1, 2])
    assert lost == []
    assert [lease.job_id for lease in rest] == ["j3", "j4"]
    assert states(store, "j0", "j1", "j2") == {k: ("done", "A", 1) for k in ("j0", "j1", "j2")}
    lost, none = store.complete_and_claim(rest, "A", 10, 10, results=[3, 4])
    assert (lost, none) == ([], [])
    final = store.jobs(limit=100)
    assert [(j.state, j.generation, j.attempts, j.result) for j in final] == [
        ("done", 1, 1, i) for i in range(5)
    ]


def test_an_expired_lease_is_judged_before_the_claim_which_may_take_its_job(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("x")  # claimed with a short lease: claimable again at T0+5
    x = store.claim("x", "A", 5)
    assert x is not None
    store.submit("held")
    held = store.claim("held", "A", 30)
    assert held is not None
    clock.advance(1)
    store.submit("y")  # ready since T0+1
    clock.advance(5)  # T0+6: x expired

    lost, leases = store.complete_and_claim([held, x], "A", 10, 5, results=["h", "x"])

    # The completion saw x as the expiry left it (generation 1, expired), not as the claim
    # of the same call left it.
    assert [(e.job_id, e.generation) for e in lost] == [("x", 1)]
    assert isinstance(lost[0], tenure.LeaseLost)
    assert lost[0].current_generation == 1
    assert "expired" in str(lost[0])
    # The claim then saw x claimable: y (ready since T0+1) first, then x (since T0+5).
    assert [(lease.job_id, lease.generation, lease.attempt) for lease in leases] == [
        ("y", 1, 1),
        ("x", 2, 2),
    ]
    assert (store.get("held").state, store.get("held").result) == ("done", "h")
    job = store.get("x")
    assert (job.state, job.owner, job.generation, job.result) == ("leased", "A", 2, None)
    store.complete(leases[1], "x2")  # the new lease is the real one
    assert store.get("x").result == "x2"


def test_stale_leases_are_reported_in_order_and_change_nothing_while_the_rest_complete(
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
    for job_id in ("n1", "n2", "n3"):  # what the claim takes: another queue
        a_store.submit(job_id, queue="next")
    clock.advance(11)  # "expired" and "reclaimed" expired; "live" still has 19 s
    reclaimed_by_b = b_store.claim("reclaimed", "B", 10)
    assert reclaimed_by_b is not None
    assert reclaimed_by_b.generation == 2
    wrong_secret = forge(forged, secret="0" * 48)
    ghost = forge(live, job_id="never-submitted")
    before = {job.job_id: job_view(job) for job in a_store.jobs(limit=100)}

    lost, leases = a_store.complete_and_claim(
        [expired, live, reclaimed, ghost, wrong_secret, released],
        "A",
        10,
        2,
        results=["e", "l", "r", "g", "f", "x"],
        queues=["next"],
    )

    assert [(e.job_id, e.generation) for e in lost] == [
        ("expired", 1),
        ("reclaimed", 1),
        ("never-submitted", 1),
        ("forged", 1),
        ("released", 1),
    ]
    assert all(isinstance(e, tenure.LeaseLost) for e in lost)
    assert "complete rejected for job 'reclaimed' generation 1" in str(lost[1])
    assert (lost[1].current_generation, lost[1].current_owner) == (2, "B")
    assert "expired" in str(lost[0])
    assert "no longer exists" in str(lost[2])
    # The claim still happened.
    assert [(lease.job_id, lease.generation) for lease in leases] == [("n1", 1), ("n2", 1)]
    done = a_store.get("live")
    assert (done.state, done.result, done.generation) == ("done", "l", 1)
    after = {job.job_id: job_view(job) for job in a_store.jobs(limit=100)}
    for job_id in ("expired", "reclaimed", "forged", "released", "n3"):
        assert after[job_id] == before[job_id], job_id
    assert "never-submitted" not in after
    # B's lease on the reclaimed job is intact.
    b_store.complete(reclaimed_by_b, "b's")
    assert a_store.get("reclaimed").result == "b's"


def test_a_repeated_call_is_not_lost_and_claims_new_jobs(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    submit_all(store, clock, "a", "b", "c", "d", "e", "f")
    a, b = store.claim_many("A", 10, 2)
    lost, first = store.complete_and_claim([a, b], "A", 10, 2, results=["1", "2"])
    assert lost == []
    assert [lease.job_id for lease in first] == ["c", "d"]
    done_ab = [job_view(store.get(k)) for k in "ab"]
    held_cd = [job_view(store.get(k)) for k in "cd"]
    clock.advance(1)

    # A repeat (say, after an error): the completions are repeats, answered as success and
    # changing nothing; its claim is a new claim and takes new jobs.
    lost, second = store.complete_and_claim([a, b], "A", 10, 2, results=["1", "2"])
    assert lost == []
    assert [(lease.job_id, lease.generation) for lease in second] == [("e", 1), ("f", 1)]
    assert [job_view(store.get(k)) for k in "ab"] == done_ab
    assert [job_view(store.get(k)) for k in "cd"] == held_cd  # the first call's leases hold
    lost, third = store.complete_and_claim([b, a], "A", 10, 2, results=["2", "1"])
    assert (lost, third) == ([], [])
    # Other results are not a repeat: refused, each, and nothing changes.
    lost, fourth = store.complete_and_claim([a, b], "A", 10, 2, results=["other", "values"])
    assert [(error.job_id, error.generation) for error in lost] == [("a", 1), ("b", 1)]
    assert fourth == []
    assert [job_view(store.get(k)) for k in "ab"] == done_ab
    # Mixed with fresh leases and with the other completion calls: still repeats.
    assert store.complete_many([a, b], ["1", "2"]) == []
    store.complete(a, "1")
    lost, none = store.complete_and_claim(
        [first[0], a, second[1]], "A", 10, 2, results=[None, "1", None]
    )
    assert (lost, none) == ([], [])
    assert [store.get(k).result for k in "abcdef"] == ["1", "2", None, None, None, None]
    assert [store.get(k).state for k in "abcdef"] == ["done"] * 3 + ["leased", "leased", "done"]


def test_empty_leases_is_claim_many(store: tenure.Store, clock: tenure.ManualClock) -> None:
    submit_all(store, clock, "j0", "j1", "j2", "j3")
    lost, leases = store.complete_and_claim([], "A", 10, 2)
    assert lost == []
    assert [(lease.job_id, lease.owner, lease.generation) for lease in leases] == [
        ("j0", "A", 1),
        ("j1", "A", 1),
    ]
    assert all(lease.lease_until == T0 + 2 + 10 for lease in leases)
    assert [lease.job_id for lease in store.claim_many("B", 10, 1)] == ["j2"]
    lost, leases = store.complete_and_claim((), "C", 10, 5, results=[])
    assert lost == []
    assert [(lease.job_id, lease.owner) for lease in leases] == [("j3", "C")]
    assert store.complete_and_claim([], "D", 10, 5, results=()) == ([], [])
    assert states(store, "j0", "j1", "j2", "j3") == {
        "j0": ("leased", "A", 1),
        "j1": ("leased", "A", 1),
        "j2": ("leased", "B", 1),
        "j3": ("leased", "C", 1),
    }


def test_nothing_claimable(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    assert store.complete_and_claim([], "A", 10, 5) == ([], [])
    assert store.jobs() == []
    # Held by another, delayed, done, dead, in another queue: none of them is taken.
    store.submit("held")
    assert open_store().claim("held", "B", 100) is not None
    store.submit("later", delay=60)
    store.submit("elsewhere", queue="mail")
    (done,) = claim_all(store, "done")
    store.complete(done)
    store.submit("dead", max_attempts=1)
    dead = store.claim("dead", "A", 10)
    assert dead is not None
    store.fail(dead, "boom")
    (mine,) = claim_all(store, "mine")
    clock.advance(1)
    before = {job.job_id: job_view(job) for job in store.jobs(limit=100)}
    assert store.complete_and_claim([mine], "A", 10, 1000, results=["m"]) == ([], [])
    after = {job.job_id: job_view(job) for job in store.jobs(limit=100)}
    assert (after["mine"]["state"], after["mine"]["result"]) == ("done", "m")
    assert {k: v for k, v in after.items() if k != "mine"} == {
        k: v for k, v in before.items() if k != "mine"
    }


def test_queues(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("q1-a", queue="q1", delay=1)
    store.submit("q2-a", queue="q2")
    store.submit("q3-a", queue="q3")
    store.submit("q1-b", queue="q1", delay=2)
    store.submit("plain")  # the default queue
    (a,) = claim_all(store, "a")
    clock.advance(5)
    lost, leases = store.complete_and_claim([a], "A", 10, 10, queues=("q1", "q2"))
    assert lost == []
    assert [lease.job_id for lease in leases] == ["q2-a", "q1-a", "q1-b"]
    assert store.get("q3-a").state == "ready"
    assert store.get("plain").state == "ready"
    assert store.complete_and_claim(leases, "A", 10, 10, queues=["nope"]) == ([], [])
    assert {store.get(lease.job_id).state for lease in leases} == {"done"}
    lost, leases = store.complete_and_claim([], "A", 10, 10, queues=["q3", "q3"])
    assert [lease.job_id for lease in leases] == ["q3-a"]
    lost, leases = store.complete_and_claim(leases, "A", 10, 10)  # default: ("default",)
    assert lost == []
    assert [lease.job_id for lease in leases] == ["plain"]


def test_jobs_expired_on_their_last_attempt_are_buried(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    """A job whose every holder stalls past its lease must not be claimed forever."""
    store.submit("poison", {"p": 1}, max_attempts=2)
    lost, (p1,) = store.complete_and_claim([], "w1", 5, 1)
    assert (lost, p1.job_id, p1.generation, p1.attempt) == ([], "poison", 1, 1)
    clock.advance(5)  # the holder stalls; the lease expires
    lost, (p2,) = store.complete_and_claim([p1], "w2", 5, 1)
    assert [(e.job_id, e.generation) for e in lost] == [("poison", 1)]
    assert (p2.job_id, p2.generation, p2.attempt) == ("poison", 2, 2)
    clock.advance(5)  # expired again, on its last allowed attempt
    store.submit("good")
    (other,) = claim_all(store, "other")
    lost, leases = store.complete_and_claim([other, p2], "w3", 5, 5)
    assert [(e.job_id, e.generation) for e in lost] == [("poison", 2)]
    assert [lease.job_id for lease in leases] == ["good"]  # the buried job blocks nothing
    job = store.get("poison")
    assert (job.state, job.generation, job.attempts) == ("dead", 2, 2)
    assert job.error  # says why
    assert job.lease_until is None
    assert store.get("other").state == "done"
    assert store.complete_and_claim(leases, "w4", 5, 5) == ([], [])
    clock.advance(100)
    assert store.complete_and_claim([], "w4", 5, 5) == ([], [])
    assert store.get("poison").state == "dead"


def test_many_jobs_in_one_call(store: tenure.Store) -> None:
    for i in range(600):
        store.submit(f"job-{i:03}")
    first = store.claim_many("A", 30, 300)
    lost, second = store.complete_and_claim(first, "A", 30, 1000, results=list(range(300)))
    assert lost == []
    assert [lease.job_id for lease in second] == [f"job-{i:03}" for i in range(300, 600)]
    lost, third = store.complete_and_claim(second, "A", 30, 1000, results=list(range(300, 600)))
    assert (lost, third) == ([], [])
    done = store.jobs(state="done", limit=1000)
    assert len(done) == 600
    assert sorted(job.result for job in done) == list(range(600))


# Replies lost after the store applied the call: tests/conformance/test_claim_recovery.py.


# -- the async twin ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_twin(astore: tenure.aio.AsyncStore, clock: tenure.ManualClock) -> None:
    for job_id in ("a", "b", "c", "d"):
        await astore.submit(job_id)
        clock.advance(0.5)
    lost, (a, b) = await astore.complete_and_claim([], "A", 10, 2)
    assert lost == []
    assert [(a.job_id, a.generation), (b.job_id, b.generation)] == [("a", 1), ("b", 1)]
    clock.advance(11)
    fresh = await astore.claim("a", "B", 10)
    assert fresh is not None
    lost, leases = await astore.complete_and_claim([fresh, b], "B", 10, 5, results=["a2", "b1"])
    assert [(e.job_id, e.generation, e.current_generation) for e in lost] == [("b", 1, 1)]
    # b's lease had expired: the claim takes it (after the ready c and d, which are older).
    assert [(lease.job_id, lease.generation) for lease in leases] == [
        ("c", 1),
        ("d", 1),
        ("b", 2),
    ]
    job = await astore.get("a")
    assert (job.state, job.generation, job.result) == ("done", 2, "a2")
    assert (await astore.get("b")).owner == "B"
    lost, none = await astore.complete_and_claim(leases, "B", 10, 5, results=["c", "d", "b"])
    assert (lost, none) == ([], [])
    assert [(j.job_id, j.result) for j in await astore.jobs(state="done")] == [
        ("a", "a2"),
        ("b", "b"),
        ("c", "c"),
        ("d", "d"),
    ]
    with pytest.raises(tenure.InvalidArgument) as caught:
        await astore.complete_and_claim(leases, "B", 10, 0)
    assert caught.value.argument == "limit"
