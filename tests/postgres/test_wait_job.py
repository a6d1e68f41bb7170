"""store.wait on PostgreSQL (issue #17): LISTEN/NOTIFY on "tenure_end_<schema>", a
notification only for a job someone waits for (notifying commits are serialised
cluster-wide, so completions must not send one for nobody), registrations cleaned up,
and the polling fallback without LISTEN."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import tenure
from tests.backends import POSTGRES_URL

pytestmark = pytest.mark.slow


def _listening(schema: str) -> Any:
    conn = psycopg.connect(POSTGRES_URL, autocommit=True)
    conn.execute(f'LISTEN "tenure_end_{schema}"')
    return conn


def _notified(conn: Any, seconds: float) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=seconds, stop_after=1)]


def _finish(store: tenure.Store, job_id: str) -> None:
    lease = store.claim(job_id, "w", 30)
    assert lease is not None
    store.complete(lease, "r")


def test_a_completion_nobody_waits_for_notifies_nobody(
    real_store: tenure.Store, schema: str
) -> None:
    listener = _listening(schema)
    try:
        real_store.submit("J")
        _finish(real_store, "J")
        assert _notified(listener, 0.5) == []
    finally:
        listener.close()


def test_a_waited_for_job_notifies_its_waiter_and_the_registration_goes(
    open_real_store: Callable[..., tenure.Store], real_store: tenure.Store, schema: str, admin: Any
) -> None:
    listener = _listening(schema)
    waiter_store = open_real_store()
    real_store.submit_many([{"job_id": "J"}, {"job_id": "K", "max_attempts": 1}])
    got: list[tenure.Job] = []
    thread = threading.Thread(target=lambda: got.append(waiter_store.wait("J", timeout=30)))
    thread.start()
    try:
        count = f"SELECT count(*) FROM {schema}.tenure_waiters WHERE job_id = 'J'"
        for _ in range(200):  # until the waiter has registered
            if admin.execute(count).fetchone()[0] == 1:
                break
            threading.Event().wait(0.01)
        _finish(real_store, "J")
        assert _notified(listener, 5) == ["J"]
        thread.join(timeout=10)
        assert got
        assert got[0].state == "done"
        assert admin.execute(count).fetchone()[0] == 0
        # A dead job ends a wait too (fail with the last attempt).
        lease = real_store.claim("K", "w", 30)
        assert lease is not None
        real_store.fail(lease, "boom")
        assert waiter_store.wait("K", timeout=5).state == "dead"
    finally:
        thread.join(timeout=10)
        listener.close()


def test_registrations_of_vanished_waiters_expire(
    real_store: tenure.Store, schema: str, admin: Any
) -> None:
    admin.execute(
        f"INSERT INTO {schema}.tenure_waiters VALUES ('gone', 'J', 0), ('live', 'J', 1e12)"
    )
    real_store.submit("J")
    with pytest.raises(tenure.WaitTimeout):
        real_store.wait("J", timeout=0.1)
    left = admin.execute(f"SELECT waiter FROM {schema}.tenure_waiters ORDER BY 1").fetchall()
    assert left == [("live",)]


def test_without_listen_a_wait_polls(url: str, real_store: tenure.Store) -> None:
    polling = tenure.connect(f"{url}&listen=false")
    try:
        real_store.submit("J")
        thread = threading.Timer(0.3, _finish, (real_store, "J"))
        thread.start()
        assert polling.wait("J", timeout=10).state == "done"
        thread.join()
    finally:
        polling.close()


def test_a_writer_in_flight_neither_blocks_a_wait_past_its_timeout_nor_is_missed(
    real_store: tenure.Store, schema: str
) -> None:
    real_store.submit("J")
    with psycopg.connect(POSTGRES_URL) as writer:  # a transaction that holds the job's row
        writer.execute(
            f"UPDATE {schema}.tenure_jobs SET state = 'done', result = '1' WHERE job_id = 'J'"
        )
        started = time.monotonic()
        with pytest.raises(tenure.WaitTimeout):
            real_store.wait("J", timeout=0.5)  # the job as last committed: still ready
        assert time.monotonic() - started < 3
        # The writer passed the trigger before any waiter registered, so it notifies
        # nobody: a waiter still sees its commit.
        got: list[tenure.Job] = []
        thread = threading.Thread(target=lambda: got.append(real_store.wait("J", timeout=20)))
        thread.start()
        time.sleep(0.3)  # not for correctness: the waiter is most likely retrying by now
        writer.commit()
    thread.join(timeout=20)
    assert got
    assert got[0].state == "done"
