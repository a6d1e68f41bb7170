"""Fleet-wide queue rates on every store (issue #18): a token bucket by the store's clock per
rate-limited queue, spent one token per lease granted inside each claim's own statement or
script. The manual clock moves store time: a full bucket gives at most ``burst`` leases,
it refills at ``per_second``, a batch claim takes at most the whole tokens held (and at most
a queue limit's room), complete_and_claim and a claim by id spend tokens too, a buried job
spends none, removing the rate lifts it. Bad input changes nothing. (The race across
processes is in test_queue_rate_race.py.)"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import tenure
import tenure.aio


def _submit(store: tenure.Store, queue: str, count: int) -> list[str]:
    ids = [f"{queue}{n}" for n in range(count)]
    for job_id in ids:
        store.submit(job_id, queue=queue)
    return ids


def _taken(store: tenure.Store, n: int = 50) -> int:
    return len(store.claim_many("W", 300, n, queues=["a", "b"]))


def test_a_full_bucket_gives_burst_then_refills(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    _submit(store, "a", 10)
    _submit(store, "b", 2)
    store.set_queue_rate("a", 2)
    assert store.queue_rates() == {"a": tenure.QueueRate(2.0, 2)}
    assert _taken(store) == 4  # a0, a1 (a burst of 2) and both of b
    assert store.claim_next("X", 30, queues=["a"]) is None
    clock.advance(0.5)  # one token
    assert _taken(store) == 1
    assert _taken(store) == 0
    clock.advance(60)  # the bucket holds at most its burst
    assert _taken(store) == 2
    assert store.get("a5").state == "ready"


def test_a_batch_claim_takes_the_whole_tokens_held(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    _submit(store, "a", 20)
    store.set_queue_rate("a", 4, burst=10)
    assert store.queue_rates() == {"a": tenure.QueueRate(4.0, 10)}
    assert _taken(store) == 10
    clock.advance(0.6)  # 2.4 tokens
    assert _taken(store) == 2
    clock.advance(0.2)  # 0.4 + 0.8
    assert _taken(store) == 1
    clock.advance(0.1)  # 0.2 + 0.4
    assert _taken(store) == 0
    clock.advance(0.1)  # 0.6 + 0.4
    assert _taken(store) == 1


def test_a_rate_and_a_limit_together_take_the_smaller_room(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    _submit(store, "a", 10)
    store.set_queue_limit("a", 3)
    store.set_queue_rate("a", 1, burst=5)
    held = store.claim_many("W", 300, 10, queues=["a"])
    assert len(held) == 3  # the limit's room; 2 tokens left
    store.complete(held[0])
    assert _taken(store) == 1  # one place, two tokens: 1 token left
    store.complete(held[1])
    store.complete(held[2])
    assert _taken(store) == 1  # two places, one token
    assert _taken(store) == 0
    clock.advance(1)
    assert _taken(store) == 1


def test_complete_and_claim_spends_tokens(store: tenure.Store, clock: tenure.ManualClock) -> None:
    _submit(store, "a", 6)
    store.set_queue_rate("a", 1, burst=2)
    held = store.claim_many("W", 300, 10, queues=["a"])
    assert len(held) == 2
    lost, claimed = store.complete_and_claim(held, "W", 300, 10, queues=["a"])
    assert (lost, claimed) == ([], [])
    clock.advance(1)
    lost, claimed = store.complete_and_claim([], "W", 300, 10, queues=["a"])
    assert [lease.job_id for lease in claimed] == ["a2"]
    clock.advance(2.5)
    lost, claimed = store.complete_and_claim(claimed, "W", 300, 10, queues=["a"])
    assert lost == []
    assert [lease.job_id for lease in claimed] == ["a3", "a4"]


def test_a_claim_by_id_needs_a_token(store: tenure.Store, clock: tenure.ManualClock) -> None:
    _submit(store, "a", 3)
    store.set_queue_rate("a", 1, burst=1)
    assert store.claim("a0", "W", 30) is not None
    assert store.claim("a1", "W", 30) is None  # as at a full queue limit
    assert store.get("a1").state == "ready"
    assert store.claim_next("W", 30, queues=["a"]) is None
    clock.advance(1)
    assert store.claim("a1", "W", 30) is not None
    assert store.claim_next("W", 30, queues=["a"]) is None


def test_removing_the_rate_lifts_it(store: tenure.Store) -> None:
    _submit(store, "a", 4)
    store.set_queue_rate("a", 0.5)
    assert store.queue_rates() == {"a": tenure.QueueRate(0.5, 1)}
    assert _taken(store) == 1
    store.set_queue_rate("a", None)
    assert store.queue_rates() == {}
    assert _taken(store) == 3


def test_setting_the_same_rate_keeps_the_bucket_a_new_one_fills_it(store: tenure.Store) -> None:
    _submit(store, "a", 6)
    store.set_queue_rate("a", 1, burst=2)
    assert _taken(store) == 2
    store.set_queue_rate("a", 1, burst=2)  # idempotent: still empty
    assert _taken(store) == 0
    store.set_queue_rate("a", 1, burst=3)  # changed: starts full
    assert _taken(store) == 3
    assert store.queue_rates() == {"a": tenure.QueueRate(1.0, 3)}


def test_a_buried_job_takes_no_token(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("last", queue="a", max_attempts=1)
    assert store.claim("last", "W", 5) is not None
    clock.advance(6)  # its only attempt's lease expired: the next claim buries it
    _submit(store, "a", 2)
    store.set_queue_rate("a", 1, burst=1)
    taken = store.claim_many("X", 30, 10, queues=["a"])
    assert [lease.job_id for lease in taken] == ["a0"]
    assert store.get("last").state == "dead"
    assert store.claim_next("X", 30, queues=["a"]) is None


def test_rates_limits_and_pauses_live_side_by_side(store: tenure.Store) -> None:
    _submit(store, "a", 2)
    store.set_queue_limit("a", 5)
    store.set_queue_rate("a", 3)
    store.pause_queue("a")
    assert store.claim_next("W", 30, queues=["a"]) is None
    store.set_queue_limit("a", None)
    store.resume_queue("a")
    assert store.queue_rates() == {"a": tenure.QueueRate(3.0, 3)}
    assert store.queue_limits() == {}
    assert store.paused_queues() == []
    store.set_queue_rate("a", None)
    assert store.queue_rates() == {}
    assert _taken(store) == 2


@pytest.mark.parametrize(
    ("per_second", "burst", "argument"),
    [
        (0, None, "per_second"),
        (-1, None, "per_second"),
        (1_000_001, None, "per_second"),
        (10**400, None, "per_second"),  # too large for a float
        (5e-324, None, "per_second"),  # below the slowest rate (refused alike everywhere)
        (1e-7, None, "per_second"),
        (float("inf"), None, "per_second"),
        (float("nan"), None, "per_second"),
        (True, None, "per_second"),
        ("3", None, "per_second"),
        (2, 0, "burst"),
        (2, 1_000_001, "burst"),
        (2, 1.5, "burst"),
        (2, True, "burst"),
        (None, 3, "burst"),
    ],
)
def test_bad_rates_are_refused_and_change_nothing(
    store: tenure.Store, per_second: object, burst: object, argument: str
) -> None:
    store.set_queue_rate("a", 2, burst=4)
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.set_queue_rate("a", per_second, burst=burst)  # type: ignore[arg-type]
    assert caught.value.argument == argument
    assert str(caught.value).startswith(argument)
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.set_queue_rate("", 2)
    assert caught.value.argument == "queue"
    assert store.queue_rates() == {"a": tenure.QueueRate(2.0, 4)}


@pytest.mark.anyio
async def test_the_async_store_sets_and_honours_rates(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    for n in range(3):
        await astore.submit(f"a{n}", queue="a")
    await astore.set_queue_rate("a", 1.5, burst=1)
    assert await astore.queue_rates() == {"a": tenure.QueueRate(1.5, 1)}
    assert len(await astore.claim_many("W", 30, 10, queues=["a"])) == 1
    assert await astore.claim("a1", "W", 30) is None
    with pytest.raises(tenure.InvalidArgument):
        await astore.set_queue_rate("a", 0)
    clock.advance(1)
    assert await astore.claim("a1", "W", 30) is not None
    await astore.set_queue_rate("a", None)
    assert await astore.claim("a2", "W", 30) is not None


def _timed(call: Callable[[], object]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def test_an_idle_wait_on_an_empty_bucket_lasts_until_the_next_token(
    real_store: tenure.Store,
) -> None:
    # A worker of a rate-limited queue must not spin: its due jobs wait for a token, so
    # the wait runs until the next token is due (here the timeout comes first)...
    _submit(real_store, "a", 3)
    real_store.set_queue_rate("a", 1.25, burst=1)
    assert real_store.claim_next("W", 30, queues=["a"]) is not None
    assert _timed(lambda: real_store.wait_for_jobs(queues=["a"], timeout=0.3)) >= 0.28
    # ...and no longer: the token's due time ends it, not the timeout.
    assert _timed(lambda: real_store.wait_for_jobs(queues=["a"], timeout=5)) < 2
    assert real_store.claim_next("X", 30, queues=["a"]) is not None


def test_the_bucket_holds_across_priorities_and_claim_paths(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    # Leases of every priority spend the queue's one bucket (Redis keeps a set per
    # priority), by claim_next, by id and by claim_many alike.
    store.submit("hi", queue="a", priority=5)
    store.submit("lo", queue="a", priority=-5)
    _submit(store, "a", 3)
    store.set_queue_rate("a", 1, burst=3)
    first = store.claim_next("W", 30, queues=["a"])
    assert first is not None
    assert first.job_id == "hi"
    assert store.claim("lo", "W", 30) is not None
    assert [lease.job_id for lease in store.claim_many("W", 30, 10, queues=["a"])] == ["a0"]
    assert store.claim("a1", "W", 30) is None
    clock.advance(2)
    assert [lease.job_id for lease in store.claim_many("W", 30, 10, queues=["a"])] == [
        "a1",
        "a2",
    ]
