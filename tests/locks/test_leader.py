"""Leader election (`tenure.Leader`, `tenure.elect`) on every backend."""

from __future__ import annotations

import logging
import threading
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


def returns_at_once(call: Callable[[], object], within: float = 5.0) -> object:
    """``call()``'s result or raised error, from a thread given ``within`` seconds of real
    time (a wait that would never end fails the test instead of hanging it)."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    assert outcome, f"still waiting after {within} s"
    return outcome[0]


def stopped_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "leader election of 'scheduler' stopped" in r.message]


def test_a_leader_whose_lock_an_operator_cancelled_is_told_and_stops(
    store: tenure.Store, clock: tenure.ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    events = Events()
    with tenure.Leader(store, "scheduler", TTL, owner="a", **events.callbacks("a")) as leader:
        assert leader.wait_elected(10)
        assert (leader.stopped, leader.error) == (False, None)
        store.cancel("lock:scheduler", reason="operator broke the lock")
        clock.advance(TTL / 2)  # its next renewal is refused: the lock is lost
        wait_until(lambda: leader.stopped)
        assert not leader.is_leader
        assert leader.terms == 1  # it did not run again: the lock cannot be taken
        assert isinstance(leader.error, tenure.LockNotAcquired)
        assert "an operator cancelled it (reason: 'operator broke the lock')" in str(leader.error)
        # Without a timeout, at once: the reason, not a wait that never ends.
        raised = returns_at_once(leader.wait_elected)
        assert isinstance(raised, tenure.LockNotAcquired)
        assert str(raised).startswith("leader election of 'scheduler' stopped: lock ")
        assert "store.requeue('lock:scheduler')" in str(raised)
        assert raised.__cause__ is leader.error
    assert events.seen == [("a", "elected", 1), ("a", "lost", 1)]
    assert store.get("lock:scheduler").state == "cancelled"
    # One line, without a traceback: an operator's cancel is not a crash.
    [line] = stopped_lines(caplog)
    assert (line.levelname, line.exc_info) == ("ERROR", None)
    assert "an operator cancelled it" in line.getMessage()


def test_a_follower_stops_too_and_is_told_at_once(
    store: tenure.Store, open_store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    store.submit("lock:scheduler", queue="tenure.lock:scheduler")
    store.cancel("lock:scheduler")
    with tenure.Leader(open_store(), "scheduler", TTL, owner="b") as follower:
        raised = returns_at_once(follower.wait_elected)  # never elected: no endless wait
        assert isinstance(raised, tenure.LockNotAcquired)
        assert "cancelled" in str(raised)
        assert follower.stopped
        assert follower.terms == 0
    assert len(stopped_lines(caplog)) == 1


def test_a_leader_on_a_name_another_job_has_stops_and_says_why(store: tenure.Store) -> None:
    store.submit("lock:scheduler")  # a user job of the default queue took the lock's id
    with tenure.Leader(store, "scheduler", TTL) as leader:
        raised = returns_at_once(leader.wait_elected)
        assert isinstance(raised, tenure.LockNotAcquired)
        assert isinstance(leader.error, tenure.InvalidArgument)
        assert "choose another lock name" in str(raised)


def test_a_stopped_leader_says_so_and_waits_no_more(store: tenure.Store) -> None:
    leader = tenure.elect(store, "scheduler", TTL)
    assert leader.wait_elected(10)
    leader.stop()
    assert (leader.stopped, leader.error, leader.is_leader) == (True, None, False)
    assert returns_at_once(leader.wait_elected) is False


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
