"""`tenure.AsyncLeader` / `AsyncStore.elect` on every backend."""

from __future__ import annotations

import logging

import anyio
import pytest

import tenure
import tenure.aio

pytestmark = pytest.mark.anyio

TTL = 10.0


async def test_handover_and_loss(
    astore: tenure.aio.AsyncStore, url: str, clock: tenure.ManualClock
) -> None:
    seen: list[tuple[str, str, int]] = []

    def note(who: str, what: str) -> object:
        async def callback(token: tenure.FencingToken) -> None:
            seen.append((who, what, token.generation))

        return callback

    other = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    try:
        a = astore.elect("scheduler", TTL, owner="a", on_elected=note("a", "elected"))
        async with a:
            with anyio.fail_after(10):
                await a.wait_elected()
            b = tenure.AsyncLeader(
                other,
                "scheduler",
                TTL,
                owner="b",
                on_elected=note("b", "elected"),
                on_lost=note("b", "lost"),
            )
            async with b:
                await anyio.sleep(0.3)
                assert a.is_leader
                assert b.token is None
                a.stop()  # a gives the lock back: b is woken and elected
                with anyio.fail_after(10):
                    await b.wait_elected()
                assert b.token is not None
                assert b.token.generation == 2
                clock.advance(TTL + 1)  # b stalls past its TTL: lost, then elected again
                with anyio.fail_after(10):
                    while b.terms < 2:  # noqa: ASYNC110
                        await anyio.sleep(0.01)
    finally:
        await other.close()
    assert seen == [("a", "elected", 1), ("b", "elected", 2), ("b", "lost", 2), ("b", "elected", 3)]


async def test_a_leader_whose_lock_an_operator_cancelled_stops(
    astore: tenure.aio.AsyncStore,
    url: str,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    other = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    try:
        async with astore.elect("scheduler", TTL, owner="a") as leader:
            with anyio.fail_after(10):
                await leader.wait_elected()
            async with other.elect("scheduler", TTL, owner="b") as follower:
                assert (leader.stopped, leader.error) == (False, None)
                await astore.cancel("lock:scheduler", reason="operator broke the lock")
                clock.advance(TTL / 2)  # its next renewal is refused: the lock is lost
                with anyio.fail_after(10):
                    while not (leader.stopped and follower.stopped):  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                assert not leader.is_leader
                assert leader.terms == 1  # it did not run again: the lock cannot be taken
                for stopped in (leader, follower):
                    assert isinstance(stopped.error, tenure.LockNotAcquired)
                    assert "an operator cancelled it" in str(stopped.error)
                with anyio.fail_after(2):
                    await leader.wait_elected()  # it was elected once: that stays true
                    # The follower never was, and never will be: told at once, and why.
                    with pytest.raises(tenure.LockNotAcquired) as caught:
                        await follower.wait_elected()
                assert str(caught.value).startswith("leader election of 'scheduler' stopped")
                assert "'operator broke the lock'" in str(caught.value)
                assert caught.value.__cause__ is follower.error
    finally:
        await other.close()
    assert (await astore.get("lock:scheduler")).state == "cancelled"
    lines = [r for r in caplog.records if "leader election of 'scheduler' stopped" in r.message]
    assert [(r.levelname, r.exc_info) for r in lines] == [("ERROR", None)] * 2


async def test_a_stopped_candidate_waits_no_more(
    astore: tenure.aio.AsyncStore, url: str, clock: tenure.ManualClock
) -> None:
    other = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    try:
        async with astore.elect("scheduler", TTL, owner="a") as leader:
            with anyio.fail_after(10):
                await leader.wait_elected()
            async with other.elect("scheduler", TTL, owner="b") as follower:
                follower.stop()
                assert (follower.stopped, follower.error) == (True, None)
                with anyio.fail_after(2), pytest.raises(tenure.LockNotAcquired, match="stop"):
                    await follower.wait_elected()
        assert leader.stopped
    finally:
        await other.close()
