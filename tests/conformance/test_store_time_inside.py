"""Store time is read inside the atomic operation that uses it (docs/design.md §2.1), on
every store, with the stores' own clocks (no `tenure.ManualClock`: the hook would replace
the very reading under test).

1. A lease's expiry passes while something else holds what an operation must wait for: a
   renew by the holder A and a claim by B, both sent before the expiry, wait through it.
   SQLite reads the time once the write transaction holds the file's write lock (the lock
   is another connection's ``BEGIN IMMEDIATE``) and Redis inside the script (the scripts
   wait behind ``CLIENT PAUSE ... WRITE``, on a redis-server of the test's own, so that no
   other test is paused): both are judged by the time they really run, after the expiry.
   A's renew is refused and B's claim takes the job, its lease running TTL from then.
   PostgreSQL reads the time once at the start of each statement (a ``MATERIALIZED`` CTE
   of ``clock_timestamp()``, docs/postgres.md#time), before the statement waits for a row
   lock (the lock is another connection's ``SELECT ... FOR UPDATE`` of the job's row): the
   same two calls are judged by that earlier time. B's claim, whose time saw the lease
   live, answers None at once (its UPDATE does not wait for a row it would not take); A's
   renew waits for the row and is applied from its statement's time, before the expiry.
   Nobody held the job meanwhile (the row lock kept every claim out), and A's local
   deadline counts from the send: safe, but not "the time it really ran".
2. An operation inside a longer transaction reads the time when it runs, not when the
   transaction began (PostgreSQL's ``now()`` is frozen at the transaction's start,
   ``clock_timestamp()`` is not): `tenure.fence.complete_with` opens a transaction while
   the lease is live, the lease expires in the block, and the completion at its end is
   refused. Redis has no transaction to share (refused up front).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence
from tenure.stores.postgres import parse_postgres_url
from tests.backends import POSTGRES_URL, Backend, sqlite_path
from tests.servers import redis_server

TTL = 0.5
# How long the hold lasts past the lease's expiry (by a bound on when the expiry is).
PAST = 0.15


class Hold:
    """Holds what a write of job J must wait for, on one backend: the SQLite file's write
    lock, the PostgreSQL row's lock, or every write of a Redis server of the test's own."""

    def __init__(self, backend: Backend, url: str) -> None:
        self.backend, self.url = backend, url  # url: the store's
        self._conn: Any = None

    def take(self, job_id: str) -> None:
        if self.backend.name == "sqlite":
            import sqlite3

            self._conn = sqlite3.connect(sqlite_path(self.url), isolation_level=None)
            self._conn.execute("BEGIN IMMEDIATE")
        elif self.backend.name == "postgres":
            import psycopg

            schema = parse_postgres_url(self.url).schema
            self._conn = psycopg.connect(POSTGRES_URL)  # not autocommit: a transaction
            locked = self._conn.execute(
                f'SELECT job_id FROM "{schema}".tenure_jobs WHERE job_id = %s FOR UPDATE',
                (job_id,),
            ).fetchall()
            assert locked == [(job_id,)]
        else:
            import redis

            self._conn = redis.Redis.from_url(self.url)
            # Ended by `release`; the pause's own length only bounds a test that died.
            self._conn.execute_command("CLIENT", "PAUSE", "10000", "WRITE")

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self.backend.name == "sqlite":
            conn.execute("ROLLBACK")
        elif self.backend.name == "postgres":
            conn.rollback()
        else:
            conn.execute_command("CLIENT", "UNPAUSE")
        conn.close()


@pytest.fixture
def hold(backend: Backend, url: str, tmp_path: Path) -> Iterator[Hold]:
    with ExitStack() as stack:
        if backend.name == "redis":
            url = stack.enter_context(redis_server(tmp_path / "redis")).url
        held = Hold(backend, url)
        stack.callback(held.release)
        yield held


def _on_threads(
    calls: dict[str, Callable[[], object]],
) -> tuple[dict[str, object], dict[str, float], list[threading.Thread]]:
    """Start each call on a thread; its answer (or LeaseLost) lands in ``answers``, the
    moment it was sent in ``sent``."""
    answers: dict[str, object] = {}
    sent: dict[str, float] = {}

    def run(name: str, call: Callable[[], object]) -> None:
        sent[name] = time.monotonic()
        try:
            answers[name] = call()
        except tenure.LeaseLost as lost:
            answers[name] = lost

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in calls.items()]
    for thread in threads:
        thread.start()
    return answers, sent, threads


def test_a_renew_and_a_claim_held_up_past_the_expiry_are_judged_when_they_run(
    backend: Backend, hold: Hold, open_real_store: Callable[..., tenure.Store]
) -> None:
    a, b = open_real_store(url=hold.url), open_real_store(url=hold.url)
    a.submit("J")
    claim_sent = time.monotonic()
    lease = a.claim("J", "A", TTL)
    claim_back = time.monotonic()
    assert lease is not None
    # The claim ran between claim_sent and claim_back: its lease ends at earliest TTL after
    # the first, at latest TTL after the second.
    hold.take("J")
    answers, sent, threads = _on_threads(
        {"renew": lambda: a.renew(lease), "claim": lambda: b.claim("J", "B", TTL)}
    )
    time.sleep(max(0.0, claim_back + TTL + PAST - time.monotonic()))  # past the expiry
    held_up = {name for name in ("renew", "claim") if name not in answers}
    released = time.monotonic()
    hold.release()
    for thread in threads:
        thread.join(timeout=10)
    assert set(answers) == {"renew", "claim"}
    # What makes the test: both calls were sent while the lease was live.
    assert max(sent.values()) < claim_sent + TTL, "a call was sent after the expiry"
    renewed, taken = answers["renew"], answers["claim"]
    if backend.name == "postgres":
        # Judged by the time each statement read as it began, before the expiry (see the
        # module's docstring): the claim at once, the renew once the row was let go.
        assert held_up == {"renew"}
        assert taken is None
        assert isinstance(renewed, tenure.Lease)
        assert renewed.lease_until - TTL < lease.lease_until
        job = a.get("J")
        assert (job.owner, job.generation, job.lease_until) == ("A", 1, renewed.lease_until)
        return
    # Judged by the time they really ran, after the hold: both waited for it.
    assert held_up == {"renew", "claim"}
    assert isinstance(renewed, tenure.LeaseLost), renewed
    assert isinstance(taken, tenure.Lease), taken
    assert (taken.owner, taken.generation) == ("B", 2)
    # B's lease runs TTL from when its claim ran, after the release: by then the store's
    # clock had moved at least (released - claim_back) past A's claim (one host's clocks;
    # 10 ms for rounding and slewing). Read before the wait, it would end ~PAST earlier.
    assert taken.lease_until >= lease.lease_until + (released - claim_back) - 0.01
    job = a.get("J")
    assert (job.state, job.owner, job.generation) == ("leased", "B", 2)
    assert job.lease_until == taken.lease_until


def test_a_completion_in_a_transaction_begun_before_the_expiry_is_judged_when_it_runs(
    backend: Backend, real_store: tenure.Store
) -> None:
    real_store.submit("J")
    claim_sent = time.monotonic()
    lease = real_store.claim("J", "A", TTL)
    claim_back = time.monotonic()
    assert lease is not None
    if backend.name == "redis":  # no transaction to share: each operation is one script
        with pytest.raises(tenure.InvalidArgument), fence.complete_with(real_store, lease):
            pass
        return

    def complete_across_the_expiry() -> None:
        with fence.complete_with(real_store, lease, "late") as done:
            # The transaction began, and read the job, while the lease was live...
            assert time.monotonic() < claim_sent + TTL, "entered after the expiry"
            assert not done.already_completed
            # ...and the lease expires before its completion runs.
            time.sleep(max(0.0, claim_back + TTL + PAST - time.monotonic()))

    with pytest.raises(tenure.LeaseLost) as lost:
        complete_across_the_expiry()
    assert lost.value.reason == "expired"
    job = real_store.get("J")
    assert (job.state, job.owner, job.generation, job.result) == ("leased", "A", 1, None)
