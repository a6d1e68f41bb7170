"""Named locks (`store.lock`, `tenure.Lock`, `tenure.AsyncLock`) on every store, at the
level of the store's own guarantees: tokens never repeat for a name (after release, after
expiry, after a purge of finished jobs, after the lock's job itself was purged), only the
holder renews, and bad input is refused before anything changes, sync and async.

What tests/locks already shows on every store is not repeated here: exclusion, a held
lock refused to a non-blocking acquire, a blocking acquire timing out (`LockNotAcquired`),
waking on release, loss inside the body, fenced writes of a stale holder refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

import tenure
import tenure.aio
from tests.conformance._bad_values import BAD_DELAYS, BAD_IDS, BAD_OPTIONAL_IDS, BAD_TTLS
from tests.conformance._support import forge, fresh_secret, job_view, snapshot

TTL = 10.0
NAME = "report"
JOB = "lock:report"

BAD_NAMES: list[Any] = [*BAD_IDS, "x" * 244]  # a name leaves room for the queue's prefix
# Timeouts: None and +inf mean "wait forever", so they are not bad.
BAD_TIMEOUTS: list[Any] = [v for v in BAD_DELAYS if v is not None and v != float("inf")]
BAD_BLOCKING: list[Any] = [1, 0, "yes", 1.0, None]
BAD_ACQUIRE_BLOCKING: list[Any] = [1, 0, "yes", 1.0]  # None: the lock's own setting


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for the lock's watchdog thread (which reads the manual clock) to decide."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def finish_jobs(store: tenure.Store, *job_ids: str) -> None:
    for job_id in job_ids:
        store.submit(job_id)
        lease = store.claim(job_id, "worker", TTL)
        assert lease is not None
        store.complete(lease, "ok")


def test_tokens_never_repeat_across_release_expiry_and_purge(
    store: tenure.Store, open_store: Any, clock: tenure.ManualClock
) -> None:
    tokens: list[int] = []
    for _ in range(2):  # released: the next holder goes on from the same sequence
        with store.lock(NAME, ttl=TTL) as lock:
            tokens.append(lock.token.generation)
    stale = tenure.Lock(store, NAME, TTL)
    assert stale.acquire(blocking=False)
    tokens.append(stale.token.generation)
    clock.advance(TTL + 1)  # expired by the store's clock: another client takes it
    with open_store().lock(NAME, ttl=TTL, blocking=False) as lock:
        tokens.append(lock.token.generation)
    wait_until(lambda: stale.lost)
    stale.release()  # quiet: known lost
    # Locks share the job table: a purge of finished jobs leaves a lock's job alone (it is
    # ready or leased, never finished) and the sequence goes on.
    finish_jobs(store, "J1", "J2")
    clock.advance(1)
    assert store.purge(older_than=0) == 2
    assert store.get(JOB).state == "ready"
    with store.lock(NAME, ttl=TTL) as lock:
        tokens.append(lock.token.generation)
    # A lock's job broken by an operator and purged: created again, above every old token
    # (the store's generation floor), from the same client and from a new one.
    store.cancel(JOB, reason="operator")
    clock.advance(1)
    assert store.purge(older_than=0) == 1
    with pytest.raises(tenure.JobNotFound):
        store.get(JOB)
    with store.lock(NAME, ttl=TTL) as lock:
        tokens.append(lock.token.generation)
    with open_store().lock(NAME, ttl=TTL) as lock:
        tokens.append(lock.token.generation)
    assert len(tokens) == 7
    assert tokens == sorted(set(tokens)), tokens  # strictly increasing, so never repeated
    assert store.get(JOB).queue == "tenure.lock:report"


def test_only_the_holder_renews(
    store: tenure.Store, open_store: Any, clock: tenure.ManualClock
) -> None:
    holder = tenure.Lock(store, NAME, TTL)
    assert holder.acquire()
    lease = holder.lease
    before = job_view(store.get(JOB))
    forgeries = [
        forge(lease, secret=fresh_secret()),
        forge(lease, owner="Mallory"),
        forge(lease, generation=lease.generation + 1),
    ]
    for fake in forgeries:
        with pytest.raises(tenure.LeaseLost):
            store.renew(fake)
        assert job_view(store.get(JOB)) == before
    clock.advance(TTL + 1)  # the holder stalls past its TTL
    with open_store().lock(NAME, ttl=TTL, blocking=False) as taker:
        assert taker.token.generation > lease.generation
        taken = job_view(store.get(JOB))
        with pytest.raises(tenure.LeaseLost) as caught:
            store.renew(lease)  # the stale holder's renewal
        assert caught.value.current_generation == taker.token.generation
        assert job_view(store.get(JOB)) == taken
        wait_until(lambda: holder.lost)
        with pytest.raises(tenure.LeaseLost):
            holder.check()
        assert taker.held
    holder.release()


# -- bad input -------------------------------------------------------------------------

Call = Callable[[tenure.Store, Any], object]

CASES: list[tuple[str, str, list[Any], Call]] = [
    ("Lock", "name", BAD_NAMES, lambda s, v: tenure.Lock(s, v, TTL)),
    ("Lock", "ttl", BAD_TTLS, lambda s, v: tenure.Lock(s, NAME, v)),
    ("Lock", "timeout", BAD_TIMEOUTS, lambda s, v: tenure.Lock(s, NAME, TTL, timeout=v)),
    ("Lock", "blocking", BAD_BLOCKING, lambda s, v: tenure.Lock(s, NAME, TTL, blocking=v)),
    ("Lock", "owner", BAD_OPTIONAL_IDS, lambda s, v: tenure.Lock(s, NAME, TTL, owner=v)),
    ("lock", "name", BAD_NAMES, lambda s, v: s.lock(v, ttl=TTL)),
    ("lock", "ttl", BAD_TTLS, lambda s, v: s.lock(NAME, ttl=v)),
    ("lock", "timeout", BAD_TIMEOUTS, lambda s, v: s.lock(NAME, ttl=TTL, timeout=v)),
    ("lock", "timeout", [0.5, 3], lambda s, v: s.lock(NAME, timeout=v, blocking=False)),
    ("lock", "blocking", BAD_BLOCKING, lambda s, v: s.lock(NAME, ttl=TTL, blocking=v)),
    ("acquire", "timeout", BAD_TIMEOUTS, lambda s, v: tenure.Lock(s, NAME, TTL).acquire(timeout=v)),
    (
        "acquire",
        "blocking",
        BAD_ACQUIRE_BLOCKING,
        lambda s, v: tenure.Lock(s, NAME, TTL).acquire(blocking=v),
    ),
    ("Leader", "name", BAD_NAMES, lambda s, v: tenure.Leader(s, v, TTL)),
    ("Leader", "ttl", BAD_TTLS, lambda s, v: tenure.Leader(s, NAME, v)),
    ("elect", "name", BAD_NAMES, lambda s, v: s.elect(v, TTL)),
]
IDS = [f"{entry}-{argument}" for entry, argument, _, _ in CASES]


@pytest.fixture
def held(store: tenure.Store) -> tenure.Store:
    """A store where the lock ``report`` is held (its job leased), beside a ready job."""
    store.submit("R")
    lock = tenure.Lock(store, NAME, TTL, owner="holder")
    assert lock.acquire(blocking=False)
    return store


def refused(what: str, argument: str, call: Callable[[], object]) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        call()
    refusal = caught.value
    assert refusal.argument == argument, f"{what}: names {refusal.argument!r}: {refusal}"
    assert len(refusal.rule) > 10, f"{what}: the rule is not explained: {refusal}"


@pytest.mark.parametrize(("entry", "argument", "values", "call"), CASES, ids=IDS)
def test_bad_input_is_refused_and_changes_nothing(
    held: tenure.Store, entry: str, argument: str, values: list[Any], call: Call
) -> None:
    before = snapshot(held)
    for value in values:
        what = f"{entry}({argument}={value!r:.60})"
        refused(what, argument, lambda value=value: call(held, value))
        assert snapshot(held) == before, f"{what} changed the store"


ASYNC_CASES: list[tuple[str, str, list[Any], Callable[[tenure.aio.AsyncStore, Any], object]]] = [
    ("AsyncLock", "name", BAD_NAMES, lambda s, v: tenure.AsyncLock(s, v, TTL)),
    ("AsyncLock", "ttl", BAD_TTLS, lambda s, v: tenure.AsyncLock(s, NAME, v)),
    ("lock", "timeout", BAD_TIMEOUTS, lambda s, v: s.lock(NAME, ttl=TTL, timeout=v)),
    ("lock", "blocking", BAD_BLOCKING, lambda s, v: s.lock(NAME, ttl=TTL, blocking=v)),
    ("lock", "owner", BAD_OPTIONAL_IDS, lambda s, v: s.lock(NAME, ttl=TTL, owner=v)),
    ("AsyncLeader", "name", BAD_NAMES, lambda s, v: tenure.AsyncLeader(s, v, TTL)),
    ("elect", "ttl", BAD_TTLS, lambda s, v: s.elect(NAME, v)),
]


@pytest.mark.anyio
async def test_bad_input_is_refused_and_changes_nothing_async(
    held: tenure.Store, astore: tenure.aio.AsyncStore
) -> None:
    before = snapshot(held)
    for entry, argument, values, call in ASYNC_CASES:
        for value in values:
            what = f"async {entry}({argument}={value!r:.60})"
            refused(what, argument, lambda value=value, call=call: call(astore, value))
    for value in BAD_TIMEOUTS:  # acquire's own timeout is checked before any call
        with pytest.raises(tenure.InvalidArgument, match=r"^timeout: "):
            await tenure.AsyncLock(astore, NAME, TTL).acquire(timeout=value)
    assert snapshot(held) == before


@pytest.mark.anyio
async def test_async_tokens_never_repeat_and_a_stale_renewal_is_refused(
    astore: tenure.aio.AsyncStore, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    tokens: list[int] = []
    async with astore.lock(NAME, ttl=TTL) as lock:
        tokens.append(lock.token.generation)
    stale = tenure.AsyncLock(astore, NAME, TTL)
    assert await stale.acquire(blocking=False)
    tokens.append(stale.token.generation)
    clock.advance(TTL + 1)
    async with tenure.AsyncLock(astore, NAME, TTL, blocking=False) as taker:
        tokens.append(taker.token.generation)
        with pytest.raises(tenure.LeaseLost) as caught:
            await astore.renew(stale.lease)
        assert caught.value.current_generation == taker.token.generation
    with anyio.fail_after(5):
        while not stale.lost:  # noqa: ASYNC110 - the watchdog thread decides
            await anyio.sleep(0.01)
    await stale.release()  # quiet: known lost
    finish_jobs(store, "J1")
    clock.advance(1)
    assert await astore.purge(older_than=0) == 1
    async with astore.lock(NAME, ttl=TTL) as lock:
        tokens.append(lock.token.generation)
    assert tokens == sorted(set(tokens)), tokens
