"""Named locks (`tenure.lock`, `tenure.Lock`) on every backend: tokens, exclusion, loss,
waiting (bad input, and tokens across purges: tests/conformance/test_locks.py). The manual
clock drives loss; real time only bounds the waits."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence
from tenure.locks import lock_ids
from tenure.locks._core import WAIT_SLICE

TTL = 10.0


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Counting:
    """Counts the calls of a store's methods by name (to show waiting does not spin). The
    methods of the store itself are wrapped: a lock takes nothing but a `tenure.Store`."""

    METHODS = ("submit", "get", "claim", "wait_for_jobs", "renew", "release")

    def __init__(self, store: tenure.Store) -> None:
        self.store = store
        self.calls: dict[str, int] = {}
        for name in self.METHODS:
            setattr(store, name, self.counted(name, getattr(store, name)))

    def counted(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return call


def enter(lock: tenure.Lock) -> None:
    with lock:
        pytest.fail("entered a held lock")


def test_tokens_strictly_increase_and_release_lets_the_next_in(store: tenure.Store) -> None:
    tokens = []
    for _ in range(3):
        with tenure.lock(store, "report", ttl=TTL) as lock:
            assert lock.held
            assert not lock.lost
            tokens.append(lock.token)
        assert not lock.held
    assert [t.generation for t in tokens] == [1, 2, 3]
    assert {t.job_id for t in tokens} == {"lock:report"}
    job = store.get("lock:report")
    assert (job.queue, job.state, job.attempts) == ("tenure.lock:report", "ready", 0)


def test_a_released_locks_lease_is_kept_as_a_record_and_its_token_refused(
    store: tenure.Store,
) -> None:
    # As a worker's settled jobs are: the registry keeps how the lease ended, not its
    # handle, and still refuses the token.
    from tenure.worker import check_token, token_state
    from tenure.worker._lease import REGISTRY

    with tenure.lock(store, "records", ttl=TTL) as lock:
        token = lock.token
        assert token_state(token) == "held"
    found = REGISTRY._leases[(token.job_id, token.generation)]
    # (Other tests' stores in this process may have had a lock of that name: a list.)
    entries = found if isinstance(found, list) else [found]
    ours = [
        e for e in entries if (e[0] if isinstance(e, tuple) else e.lease.store_id) == store.store_id
    ]
    assert ours == [(store.store_id, "ended")]
    assert token_state(token) == "ended"
    with pytest.raises(tenure.LeaseLost):
        check_token(token)


def test_a_held_lock_is_refused_to_others(store: tenure.Store, open_store: Any) -> None:
    other = open_store()
    with tenure.lock(store, "report", ttl=TTL) as lock:
        assert not tenure.Lock(other, "report", TTL).acquire(blocking=False)
        with pytest.raises(tenure.LockNotAcquired, match="was not acquired") as caught:
            enter(tenure.lock(other, "report", ttl=TTL, blocking=False))
        assert lock.owner in str(caught.value)
        assert isinstance(caught.value, TimeoutError)
    with tenure.lock(other, "report", ttl=TTL, blocking=False) as second:
        assert second.token.generation == 2


def test_lock_jobs_are_not_claimed_from_user_queues(store: tenure.Store) -> None:
    with tenure.lock(store, "report", ttl=TTL):
        pass
    assert store.claim_next("worker", TTL) is None
    assert store.claim_next("worker", TTL, queues=["default", "tenure.locks"]) is None


def test_a_job_id_taken_by_a_user_job_is_refused(store: tenure.Store) -> None:
    store.submit("lock:report", {"user": "job"})
    with pytest.raises(tenure.InvalidArgument, match="name") as caught:
        tenure.Lock(store, "report", TTL).acquire()
    assert "queue 'default'" in str(caught.value)
    assert store.get("lock:report").state == "ready"  # the user's job is untouched


def test_mutual_exclusion_with_threads(open_real_store: Any) -> None:
    inside: list[int] = []
    overlaps: list[tuple[int, int]] = []
    tokens: list[int] = []
    guard = threading.Lock()

    def take(n: int) -> None:
        store = open_real_store()
        for _ in range(5):
            with tenure.lock(store, "shared", ttl=5, timeout=30) as lock:
                with guard:
                    if inside:
                        overlaps.append((inside[0], n))
                    inside.append(n)
                    tokens.append(lock.token.generation)
                time.sleep(0.002)
                with guard:
                    inside.remove(n)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not overlaps
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 20


def test_a_stalled_holder_loses_and_its_fenced_writes_are_refused(
    store: tenure.Store, open_store: Any, clock: tenure.ManualClock, tmp_path: Path
) -> None:
    dest = sqlite3.connect(tmp_path / "dest.db")
    stale = tenure.Lock(store, "report", TTL)
    assert stale.acquire()
    with fence.sql_fence(dest, stale.token) as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS w (g INTEGER)")
        cur.execute("INSERT INTO w VALUES (?)", (stale.token.generation,))
    clock.advance(TTL + 1)  # the holder stalls past its TTL: no renewal could land
    wait_until(lambda: stale.lost)
    assert stale.lost_reason
    assert tenure.worker.token_state(stale.token) == "lost"
    with tenure.lock(open_store(), "report", ttl=TTL, blocking=False) as fresh:
        assert fresh.token.generation > stale.token.generation
        with fence.sql_fence(dest, fresh.token) as cur:
            cur.execute("INSERT INTO w VALUES (?)", (fresh.token.generation,))
    with pytest.raises(tenure.LeaseLost), fence.sql_fence(dest, stale.token) as cur:
        cur.execute("INSERT INTO w VALUES (?)", (-1,))
    with pytest.raises(tenure.LeaseLost, match="report"):
        stale.check()
    stale.release()  # quiet for a lost lock
    assert stale.lost
    assert [g for (g,) in dest.execute("SELECT g FROM w")] == [1, 2]
    dest.close()


def test_loss_inside_with_raises_at_the_end(store: tenure.Store, clock: tenure.ManualClock) -> None:
    lock = tenure.lock(store, "report", ttl=TTL)

    def stall() -> None:
        with lock:
            clock.advance(TTL + 1)
            wait_until(lambda: lock.lost)

    with pytest.raises(tenure.LeaseLost, match="was lost while held") as caught:
        stall()
    assert store.get("lock:report").state in ("ready", "leased")
    message = str(caught.value)
    assert message.startswith("lock 'report' (generation 1, ")
    assert "its lease must be taken as expired: another holder may have it now" in message
    assert ".." not in message
    assert "job" not in message
    assert lock.lost_reason is not None
    assert lock.lost_reason in message


def test_renewals_keep_a_long_holder(store: tenure.Store, clock: tenure.ManualClock) -> None:
    with tenure.lock(store, "report", ttl=TTL) as lock:
        first = lock.lease.lease_until
        for _ in range(6):  # 3 TTLs in steps of half a TTL: renewed at a third of it
            clock.advance(TTL / 2)
            wait_until(lambda: lock.lease.lease_until >= clock.time() + TTL - 1e-6, timeout=10)
        assert not lock.lost
        assert lock.lease.lease_until > first
    assert tenure.worker.token_state(lock.token) == "ended"


def test_release_refunds_the_attempt_and_expiry_counts_one(
    store: tenure.Store, open_store: Any, clock: tenure.ManualClock
) -> None:
    stale = tenure.Lock(store, "report", TTL)
    stale.acquire()
    clock.advance(TTL + 1)
    wait_until(lambda: stale.lost)
    with tenure.lock(open_store(), "report", ttl=TTL):
        pass
    job = store.get("lock:report")
    assert (job.attempts, job.max_attempts, job.generation) == (1, 1_000_000, 2)


def test_blocking_acquire_is_woken_by_release_without_spinning(
    real_store: tenure.Store, open_real_store: Any
) -> None:
    holder = tenure.Lock(real_store, "report", 30)
    holder.acquire()
    counting = Counting(open_real_store())
    got: list[float] = []

    def wait() -> None:
        lock = tenure.Lock(counting.store, "report", 30)
        assert lock.acquire(timeout=20)
        got.append(time.monotonic())
        lock.release()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(1.0)  # the waiter waits a second: it must not be polling the lock meanwhile
    assert not got
    assert counting.calls.get("claim", 0) <= 2, counting.calls
    released = time.monotonic()
    holder.release()
    waiter.join(10)
    assert got, "the waiter never got the lock"
    # Woken by the release itself: a waiter that missed it would wake at the end of its wait
    # slice, WAIT_SLICE (5 s) after it began waiting, so 4 s after this release. The bound
    # leaves a loaded machine (this test runs beside others) room below that.
    assert got[0] - released < WAIT_SLICE - 3, f"woken {got[0] - released:.3f} s after release"
    assert counting.calls["claim"] <= 4, counting.calls


def test_blocking_acquire_times_out(real_store: tenure.Store, open_real_store: Any) -> None:
    with tenure.lock(real_store, "report", ttl=30):
        started = time.monotonic()
        with pytest.raises(tenure.LockNotAcquired, match=r"still held after 0\.3 s"):
            enter(tenure.lock(open_real_store(), "report", ttl=30, timeout=0.3))
        assert 0.3 <= time.monotonic() - started < 3


def test_a_lock_is_not_reentrant(store: tenure.Store) -> None:
    lock = tenure.Lock(store, "report", TTL)
    assert lock.acquire()
    token = lock.token
    # As threading.Lock answers: not now. The holding goes on, untouched.
    assert lock.acquire(blocking=False) is False
    assert lock.held
    assert lock.token == token
    # A waiting acquire could only wait for its own release (threading.Lock: a deadlock,
    # or the whole timeout): refused at once, saying so.
    started = time.monotonic()
    for wait in ({}, {"timeout": 5.0}, {"blocking": True}):
        with pytest.raises(tenure.LockNotAcquired, match="not reentrant") as caught:
            lock.acquire(**wait)
        assert "blocking=False" in str(caught.value)
    with pytest.raises(tenure.LockNotAcquired, match="not reentrant"), lock:
        pytest.fail("entered a lock this object holds")
    assert time.monotonic() - started < 2
    assert lock.held
    assert lock.token == token
    lock.release()
    with pytest.raises(tenure.LockNotAcquired, match="not held"):
        lock.release()
    # A lock object made not to wait answers False on its own holding too.
    quick = tenure.Lock(store, "quick", TTL, blocking=False)
    assert quick.acquire()
    assert quick.acquire() is False
    with pytest.raises(tenure.LockNotAcquired, match="not reentrant"), quick:
        pytest.fail("entered a lock this object holds")
    quick.release()


def test_names_are_independent(store: tenure.Store) -> None:
    with tenure.lock(store, "a", ttl=TTL) as a, tenure.lock(store, "b", ttl=TTL) as b:
        assert a.token.job_id != b.token.job_id
    assert lock_ids("a") == ("lock:a", "tenure.lock:a")


def test_store_lock_is_tenure_lock(store: tenure.Store, open_store: Any) -> None:
    with store.lock("report", ttl=TTL) as lock:
        assert isinstance(lock, tenure.Lock)
        assert lock.token.generation == 1
        with pytest.raises(tenure.LockNotAcquired):
            enter(open_store().lock("report", ttl=TTL, blocking=False))
    with pytest.raises(tenure.InvalidArgument, match="ttl"):
        store.lock("report", ttl=0)


def test_a_dead_lock_job_is_refused_at_once(store: tenure.Store) -> None:
    from tenure.locks._core import check_lock_job

    with tenure.lock(store, "report", ttl=TTL):
        pass
    job = dataclasses.replace(store.get("lock:report"), state=tenure.JobState.DEAD)
    with pytest.raises(tenure.LockNotAcquired, match="cannot be acquired") as caught:
        check_lock_job(job, "report")
    assert caught.value.name == "report"


def _keeper_threads() -> set[threading.Thread]:
    names = ("tenure-renewer", "tenure-lease-watchdog")
    return {t for t in threading.enumerate() if t.name in names}


def test_locks_of_one_store_share_one_keeper(store: tenure.Store) -> None:
    with tenure.lock(store, "warm-up", ttl=TTL):
        pass
    # The keeper's own threads, as objects: the process has others (pool workers, the
    # tests' schema dropper) that come and go on their own, and the keepers of earlier
    # tests' stores end whenever those stores are collected. No new one may start.
    before = _keeper_threads()
    held = [tenure.Lock(store, f"lock-{n}", TTL) for n in range(10)]
    for lock in held:
        assert lock.acquire(blocking=False)
    assert not _keeper_threads() - before
    assert before  # the warm-up lock started them
    for lock in held:
        lock.release()


def test_cancel_breaks_a_lock_and_tokens_never_repeat_after_delete(
    store: tenure.Store, open_store: Any
) -> None:
    holder = tenure.Lock(store, "report", TTL)
    assert holder.acquire()
    assert holder.token.generation == 1
    store.cancel("lock:report", reason="operator broke the lock")
    other = open_store()
    with pytest.raises(tenure.LockNotAcquired, match="cancelled"):
        tenure.Lock(other, "report", TTL).acquire(blocking=False)
    with pytest.raises(tenure.LeaseLost):
        holder.release()  # its lease was moved on by the cancel
    store.requeue("lock:report")
    with tenure.lock(other, "report", ttl=TTL, blocking=False) as after_requeue:
        requeued = after_requeue.token.generation
    assert requeued > 2  # the cancel took a generation of its own
    store.cancel("lock:report")
    store.delete("lock:report")  # gone: the next use creates it again
    with tenure.lock(other, "report", ttl=TTL, blocking=False) as after_delete:
        assert after_delete.token.generation > requeued  # the store's generation floor
    assert store.get("lock:report").queue == "tenure.lock:report"


def _no_job_talk(message: str) -> None:
    """A lock's loss in the lock's words: no sentence doubled up, nothing of a worker."""
    assert ".." not in message, message
    for words in ("worker", "this job", "do not retry with this lease", "Another holder"):
        assert words not in message, message


def test_a_lock_an_operator_cancelled_says_so(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    from tenure.worker import check_token, token_state

    lock = tenure.lock(store, "breakme", ttl=TTL)
    checked: list[str] = []

    def hold() -> None:
        with lock:
            store.cancel("lock:breakme", reason="operator broke the lock")
            clock.advance(TTL / 2)  # its next renewal is refused: the lock is lost
            wait_until(lambda: lock.lost)
            with pytest.raises(tenure.LeaseLost) as caught:
                lock.check()
            checked.append(str(caught.value))

    with pytest.raises(tenure.LeaseLost, match="was lost while held") as caught:
        hold()
    message = str(caught.value)
    assert checked == [message]  # lock.check() inside and the end of the with say the same
    assert message.startswith("lock 'breakme' (generation 1, ")
    assert "renewal rejected by the store: an operator cancelled the lock" in message
    assert "'operator broke the lock'" in message  # the operator's reason, read back
    # Nobody can hold it now (acquires refuse a cancelled lock), so the error says how to
    # make it usable again rather than that another holder may have it.
    assert "nobody can take it until it is requeued" in message
    assert "store.requeue('lock:breakme')" in message
    assert "fenced writes with its token (1:lock%3Abreakme) are refused" in message
    _no_job_talk(message)
    assert message.endswith("are refused.")
    assert lock.lost_reason is not None
    assert lock.lost_reason.startswith("renewal rejected by the store: an operator cancelled")
    assert token_state(lock.token) == "lost"
    with pytest.raises(tenure.LeaseLost) as fenced:
        check_token(lock.token)
    assert str(fenced.value) == (
        "refusing to act for job 'lock:breakme' generation 1: its lease was lost in this "
        "process. Stop the work done under this token."
    )
    with pytest.raises(tenure.LockNotAcquired, match="an operator cancelled it") as refused:
        tenure.Lock(store, "breakme", TTL).acquire(blocking=False)
    assert "tenure jobs requeue lock:breakme" in str(refused.value)


def test_a_release_refused_after_a_cancel_says_so(store: tenure.Store) -> None:
    from tenure.worker import check_token, token_state

    lock = tenure.Lock(store, "breakme", TTL)
    assert lock.acquire()
    store.cancel("lock:breakme")  # no reason given: the store's default says nothing more
    with pytest.raises(tenure.LeaseLost, match="was lost while held") as caught:
        lock.release()  # before any renewal noticed it
    message = str(caught.value)
    assert "release rejected by the store: an operator cancelled the lock: nobody can take" in (
        message
    )
    _no_job_talk(message)
    assert lock.lost
    assert not lock.held
    # The registry says how it ended: lost, not released.
    assert token_state(lock.token) == "lost"
    with pytest.raises(tenure.LeaseLost, match="was lost in this process"):
        check_token(lock.token)


def test_check_token_of_a_released_lock_speaks_of_this_process(store: tenure.Store) -> None:
    from tenure.worker import check_token

    with tenure.lock(store, "res2", ttl=TTL) as lock:
        pass
    with pytest.raises(tenure.LeaseLost) as caught:
        check_token(lock.token)
    assert str(caught.value) == (
        "refusing to act for job 'lock:res2' generation 1: its lease has already ended "
        "(settled or released) in this process. Stop the work done under this token."
    )


def test_a_stale_holders_refused_renewal_is_told_in_the_locks_words() -> None:
    from tenure.locks._core import refusal_words

    def refusal(reason: str, now: int = 2, owner: str | None = "b") -> str:
        exc = tenure.LeaseLost(
            "store words.",
            job_id="lock:r",
            generation=1,
            current_generation=now,
            current_owner=owner,
            reason=reason,
        )
        return refusal_words(exc, "r")

    assert refusal("claimed") == (
        "its lease expired and another holder took the lock (generation 2, owner 'b')"
    )
    assert "another holder may have it" in refusal("superseded")
    assert refusal("expired", now=1) == refusal("ended", now=1)
    assert "expired by the store's clock" in refusal("expired", now=1)
    assert "no longer exists" in refusal("missing")
    assert "mismatch" in refusal("mismatch")
    for words in map(refusal, ("cancelled", "claimed", "superseded", "expired", "missing")):
        assert not words.endswith("."), words  # the lock's error goes on after it
        assert "store words" not in words, words
