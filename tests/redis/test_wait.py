"""wait_for_jobs: woken by writers, bounded by the next due time, not fooled by old news."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio
import pytest

import tenure
import tenure.aio

pytestmark = pytest.mark.slow


def timed(call: Callable[[], object]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def test_woken_by_a_submit_from_another_client(
    open_real_store: Callable[..., tenure.Store],
) -> None:
    waiter, submitter = open_real_store(), open_real_store()
    timer = threading.Timer(0.2, lambda: submitter.submit("J"))
    timer.start()
    elapsed = timed(lambda: waiter.wait_for_jobs(timeout=5))
    timer.join()
    assert 0.15 <= elapsed < 2
    assert waiter.claim_next("w", 10) is not None


def test_woken_by_a_release(open_real_store: Callable[..., tenure.Store]) -> None:
    waiter, holder = open_real_store(), open_real_store()
    holder.submit("J")
    lease = holder.claim("J", "h", 30)
    assert lease is not None
    timer = threading.Timer(0.2, lambda: holder.release(lease))
    timer.start()
    elapsed = timed(lambda: waiter.wait_for_jobs(timeout=5))
    timer.join()
    assert 0.15 <= elapsed < 2


def test_old_wake_ups_do_not_cut_a_wait_short(real_store: tenure.Store) -> None:
    real_store.submit("J")  # pushes a wake-up nobody consumes
    lease = real_store.claim_next("w", 30)
    assert lease is not None
    real_store.complete(lease)
    assert timed(lambda: real_store.wait_for_jobs(timeout=0.3)) >= 0.28


def test_wait_ends_when_a_delayed_job_falls_due(real_store: tenure.Store) -> None:
    real_store.submit("J", delay=0.3)
    elapsed = timed(lambda: real_store.wait_for_jobs(timeout=5))
    assert 0.25 <= elapsed < 1.5
    assert real_store.claim_next("w", 10) is not None


def test_wait_ends_when_a_lease_expires(real_store: tenure.Store) -> None:
    real_store.submit("J")
    assert real_store.claim("J", "a", 0.3) is not None
    elapsed = timed(lambda: real_store.wait_for_jobs(timeout=5))
    assert 0.25 <= elapsed < 1.5
    lease = real_store.claim_next("b", 10)
    assert lease is not None
    assert lease.generation == 2


def test_wait_returns_at_once_when_work_is_ready(real_store: tenure.Store) -> None:
    real_store.submit("J")
    real_store.claim_next("w", 10)
    real_store.submit("K")
    real_store.submit("L")
    real_store.claim_next("w", 10)
    assert timed(lambda: real_store.wait_for_jobs(timeout=5)) < 0.2


def test_close_ends_a_wait(open_real_store: Callable[..., tenure.Store]) -> None:
    store = open_real_store()
    store.wait_for_jobs(timeout=0.01)
    threading.Timer(0.2, store.close).start()
    assert timed(lambda: store.wait_for_jobs(timeout=3)) < 2


@pytest.mark.anyio
async def test_async_wait_woken_and_cancellable(url: str) -> None:
    waiter = await tenure.aio.connect(url)
    submitter = await tenure.aio.connect(url)
    try:

        async def submit_later() -> None:
            await anyio.sleep(0.2)
            await submitter.submit("J")

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(submit_later)
            await waiter.wait_for_jobs(timeout=5)
        assert 0.15 <= time.monotonic() - started < 2

        # Cancelled mid-BLPOP: the connection is dropped, the store keeps working.
        with anyio.move_on_after(0.1):
            await waiter.wait_for_jobs(queues=["idle"], timeout=5)
        lease = await waiter.claim_next("w", 10)
        assert lease is not None
        assert lease.job_id == "J"
        await waiter.complete(lease)
    finally:
        await waiter.close()
        await submitter.close()
