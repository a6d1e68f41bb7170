"""The suite's own scheduler (tests/_phases.py), driven with stand-in workers: the tests of
real time go to one worker, and only once the other worker has finished and left."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests._phases import is_real_time, make_scheduler

pytest.importorskip("xdist")

COLLECTION = [
    "tests/unit/test_a.py::test_1",
    "tests/chaos/test_runs.py::test_run[sqlite]",
    "tests/unit/test_a.py::test_2",
    "tests/unit/test_b.py::test_1",
    "tests/conformance/test_races.py::test_race[redis]",
    "tests/unit/test_c.py::test_1",
    "tests/chaos/test_runs.py::test_run[redis]",
]


class StandInWorker:
    """What the scheduler sees of an xdist worker: tests sent, a shutdown asked for. Like a
    real one, it runs a test only once it knows the next one or is told to stop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.queue: list[int] = []
        self.shutting_down = False
        self.ran: list[str] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down
        self.queue += indices

    def shutdown(self) -> None:
        self.shutting_down = True

    def runnable(self) -> list[int]:
        return list(self.queue if self.shutting_down else self.queue[:-1])


def run(workers: int) -> tuple[list[tuple[str, str]], Any]:
    config = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"],
        option=SimpleNamespace(loadscopereorder=True),
    )
    scheduler = make_scheduler(config, None)
    nodes = [StandInWorker(f"gw{n}") for n in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, COLLECTION)
    scheduler.schedule()
    # Rounds: in each, every worker that can runs one test (the workers run side by side).
    timeline: list[tuple[str, str]] = []  # (worker, test) in the order they ran
    for _ in range(100):
        active = [node for node in nodes if node in scheduler.nodes]
        if not active:
            break
        for node in active:
            runnable = node.runnable()
            if runnable:
                index = runnable[0]
                node.queue.remove(index)
                timeline.append((node.name, COLLECTION[index]))
                scheduler.mark_test_complete(node, index)
            if node.shutting_down and not node.queue:
                scheduler.remove_node(node)  # it left: DSession's worker_workerfinished
        if scheduler.tests_finished:
            for node in scheduler.nodes:
                node.shutdown()
    return timeline, scheduler


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_real_time_tests_run_last_on_one_worker_alone(workers: int) -> None:
    timeline, scheduler = run(workers)
    assert sorted(test for _, test in timeline) == sorted(COLLECTION)  # each once
    real_time = [(worker, test) for worker, test in timeline if is_real_time(test)]
    assert len(real_time) == 3
    first = timeline.index(real_time[0])
    assert all(is_real_time(test) for _, test in timeline[first:])  # nothing beside them
    assert len({worker for worker, _ in real_time}) == 1  # one worker, one after another
    assert [test for _, test in real_time] == [t for t in COLLECTION if is_real_time(t)]
    assert not scheduler.has_pending


def test_the_phases_know_the_real_time_modules() -> None:
    assert is_real_time("tests/worker/test_processes.py::test_x[sqlite-proc]")
    assert is_real_time("tests/conformance/test_control_race_processes.py::test_y")
    assert not is_real_time("tests/conformance/test_claim.py::test_z[redis]")
