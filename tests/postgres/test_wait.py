"""Idle workers wait on LISTEN/NOTIFY: woken by work that becomes ready (from any writer,
plain SQL included), not by other queues; a delayed job or an expiring lease ends the wait
when it falls due; without LISTEN (listen=false) the wait polls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import psycopg
import pytest

import tenure
import tenure.aio
from tenure.stores.postgres._common import render
from tests.backends import ASYNCIO_ONLY
from tests.postgres._support import backends_of

pytestmark = pytest.mark.slow


def _timed_wait(store: tenure.Store, timeout: float, **options: Any) -> float:
    started = time.monotonic()
    store.wait_for_jobs(timeout=timeout, **options)
    return time.monotonic() - started


def _later(seconds: float, action: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_woken_by_a_submit_from_another_client(
    open_real_store: Callable[..., tenure.Store],
) -> None:
    waiter, other = open_real_store(), open_real_store()
    thread = _later(0.2, lambda: other.submit("J"))
    waited = _timed_wait(waiter, 10)
    thread.join()
    assert 0.15 < waited < 2
    assert waiter.claim_next("A", 30) is not None


def test_woken_by_a_batch_submit_once_per_queue(
    open_real_store: Callable[..., tenure.Store], admin: Any, schema: str
) -> None:
    # A batch of jobs of two queues wakes a waiter of the second, and each queue is told
    # once (PostgreSQL folds a transaction's equal notifications into one).
    waiter, other = open_real_store(), open_real_store()
    batch = [{"job_id": f"J{n}", "queue": "q1" if n % 2 else "q2"} for n in range(20)]
    thread = _later(0.2, lambda: other.submit_many(batch))
    waited = _timed_wait(waiter, 10, queues=("q2",))
    thread.join()
    assert 0.15 < waited < 2
    channel = f"tenure_{schema}"
    with psycopg.connect(admin.info.dsn, autocommit=True) as listener:
        listener.execute(f'LISTEN "{channel}"')
        other.submit_many([{"job_id": f"K{n}", "queue": f"q{n % 2}"} for n in range(20)])
        payloads = sorted(n.payload for n in listener.notifies(timeout=0.5, stop_after=10))
    assert payloads == ["q0", "q1"]


def test_woken_by_a_release_and_a_fail(open_real_store: Callable[..., tenure.Store]) -> None:
    waiter, other = open_real_store(), open_real_store()
    other.submit("J")
    other.submit("K")
    lease_j, lease_k = other.claim_many("B", 30, 2)
    for action in (lambda: other.release(lease_j), lambda: other.fail(lease_k, "x", retry_in=0)):
        thread = _later(0.2, action)
        waited = _timed_wait(waiter, 10)
        thread.join()
        assert 0.15 < waited < 2
        assert waiter.claim_next("A", 30) is not None  # take it, so that the next wait waits


def test_a_notification_left_from_an_earlier_wait_does_not_end_the_next(
    open_real_store: Callable[..., tenure.Store],
) -> None:
    # A notification that reaches the listening connection after a wait was woken, before
    # its UNLISTEN, is kept by psycopg for the next `notifies()`: the next wait on that
    # connection must not take it for news. Made here on the driver's pooled listener.
    waiter, other = open_real_store(), open_real_store()
    waiter.wait_for_jobs(timeout=0.01)  # its listener is opened, then pooled
    driver: Any = waiter._driver
    conn = driver._listeners[-1]
    conn.execute(driver._sql["listen"].text)
    other.submit("J")
    assert other.claim_next("B", 30) is not None  # nothing ready for the next wait
    time.sleep(0.1)  # the notification reaches the listener's socket
    conn.execute("SELECT 1")  # read with the reply, into psycopg's backlog
    conn.execute(driver._sql["unlisten"].text)
    assert _timed_wait(waiter, 0.5) >= 0.45


def test_woken_by_plain_sql_writers(real_store: tenure.Store, admin: Any, schema: str) -> None:
    def insert() -> None:
        admin.execute(
            render(
                "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
                "max_attempts, created_at, updated_at) VALUES ('sql', 'default', 'ready', "
                "0, 5, 0, 0)",
                schema,
            ).encode()
        )

    thread = _later(0.2, insert)
    waited = _timed_wait(real_store, 10)
    thread.join()
    assert waited < 2


def test_other_queues_do_not_wake(open_real_store: Callable[..., tenure.Store]) -> None:
    waiter, other = open_real_store(), open_real_store()
    thread = _later(0.1, lambda: other.submit("J", queue="elsewhere"))
    waited = _timed_wait(waiter, 0.6, queues=("mine",))
    thread.join()
    assert waited >= 0.55


def test_returns_at_once_when_work_is_ready(real_store: tenure.Store) -> None:
    real_store.submit("J")
    assert _timed_wait(real_store, 10) < 0.5


def test_wait_ends_when_a_delayed_job_falls_due(real_store: tenure.Store) -> None:
    real_store.submit("J", delay=0.4)
    waited = _timed_wait(real_store, 10)
    assert 0.3 < waited < 2
    assert real_store.claim_next("A", 30) is not None


def test_wait_ends_when_a_lease_expires(real_store: tenure.Store) -> None:
    real_store.submit("J")
    assert real_store.claim_next("A", 0.4) is not None
    waited = _timed_wait(real_store, 10)
    assert 0.25 < waited < 2
    assert real_store.claim_next("B", 30) is not None


def test_polling_without_listen(open_real_store: Callable[..., tenure.Store], url: str) -> None:
    poller = open_real_store(url=url + "&listen=false")
    other = open_real_store()
    other.submit("later", delay=0.3)
    waited = _timed_wait(poller, 10)
    assert 0.2 < waited < 2
    assert _timed_wait(poller, 0.3, queues=("empty",)) >= 0.25


def test_waiters_hold_no_pooled_connection(
    open_real_store: Callable[..., tenure.Store], url: str
) -> None:
    """With one pooled connection, a worker's renewals still run while it also waits."""
    store = open_real_store(url=url + "&pool_max=1&pool_timeout=1")
    store.submit("J")
    lease = store.claim_next("A", 30)
    assert lease is not None
    waiters = [threading.Thread(target=store.wait_for_jobs, kwargs={"timeout": 1.0}) for _ in "ab"]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.1)
    for _ in range(5):
        lease = store.renew(lease)
    for waiter in waiters:
        waiter.join()


