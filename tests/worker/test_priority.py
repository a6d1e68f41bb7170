"""A real Worker takes the highest priority first across its queues, FIFO within a priority
(issue #18), on every store: with one slot its handler sees the jobs in claim order."""

from __future__ import annotations

from collections.abc import Callable

import tenure
from tenure import JobContext
from tests.worker._support import run_burst


def test_a_worker_runs_the_highest_priority_first(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store
) -> None:
    worker = make_worker(concurrency=1, poll_interval=0.01)
    seen: list[str] = []

    def record(ctx: JobContext) -> None:
        seen.append(ctx.job_id)

    worker.register("a", record)
    worker.register("b", record)
    for job_id, queue, priority in [
        ("a-low", "a", -1),
        ("b-mid", "b", 0),
        ("a-top", "a", 9),
        ("b-top", "b", 9),
        ("a-mid", "a", 0),
    ]:
        store.submit(job_id, queue=queue, priority=priority)
    run_burst(worker)
    assert seen == ["a-top", "b-top", "b-mid", "a-mid", "a-low"]
