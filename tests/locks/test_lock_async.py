"""`tenure.AsyncLock` on every backend: the body is cancelled at loss."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

import tenure
import tenure.aio

pytestmark = pytest.mark.anyio

TTL = 10.0


async def test_tokens_increase_and_others_wait(astore: tenure.aio.AsyncStore) -> None:
    tokens = []
    async with tenure.lock_async(astore, "report", ttl=TTL) as lock:
        tokens.append(lock.token.generation)
        assert not await tenure.AsyncLock(astore, "report", TTL).acquire(blocking=False)
    async with tenure.AsyncLock(astore, "report", TTL) as lock:
        tokens.append(lock.token.generation)
    assert tokens == [1, 2]
    assert tenure.worker.token_state(lock.token) == "ended"


async def test_the_body_is_cancelled_at_loss(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    reached = []
    started = time.monotonic()
    lock = tenure.AsyncLock(astore, "report", TTL)

    async def stall() -> None:
        async with lock:
            clock.advance(TTL + 1)  # stalled past the TTL
            await anyio.sleep(30)  # cancelled by the watchdog, well before this ends
            reached.append("after the sleep")

    with pytest.raises(tenure.LeaseLost, match="was lost while held") as caught:
        await stall()
    assert not reached
    assert time.monotonic() - started < 5
    assert lock.lost
    assert not lock.held
    assert tenure.worker.token_state(lock.token) == "lost"
    assert caught.value.generation == 1
    async with tenure.AsyncLock(astore, "report", TTL, blocking=False) as fresh:
        assert fresh.token.generation == 2


async def test_renewals_go_through_the_loop(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    async with tenure.AsyncLock(astore, "report", TTL) as lock:
        for _ in range(4):
            clock.advance(TTL / 2)
            with anyio.fail_after(10):
                while lock.lease.lease_until < clock.time() + TTL - 1e-6:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
        assert not lock.lost


async def test_a_waiter_is_woken_by_release(url: str) -> None:
    holder_store = await tenure.aio.connect(url)
    waiter_store = await tenure.aio.connect(url)
    got: list[Any] = []
    try:
        holder = tenure.AsyncLock(holder_store, "report", 30)
        assert await holder.acquire()

        async def wait() -> None:
            async with tenure.AsyncLock(waiter_store, "report", 30, timeout=20) as lock:
                got.append((time.monotonic(), lock.token.generation))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.5)
            assert not got
            released = time.monotonic()
            await holder.release()
        assert got[0][1] == 2
        assert got[0][0] - released < 0.5
    finally:
        await holder_store.close()
        await waiter_store.close()


async def test_timeout_raises_lock_not_acquired(astore: tenure.aio.AsyncStore) -> None:
    async with tenure.AsyncLock(astore, "report", TTL):
        with pytest.raises(tenure.LockNotAcquired):
            async with tenure.AsyncLock(astore, "report", TTL, timeout=0.2):
                pytest.fail("entered a held lock")


async def test_async_store_lock_is_an_async_lock(astore: tenure.aio.AsyncStore) -> None:
    async with astore.lock("report", ttl=TTL) as lock:
        assert isinstance(lock, tenure.AsyncLock)
        assert not await astore.lock("report", ttl=TTL).acquire(blocking=False)
    with pytest.raises(tenure.InvalidArgument, match="name"):
        astore.lock("")


async def test_an_async_lock_is_not_reentrant(astore: tenure.aio.AsyncStore) -> None:
    lock = tenure.AsyncLock(astore, "report", TTL)
    assert await lock.acquire()
    assert await lock.acquire(blocking=False) is False  # as threading.Lock answers
    assert lock.held
    with anyio.fail_after(2):
        for wait in ({}, {"timeout": 5.0}):
            with pytest.raises(tenure.LockNotAcquired, match="not reentrant"):
                await lock.acquire(**wait)
        with pytest.raises(tenure.LockNotAcquired, match="not reentrant"):
            async with lock:
                pytest.fail("entered a lock this object holds")
    assert lock.held
    await lock.release()
    with pytest.raises(tenure.LockNotAcquired, match="not held"):
        await lock.release()


async def test_an_async_lock_an_operator_cancelled_says_so(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    lock = tenure.AsyncLock(astore, "breakme", TTL)

    async def hold() -> None:
        async with lock:
            await astore.cancel("lock:breakme", reason="operator broke the lock")
            clock.advance(TTL / 2)  # its next renewal is refused: the body is cancelled
            await anyio.sleep(30)

    with anyio.fail_after(10), pytest.raises(tenure.LeaseLost) as caught:
        await hold()
    message = str(caught.value)
    assert message.startswith("lock 'breakme' (generation 1, ")
    assert "was lost while held: renewal rejected by the store: an operator cancelled" in message
    assert "'operator broke the lock'" in message
    assert "nobody can take it until it is requeued" in message
    assert ".." not in message
    assert "Another holder" not in message
    assert "worker" not in message
