"""What the nemesis says about the faults it did not inject (the run's summary lists them)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    """A store server that takes its outages on a thread, one at a time."""

    def __init__(self) -> None:
        self.busy = False
        self.threads: list[threading.Thread] = []

    def store_outage(
        self, outage: float, *, kill: bool, record: Callable[[str, dict[str, Any]], None]
    ) -> bool:
        if self.busy:
            return False
        self.busy = True

        def run() -> None:
            record("start", {"how": "kill" if kill else "stop", "server_pid": 1})
            time.sleep(outage)
            record("end", {"down_s": outage})
            self.busy = False

        self.threads.append(threading.Thread(target=run))
        self.threads[-1].start()
        return True


def test_store_outages_are_recorded_from_start_to_end_one_at_a_time(tmp_path: Path) -> None:
    schedule = [
        Fault(0.0, "store-kill", None, {"outage": 0.3}),
        Fault(0.05, "store-restart", None, {"outage": 0.1}),  # while the kill is going on
        Fault(0.6, "store-restart", None, {"outage": 0.1}),
    ]
    recorder = Recorder(tmp_path / "nemesis.jsonl", "nemesis")
    target = _Server()
    nemesis = Nemesis(schedule, target, recorder)  # type: ignore[arg-type]
    nemesis.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(target.threads) < 2:
        time.sleep(0.01)
    for thread in target.threads:
        thread.join(5)
    nemesis.stop()
    recorder.close()
    assert [why for _, why in nemesis.not_injected()] == [
        "the store was still in the previous store fault (restart, kill, SQLite pause)"
    ]
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
