"""What the nemesis says about the faults it did not inject (the run's summary lists them)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tenure
from tenure.chaos import Fault, Recorder
from tenure.chaos._nemesis import Nemesis


class _Target:
    """Worker 1 runs (and never reaches an armed point); worker 2 is gone."""

    def worker(self, number: int) -> tuple[str, int] | None:
        return ("w1.1", 4242) if number == 1 else None

    def set_control(self, name: str, *, clock: Any, arm: Any) -> None:
        pass

    def hit(self, name: str) -> int | None:
        return None

    def kill(self, number: int, restart_after: float) -> tuple[str, int] | None:
        return None

    def storm(self, jobs: int, window: float, holder: int | None = None) -> None:
        return None

    def proxy_delay(self, lag: float, hold: float) -> bool:
        return False

    def proxy_drop(self, window: float) -> bool:
        return False

    def store_pause(self, duration: float) -> None:
        return None


def test_every_fault_not_injected_is_named_with_the_reason(tmp_path: Path) -> None:
    schedule = [
        Fault(0.0, "kill", 2, {"restart_after": 1.0}),
        Fault(0.0, "pause-handler", 1, {"duration": 1.0, "window": 600.0, "storm": 0.0}),
        Fault(0.0, "proxy-drop", None, {"window": 1.0}),
        Fault(0.0, "storm", None, {"jobs": 1.0, "window": 1.0}),
        Fault(3600.0, "skew", 1, {"offset": 60.0, "rate": 1.0, "hold": 1.0}),
    ]
    recorder = Recorder(tmp_path / "nemesis.jsonl", "nemesis")
    nemesis = Nemesis(schedule, _Target(), recorder)  # type: ignore[arg-type]
    nemesis.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the four due at once have been acted on
        pending = [why for _, why in nemesis.not_injected() if why == "not reached"]
        if len(pending) == 1:
            break
        time.sleep(0.01)
    nemesis.stop()
    recorder.close()
    reasons = {fault.kind: why for fault, why in nemesis.not_injected()}
    assert nemesis.injected_count() == 0
    assert reasons == {
        "kill": "target gone: worker 2 was not running (killed, not yet restarted)",
        "pause-handler": "armed, but not hit before the faults stopped",
        "proxy-drop": "no proxy in front of the store (a store without a host)",
        "storm": "no storm processes (--storm 0) or no job to storm",
        "skew": "not reached: the faults stopped first",
    }
    # The schedule's zero is in the history, for the report's time axis.
    assert '"f":"nemesis-start"' in (tmp_path / "nemesis.jsonl").read_text(encoding="utf-8")


class _Broken(_Target):
    def kill(self, number: int, restart_after: float) -> tuple[str, int] | None:
        raise RuntimeError("no such worker table")


def test_a_fault_whose_injection_raised_is_named_failed(tmp_path: Path) -> None:
    schedule = [Fault(0.0, "kill", 1, {"restart_after": 1.0})]
    recorder = Recorder(tmp_path / "nemesis.jsonl", "nemesis")
    nemesis = Nemesis(schedule, _Broken(), recorder)  # type: ignore[arg-type]
    nemesis.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and nemesis.not_injected()[0][1] == "not reached":
        time.sleep(0.01)
    nemesis.stop()
    recorder.close()
    assert [why for _, why in nemesis.not_injected()] == [
        "failed: RuntimeError: no such worker table"
    ]
    assert '"f":"fault-error"' in (tmp_path / "nemesis.jsonl").read_text(encoding="utf-8")


class _Server(_Target):
    """A store server that takes its outages on a thread, one at a time. Each outage lasts
    until the test ends it (`end_outage`); `wait_calls` waits for the nemesis's n-th ask."""

    def __init__(self) -> None:
        self.busy = False
        self.threads: list[threading.Thread] = []
        self.answers: list[bool] = []  # what each store_outage call answered
        self._ends: list[threading.Event] = []
        self._cond = threading.Condition()

    def store_outage(
        self, outage: float, *, kill: bool, record: Callable[[str, dict[str, Any]], None]
    ) -> bool:
        with self._cond:
            accepted = not self.busy
            if accepted:
                self.busy = True
                end = threading.Event()
                self._ends.append(end)

                def run() -> None:
                    record("start", {"how": "kill" if kill else "stop", "server_pid": 1})
                    assert end.wait(10), "the test did not end the outage"
                    record("end", {"down_s": outage})
                    with self._cond:
                        self.busy = False

                thread = threading.Thread(target=run)
                thread.start()  # started before the test can see it (and join it)
                self.threads.append(thread)
            self.answers.append(accepted)
            self._cond.notify_all()
        return accepted

    def wait_calls(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.answers) >= count, 10), self.answers

    def end_outage(self, number: int) -> None:
        """End outage ``number`` (0-based) and wait until its end is recorded."""
        self._ends[number].set()
        self.threads[number].join(10)
        assert not self.threads[number].is_alive(), "the outage thread did not end"


def test_store_outages_are_recorded_from_start_to_end_one_at_a_time(tmp_path: Path) -> None:
    # The nemesis follows a manual clock: each fault comes due when the test moves it there,
    # and each outage ends when the test says so, whatever the machine's load.
    schedule = [
        Fault(0.0, "store-kill", None, {"outage": 0.3}),
        Fault(0.05, "store-restart", None, {"outage": 0.1}),  # while the kill is going on
        Fault(0.6, "store-restart", None, {"outage": 0.1}),  # after it ended
    ]
    recorder = Recorder(tmp_path / "nemesis.jsonl", "nemesis")
    target = _Server()
    clock = tenure.ManualClock()
    nemesis = Nemesis(schedule, target, recorder, clock=clock)  # type: ignore[arg-type]
    nemesis.start()
    try:
        target.wait_calls(1)  # due at once: the kill starts
        clock.advance(0.05)
        target.wait_calls(2)  # refused: the kill's outage goes on
        target.end_outage(0)
        clock.advance(1.0)  # past 0.6
        target.wait_calls(3)  # the store is up again: this one starts
        target.end_outage(1)
    finally:
        nemesis.stop()
        recorder.close()
    assert target.answers == [True, False, True]
    assert [why for _, why in nemesis.not_injected()] == [
        "the store was still in the previous store fault (restart, kill, SQLite pause)"
    ]
    assert nemesis.not_injected()[0][0] is schedule[1]
    assert nemesis.injected == {"store-kill": 1, "store-restart": 1}
    events = [json.loads(line) for line in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    faults = [(e["kind"], e["phase"]) for e in events if e["f"] == "fault"]
    assert faults == [
        ("store-kill", "start"),
        ("store-kill", "end"),
        ("store-restart", "start"),
        ("store-restart", "end"),
    ]
    start = next(e for e in events if e["f"] == "fault" and e["phase"] == "start")
    assert start["outage"] == 0.3  # the scheduled parameters ride on the start
    assert start["how"] == "kill"


def test_a_nemesis_stopped_before_it_started_stops_quietly(tmp_path: Path) -> None:
    schedule = [Fault(0.0, "kill", 1, {"restart_after": 1.0})]
    recorder = Recorder(tmp_path / "nemesis.jsonl", "nemesis")
    nemesis = Nemesis(schedule, _Target(), recorder)  # type: ignore[arg-type]
    nemesis.stop()  # nothing to join: no error
    recorder.close()
    assert [why for _, why in nemesis.not_injected()] == ["not reached: the faults stopped first"]
