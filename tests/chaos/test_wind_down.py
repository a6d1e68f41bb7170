"""The run's wind-down ends within ``drain_timeout`` whatever the feeder does: it resumes a
worker stopped after the heal (whose store lock the feeder's submits wait behind), and a
feeder that outlasts the bound is told to stop and named in one line, and the run goes on
to its final states. The store calls of the feeder are replaced (`_harness._submit`); the
queue stays empty, so the drain itself is over at once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenure import Store
from tenure.chaos import Recorder
from tenure.chaos import _harness as harness_module
from tenure.chaos._flow_mode import FlowJob
from tenure.chaos._harness import ChaosOptions, Harness, _wind_down
from tenure.chaos._nemesis import Nemesis, is_stopped
from tenure.errors import StoreUnavailable

JOBS = 10
FIRST = 3  # submitted before the feeder starts: workers x concurrency x 3
ENDS_WITHIN = 20.0  # seconds; the wind-down takes well under one with these bounds


def _busy() -> StoreUnavailable:
    return StoreUnavailable("database is locked", operation="submit", outcome_unknown=False)


def _in_feeder() -> bool:
    return threading.current_thread().name == "tenure-chaos-feeder"


@pytest.fixture
def lines() -> list[str]:
    return []


def _harness(tmp_path: Path, lines: list[str], drain_timeout: float) -> Harness:
    options = ChaosOptions(
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        workers=1,
        concurrency=1,
        jobs=JOBS,
        storm=0,
        drain_timeout=drain_timeout,
        out=tmp_path / "run",
        png=False,
    )
    return Harness(options, lines.append)


@pytest.fixture
def worker() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _stop(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while not is_stopped(process.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert is_stopped(process.pid)


def _wind_down_in_thread(harness: Harness, tmp_path: Path) -> None:
    """The wind-down on a thread of its own, which must end: a test of a wait that never
    ends fails here rather than hanging the suite."""
    nemesis = Nemesis([], harness.target, Recorder(tmp_path / "nemesis.jsonl", "nemesis"))
    thread = threading.Thread(target=_wind_down, args=(harness, nemesis, 0), daemon=True)
    thread.start()
    thread.join(ENDS_WITHIN)
    assert not thread.is_alive(), "the wind-down did not end"


@pytest.mark.parametrize("stuck", ["never-returns", "keeps-failing"])
def test_a_feeder_past_the_drain_timeout_is_stopped_and_named(
    stuck: str, tmp_path: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def submit(store: Store, job_id: str, job: FlowJob) -> None:
        if not _in_feeder():
            return
        if stuck == "never-returns":
            release.wait()  # until the test ends: a store that never answers
        raise _busy()

    monkeypatch.setattr(harness_module, "_submit", submit)
    harness = _harness(tmp_path, lines, drain_timeout=0.2)
    try:
        harness.submit(over=0)
        _wind_down_in_thread(harness, tmp_path)
        assert (
            f"  jobs still being submitted after 0.2 s ({FIRST} of {JOBS} submitted): "
            "feeding stopped"
        ) in lines
        assert lines[-1].startswith("  final states: ")
        # Told to stop, the feeder's retry loop ends at its next look rather than going
        # through its 20 tries of half a second for each job left.
        release.set()
        assert harness.fed.wait(5)
    finally:
        release.set()
        harness.shutdown()
        harness.rec.close()


def test_a_worker_stopped_after_the_heal_is_resumed_while_the_feeder_waits(
    tmp_path: Path,
    lines: list[str],
    worker: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that reached a point armed before the heal stops itself just after the
    heal's resume pass, holding SQLite's write lock; the feeder, behind its schedule, has
    jobs left, and each submit waits behind that lock until the worker runs again."""
    healed = threading.Event()

    def submit(store: Store, job_id: str, job: FlowJob) -> None:
        if not _in_feeder():
            return
        healed.wait(ENDS_WITHIN)
        deadline = time.monotonic() + 30  # the store's busy timeout
        while is_stopped(worker.pid):
            if time.monotonic() > deadline:
                raise _busy()
            time.sleep(0.01)

    monkeypatch.setattr(harness_module, "_submit", submit)
    harness = _harness(tmp_path, lines, drain_timeout=60)
    harness.processes.slots[0].process = worker
    heal = harness.target.heal

    def heal_then_stop() -> None:
        heal()
        _stop(worker)
        healed.set()

    monkeypatch.setattr(harness.target, "heal", heal_then_stop)
    try:
        harness.submit(over=0)
        _wind_down_in_thread(harness, tmp_path)
        assert harness.fed.is_set()
        assert harness.submitted == JOBS
        assert not any("still being submitted" in line for line in lines), lines
    finally:
        harness.shutdown()
        harness.rec.close()
