"""Fleet-wide queue limits on every store (issue #18): at most N jobs of a limited queue are
leased at once, decided inside each claim's own statement or script: claim_next and
claim_many batches take at most the room left, complete_and_claim's completions make room
for its claim, a claim by id respects the limit, expired leases free their place, and
removing the limit lifts it. Bad input changes nothing. (The race across processes is in
test_queue_limit_race.py.)"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import tenure
import tenure.aio

QUEUES = ("a", "b")


def _submit(store: tenure.Store, queue: str, count: int) -> list[str]:
    ids = [f"{queue}{n}" for n in range(count)]
    for job_id in ids:
        store.submit(job_id, queue=queue)
    return ids


def test_claim_many_takes_at_most_the_room_left(store: tenure.Store) -> None:
    _submit(store, "a", 5)
    _submit(store, "b", 3)
    store.set_queue_limit("a", 2)
    assert store.queue_limits() == {"a": 2}
    claimed = store.claim_many("W", 30, 10, queues=QUEUES)
    assert sorted(lease.job_id for lease in claimed) == ["a0", "a1", "b0", "b1", "b2"]
    assert store.claim_many("W", 30, 10, queues=QUEUES) == []
    assert store.claim_next("X", 30, queues=["a"]) is None
    assert store.get("a2").state == "ready"


def test_a_settled_lease_makes_room(store: tenure.Store) -> None:
    _submit(store, "a", 4)
    store.set_queue_limit("a", 2)
    first, second = store.claim_many("W", 30, 10, queues=["a"])
    store.complete(first)
    third = store.claim_next("W", 30, queues=["a"])
    assert third is not None
    assert third.job_id == "a2"
    assert store.claim_next("W", 30, queues=["a"]) is None
    store.release(second)
    assert [lease.job_id for lease in store.claim_many("W", 30, 10, queues=["a"])] == ["a1"]


def test_complete_and_claim_claims_the_room_its_completions_make(store: tenure.Store) -> None:
    _submit(store, "a", 5)
    store.set_queue_limit("a", 2)
    held = store.claim_many("W", 30, 10, queues=["a"])
    assert len(held) == 2
    lost, claimed = store.complete_and_claim(held, "W", 30, 10, queues=["a"])
    assert lost == []
    assert [lease.job_id for lease in claimed] == ["a2", "a3"]
    lost, claimed = store.complete_and_claim([claimed[0]], "W", 30, 10, queues=["a"])
    assert lost == []
    assert [lease.job_id for lease in claimed] == ["a4"]


def test_a_claim_by_id_respects_the_limit(store: tenure.Store) -> None:
    _submit(store, "a", 3)
    store.set_queue_limit("a", 1)
    first = store.claim("a0", "W", 30)
    assert first is not None
    assert store.claim("a1", "W", 30) is None
    assert store.get("a1").state == "ready"
    store.complete(first)
    assert store.claim("a1", "W", 30) is not None


def test_expired_leases_do_not_count(store: tenure.Store, clock: tenure.ManualClock) -> None:
    _submit(store, "a", 4)
    store.set_queue_limit("a", 2)
    assert len(store.claim_many("W", 10, 10, queues=["a"])) == 2
    assert store.claim_next("X", 10, queues=["a"]) is None
    clock.advance(11)
    # Both leases ran out: the room is back, for the oldest due jobs (a2, a3 were due
    # before a0 and a1's leases ended).
    taken = store.claim_many("X", 10, 10, queues=["a"])
    assert sorted(lease.job_id for lease in taken) == ["a2", "a3"]
    # Full again: the expired a0 is claimable but there is no room for it.
    assert store.claim("a0", "Y", 10) is None
    clock.advance(11)
    again = store.claim("a0", "Y", 10)
    assert again is not None
    assert again.generation == 2


def test_the_room_is_exact_with_many_leases_held(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    # More leases than one page of the old walk (100), across priorities, some expired,
    # with a scheduled backlog beside them (issue #20: Redis counts them with one ZCOUNT).
    store.submit_many(
        [{"job_id": f"a{n:03d}", "queue": "a", "priority": n % 3 - 1} for n in range(160)]
        + [{"job_id": f"later{n}", "queue": "a", "delay": 600} for n in range(20)]
    )
    store.set_queue_limit("a", 130)
    assert len(store.claim_many("W", 30, 110, queues=["a"])) == 110
    assert len(store.claim_many("X", 1, 20, queues=["a"])) == 20
    assert store.claim_next("Y", 30, queues=["a"]) is None  # 130 held
    clock.advance(2)  # X's 20 leases expired: room for 20
    assert len(store.claim_many("Y", 30, 50, queues=["a"])) == 20
    assert store.claim_next("Y", 30, queues=["a"]) is None
    stats = store.queue_stats()
    assert stats is not None
    found = stats.queue("a")
    assert found is not None
    assert (found.leased, found.scheduled) == (130, 20)


def test_the_room_holds_across_priorities_and_claim_paths(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    # Leases of every priority count (Redis keeps one set per priority), and the ready and
    # the expired-lease paths of a batch claim share one room (PostgreSQL walks them apart).
    store.submit("hi", queue="a", priority=5)
    _submit(store, "a", 4)
    store.set_queue_limit("a", 2)
    assert [store.claim_next("W", 10, queues=["a"]).job_id for _ in range(2)] == ["hi", "a0"]
    assert store.claim_next("W", 10, queues=["a"]) is None
    clock.advance(11)  # both leases expired: their jobs are claimable again, beside a1..a3
    store.set_queue_limit("a", 3)
    taken = store.claim_many("X", 10, 10, queues=["a"])
    # Three, in claim order (a0's expired lease fell due after a1 and a2 were).
    assert [lease.job_id for lease in taken] == ["hi", "a1", "a2"]
    assert store.claim_many("X", 10, 10, queues=["a"]) == []


def test_removing_the_limit_lifts_it(store: tenure.Store) -> None:
    _submit(store, "a", 3)
    store.set_queue_limit("a", 1)
    assert len(store.claim_many("W", 30, 10, queues=["a"])) == 1
    store.set_queue_limit("a", None)
    assert store.queue_limits() == {}
    assert len(store.claim_many("W", 30, 10, queues=["a"])) == 2


def test_lowering_the_limit_ends_no_lease(store: tenure.Store) -> None:
    _submit(store, "a", 4)
    store.set_queue_limit("a", 3)
    held = store.claim_many("W", 30, 10, queues=["a"])
    assert len(held) == 3
    store.set_queue_limit("a", 1)
    assert store.queue_limits() == {"a": 1}
    renewed = store.renew(held[0])
    store.complete(renewed)
    store.complete(held[1])
    # Still one held, the limit is one: no room until it ends too.
    assert store.claim_next("W", 30, queues=["a"]) is None
    store.complete(held[2])
    assert store.claim_next("W", 30, queues=["a"]) is not None


def test_limits_and_pauses_live_side_by_side(store: tenure.Store) -> None:
    _submit(store, "a", 2)
    store.set_queue_limit("a", 1)
    store.pause_queue("a")
    assert store.claim_next("W", 30, queues=["a"]) is None
    store.resume_queue("a")
    assert store.queue_limits() == {"a": 1}
    assert store.paused_queues() == []
    assert len(store.claim_many("W", 30, 10, queues=["a"])) == 1
    store.pause_queue("a")
    store.set_queue_limit("a", None)
    assert store.paused_queues() == ["a"]


@pytest.mark.parametrize(
    ("queue", "n", "argument"),
    [
        ("a", 0, "n"),
        ("a", -1, "n"),
        ("a", 1_000_001, "n"),
        ("a", True, "n"),
        ("a", 1.5, "n"),
        ("a", "3", "n"),
        ("", 3, "queue"),
        ("a\x00", 3, "queue"),
        (None, 3, "queue"),
    ],
)
def test_bad_limits_are_refused_and_change_nothing(
    store: tenure.Store, queue: object, n: object, argument: str
) -> None:
    store.set_queue_limit("a", 2)
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.set_queue_limit(queue, n)  # type: ignore[arg-type]
    assert caught.value.argument == argument
    assert str(caught.value).startswith(argument)
    assert store.queue_limits() == {"a": 2}


@pytest.mark.anyio
async def test_the_async_store_sets_and_honours_limits(astore: tenure.aio.AsyncStore) -> None:
    for n in range(3):
        await astore.submit(f"a{n}", queue="a")
    await astore.set_queue_limit("a", 2)
    assert await astore.queue_limits() == {"a": 2}
    assert len(await astore.claim_many("W", 30, 10, queues=["a"])) == 2
    assert await astore.claim("a2", "W", 30) is None
    with pytest.raises(tenure.InvalidArgument):
        await astore.set_queue_limit("a", 0)
    await astore.set_queue_limit("a", None)
    assert await astore.claim("a2", "W", 30) is not None


def _timed(call: Callable[[], object]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def test_an_idle_wait_on_a_full_queue_lasts_until_a_lease_ends(real_store: tenure.Store) -> None:
    # A worker of a full queue must not spin: its due jobs are not claimable, so the wait
    # runs until the first running lease ends (here the timeout comes first).
    _submit(real_store, "a", 2)
    real_store.set_queue_limit("a", 1)
    assert real_store.claim_next("W", 0.6, queues=["a"]) is not None
    assert _timed(lambda: real_store.wait_for_jobs(queues=["a"], timeout=0.3)) >= 0.28
    # Then the lease's end is the due time: the wait ends there, not at the timeout.
    assert _timed(lambda: real_store.wait_for_jobs(queues=["a"], timeout=5)) < 2
    assert real_store.claim_next("X", 30, queues=["a"]) is not None
    real_store.set_queue_limit("a", None)
    assert _timed(lambda: real_store.wait_for_jobs(queues=["a"], timeout=5)) < 0.2


def test_a_claim_buries_no_expired_lease_past_a_full_queue(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    # The claim walks the queue in claim order and stops once it is full: an expired lease
    # on its last attempt met after that stays as it is (burying takes no room, but the
    # walk does not reach it), on every store alike. The next claim with room buries it.
    store.set_queue_limit("a", 2)
    store.submit("a-last", queue="a", max_attempts=1)
    store.submit("a-held", queue="a")
    assert store.claim("a-last", "W", 1) is not None  # expires at t + 1
    held = store.claim("a-held", "W", 30)
    assert held is not None
    clock.advance(0.5)
    store.submit("a-ready", queue="a")  # due at t + 0.5: before a-last in claim order
    clock.advance(0.5)  # a-last's lease has just expired; one place is left
    claimed = store.claim_many("X", 30, 2, queues=["a"])
    assert [lease.job_id for lease in claimed] == ["a-ready"]
    assert store.get("a-last").state == "leased"
    store.complete(held)
    assert store.claim_many("X", 30, 2, queues=["a"]) == []
    assert store.get("a-last").state == "dead"