@pytest.mark.anyio
@ASYNCIO_ONLY
async def test_async_wait_woken_and_cancellable(url: str, admin: Any, app_name: str) -> None:
    waiter = await tenure.aio.connect(url)
    other = await tenure.aio.connect(url)
    try:
        async with anyio.create_task_group() as group:

            async def submit_soon() -> None:
                await anyio.sleep(0.2)
                await other.submit("J")

            group.start_soon(submit_soon)
            with anyio.fail_after(3):
                await waiter.wait_for_jobs(timeout=10)
        assert await waiter.claim_next("A", 30) is not None
        connections = set(backends_of(admin, app_name))
        # Cancelled in its statements (at once) or in its wait for a notification (later):
        # the wait's connection is put back clean (UNLISTEN ran, shielded) and the next wait
        # takes it again, not a new one (a worker cancels its idle wait at every reason to
        # look again: a new connection each time had cost a connect per wake-up).
        for cancel_after in (0.0, 0.2, 0.0, 0.05, 0.0):
            with anyio.move_on_after(cancel_after) as scope:
                await waiter.wait_for_jobs(queues=("empty",), timeout=10)
            assert scope.cancelled_caught
        await anyio.sleep(0.1)
        assert set(backends_of(admin, app_name)) == connections
        await waiter.submit("K")
        with anyio.fail_after(2):
            await waiter.wait_for_jobs(timeout=10)
    finally:
        await waiter.close()
        await other.close()


def test_close_ends_a_wait(open_real_store: Callable[..., tenure.Store], url: str) -> None:
    store, other = open_real_store(url=url + "&pool_max=1"), open_real_store()
    store.submit("J")  # its one connection is in use (kept aside) when close() wakes waiters
    assert store.claim_next("A", 30) is not None
    finished: list[float] = []

    def wait() -> None:
        started = time.monotonic()
        store.wait_for_jobs(timeout=10)
        finished.append(time.monotonic() - started)

    other_finished: list[float] = []

    def wait_other() -> None:
        started = time.monotonic()
        other.wait_for_jobs(timeout=1.0)
        other_finished.append(time.monotonic() - started)

    threads = [threading.Thread(target=wait), threading.Thread(target=wait_other)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    store.close()
    for thread in threads:
        thread.join(10)
    assert finished[0] < 2
    assert other_finished[0] >= 0.95  # another client's wait is not cut short
