"""`store.wait` returns once the job is done, dead *or cancelled* (docs/design.md §7), on
every store, when another client ends it: a cancel of a ready job, a cancel of a leased
job, and a claim that buries a job whose last allowed lease expired. (Complete and fail
are tests/conformance/test_enqueue_wait.py's.)

Each ending is made while the waiter is known to be blocked, so that what brings it back
is the store's wake-up of that ending and nothing else: PostgreSQL's trigger on
``tenure_jobs`` notifying ``tenure_end_<schema>`` (the waiter's registration in
``tenure_waiters`` is looked for first), Redis's ``ended()`` push onto the job's list in
cancel.lua and in bury (the waiter's ``:waiting`` marker is looked for first), SQLite's
20 ms poll of the row. The store's clock is the test's `tenure.ManualClock`; the wait's own
timeout is real time, and it is kept far above the bound on how long the waiter may take.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest

import tenure
from tenure.stores.postgres import parse_postgres_url
from tenure.stores.redis import Keys, parse_redis_url
from tests.backends import Backend, postgres_admin, redis_client

# The wait's timeout; a waiter that was not woken comes back only at its end (PostgreSQL)
# or at the end of a blocking read of half the client's timeout (Redis, see `start_waiter`).
WAIT_TIMEOUT = 20.0
# How long a woken waiter may take to come back, in real time.
PROMPTLY = 2.0


def _postgres_blocked(url: str, job_id: str, application_name: str) -> bool:
    """Registered in tenure_waiters, and the waiter's connection idle after wait_get.sql
    (its read of the job, which follows the registration), listening. A cancel before that
    read would end the wait through the read instead of the notification."""
    schema = parse_postgres_url(url).schema
    with postgres_admin() as admin:
        registered = admin.execute(
            f'SELECT count(*) FROM "{schema}".tenure_waiters WHERE job_id = %s', (job_id,)
        ).fetchone()
        # (pg_stat_activity keeps the start of the last statement only: its first comment.)
        listening = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND state = 'idle' AND query LIKE %s",
            (application_name, "-- store.wait: the job as its last writer committed it.%"),
        ).fetchone()
    return bool(registered and registered[0] and listening and listening[0])


def _redis_blocked(url: str, job_id: str) -> bool:
    """The waiter's marker is set, by the very script that read the job unfinished
    (wait_job.lua): a push made before the blocking read that follows is still there for
    that read to take."""
    client = redis_client()
    try:
        return bool(client.exists(Keys(parse_redis_url(url).prefix).job(job_id) + ":waiting"))
    finally:
        client.close()


def _sqlite_blocked() -> bool:
    """SQLite registers nothing: its waiter reads the row every 20 ms. Let it read the job
    unfinished a few times first (not for correctness: a first read that sees the job ended
    ends the wait the same way)."""
    time.sleep(0.1)
    return True


class Waiter:
    """``store.wait(job_id)`` on a thread of its own; `end` runs an ending once the wait is
    blocked (``blocked()`` says so) and tells how long the waiter took to come back."""

    def __init__(self, store: tenure.Store, job_id: str, blocked: Callable[[], bool]) -> None:
        self.blocked = blocked
        self.got: list[tenure.Job | BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(store, job_id), daemon=True)
        self.thread.start()

    def _run(self, store: tenure.Store, job_id: str) -> None:
        try:
            self.got.append(store.wait(job_id, timeout=WAIT_TIMEOUT))
        except BaseException as exc:  # reported by `end`, on the test's thread
            self.got.append(exc)

    def end(self, ending: Callable[[], object]) -> tuple[tenure.Job, float]:
        deadline = time.monotonic() + 10
        while not self.blocked():
            assert time.monotonic() < deadline, "the waiter never blocked"
            time.sleep(0.005)
        assert self.got == [], "the wait returned before the job ended"
        ending()
        ended = time.monotonic()
        self.thread.join(timeout=PROMPTLY)
        took = time.monotonic() - ended
        assert not self.thread.is_alive(), f"the waiter was not woken within {PROMPTLY} s"
        (job,) = self.got
        assert isinstance(job, tenure.Job), job
        return job, took


@pytest.fixture
def start_waiter(
    backend: Backend, url: str, open_store: Callable[..., tenure.Store]
) -> Callable[[str], Waiter]:
    """A waiter of a job on a client of its own."""

    def start(job_id: str) -> Waiter:
        if backend.name == "postgres":
            name = f"waiter-{uuid.uuid4().hex[:12]}"  # to find its connection
            waiting = open_store(url=f"{url}&application_name={name}")
            return Waiter(waiting, job_id, lambda: _postgres_blocked(url, job_id, name))
        if backend.name == "redis":
            # A blocking read lasts half the client's timeout, after which the waiter looks
            # again by itself: a long one, so that only the wake-up can bring it back
            # within PROMPTLY.
            waiting = open_store(url=f"{url}&timeout=30")
            return Waiter(waiting, job_id, lambda: _redis_blocked(url, job_id))
        return Waiter(open_store(), job_id, _sqlite_blocked)

    return start


def test_a_cancel_of_a_ready_job_wakes_its_waiter(
    store: tenure.Store, start_waiter: Callable[[str], Waiter]
) -> None:
    store.submit("J", {"n": 1})
    waiter = start_waiter("J")
    job, took = waiter.end(lambda: store.cancel("J", "not needed"))
    assert (job.state, job.error, job.generation) == ("cancelled", "not needed", 0)
    assert took < PROMPTLY


def test_a_cancel_of_a_leased_job_wakes_its_waiter(
    store: tenure.Store,
    open_store: Callable[..., tenure.Store],
    start_waiter: Callable[[str], Waiter],
) -> None:
    worker = open_store()
    store.submit("J")
    lease = worker.claim("J", "A", 30)
    assert lease is not None
    waiter = start_waiter("J")
    job, took = waiter.end(lambda: store.cancel("J", "stop"))
    # Cancelled through the lease protocol: the next generation, no holder's lease.
    assert (job.state, job.error, job.generation) == ("cancelled", "stop", 2)
    assert job.lease_until is None
    assert took < PROMPTLY
    with pytest.raises(tenure.LeaseLost) as lost:
        worker.complete(lease, "late")
    assert lost.value.reason == "cancelled"


@pytest.mark.parametrize("how", ["claim", "claim_next"])
def test_a_claim_that_buries_the_job_wakes_its_waiter(
    store: tenure.Store,
    open_store: Callable[..., tenure.Store],
    clock: tenure.ManualClock,
    start_waiter: Callable[[str], Waiter],
    how: str,
) -> None:
    # A job dies through a claim when the lease of its last allowed attempt expired: the
    # next claim that meets it buries it (docs/design.md §3.2), by name or on its way
    # through the queue. Nobody completes or fails it, so only the claim can wake a waiter.
    first, second = open_store(), open_store()
    store.submit("J", max_attempts=1)
    assert first.claim("J", "A", 5) is not None
    waiter = start_waiter("J")
    clock.advance(6)  # A stalls past its lease; the job waits for the next claim to see it

    def bury() -> None:
        if how == "claim":
            assert second.claim("J", "B", 30) is None
        else:
            assert second.claim_next("B", 30) is None

    job, took = waiter.end(bury)
    assert (job.state, job.generation, job.attempts) == ("dead", 1, 1)
    assert job.error == "lease expired during the last allowed attempt"
    assert took < PROMPTLY


@pytest.mark.parametrize("state", ["ready", "leased"])
def test_wait_without_time_returns_a_cancelled_job_at_once(store: tenure.Store, state: str) -> None:
    store.submit("J")
    if state == "leased":
        assert store.claim("J", "A", 30) is not None
    store.cancel("J", "stop")
    # No time to wait at all: the job as it is, not WaitTimeout.
    job = store.wait("J", timeout=0)
    assert (job.state, job.error) == ("cancelled", "stop")
