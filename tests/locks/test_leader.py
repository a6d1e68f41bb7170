"""Leader election (`tenure.Leader`, `tenure.elect`) on every backend."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

import tenure

TTL = 10.0


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def callbacks(self, who: str) -> dict[str, Any]:
        return {
            "on_elected": lambda token: self.seen.append((who, "elected", token.generation)),
            "on_lost": lambda token: self.seen.append((who, "lost", token.generation)),
        }


def test_one_leader_at_a_time_and_handover_on_stop(store: tenure.Store, open_store: Any) -> None:
    events = Events()
    a = tenure.elect(store, "scheduler", TTL, owner="a", **events.callbacks("a"))
    assert a.wait_elected(10)
    b = tenure.Leader(open_store(), "scheduler", TTL, owner="b", **events.callbacks("b"))
    with b:
        time.sleep(0.3)
        assert a.is_leader
        assert not b.is_leader
        assert b.token is None
        assert a.token is not None
        assert a.token.generation == 1
        a.stop()
        assert b.wait_elected(10)
        assert not a.is_leader
        assert b.token is not None
        assert b.token.generation == 2
    assert not b.is_leader
    assert events.seen == [("a", "elected", 1), ("b", "elected", 2)]
    assert store.get("lock:scheduler").state == "ready"  # b gave it back when stopped


def test_a_lost_leader_is_told_and_runs_again(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    events = Events()
    with tenure.Leader(store, "scheduler", TTL, owner="a", **events.callbacks("a")) as leader:
        assert leader.wait_elected(10)
        clock.advance(TTL + 1)  # stalled past the TTL: the lease is lost
        wait_until(lambda: ("a", "lost", 1) in events.seen)
        wait_until(lambda: leader.terms == 2)  # its lease expired at the store: it won again
        assert leader.token is not None
        assert leader.token.generation == 2
    assert events.seen == [("a", "elected", 1), ("a", "lost", 1), ("a", "elected", 2)]


def test_a_leader_whose_lock_an_operator_cancelled_is_told_and_stops(
    store: tenure.Store, clock: tenure.ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="tenure")
    events = Events()
    with tenure.Leader(store, "scheduler", TTL, owner="a", **events.callbacks("a")) as leader:
        assert leader.wait_elected(10)
        store.cancel("lock:scheduler", reason="operator broke the lock")
        clock.advance(TTL / 2)  # its next renewal is refused: the lock is lost
        wait_until(lambda: any(r.getMessage().endswith("election stopped") for r in caplog.records))
        assert not leader.is_leader
        assert leader.terms == 1  # it did not run again: the lock cannot be taken
    assert events.seen == [("a", "elected", 1), ("a", "lost", 1)]
    assert store.get("lock:scheduler").state == "cancelled"


def test_a_failing_callback_does_not_stop_the_leader(store: tenure.Store) -> None:
    def boom(token: tenure.FencingToken) -> None:
        raise RuntimeError("callback bug")

    with tenure.Leader(store, "scheduler", TTL, on_elected=boom) as leader:
        assert leader.wait_elected(10)
        time.sleep(0.1)
        assert leader.is_leader


def test_store_elect_returns_a_running_leader(store: tenure.Store) -> None:
    events = Events()
    with store.elect("scheduler", TTL, owner="a", **events.callbacks("a")) as leader:
        assert isinstance(leader, tenure.Leader)
        assert leader.wait_elected(10)
    assert events.seen == [("a", "elected", 1)]
    assert store.get("lock:scheduler").state == "ready"
