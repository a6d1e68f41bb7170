"""A real Worker and a rate-limited queue (issue #18): with a backlog and an empty bucket it
does not spin (the store's wait lasts until the next token is due, by store time), and it
takes the next jobs when tokens come, long before its poll interval would have woken it."""

from __future__ import annotations

import time
from collections.abc import Callable

import tenure
from tests.worker._support import running, wait_until


def test_a_worker_waits_for_the_next_token_without_spinning(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.set_queue_rate("a", 2, burst=2)
    for n in range(4):
        store.submit(f"a{n}", queue="a")
    worker = make_worker(owner="A", concurrency=4, poll_interval=30.0)
    worker.register("a", lambda ctx: "ok")

    def done(*ids: str) -> bool:
        return all(store.get(job_id).state == "done" for job_id in ids)

    with running(worker):
        wait_until(lambda: done("a0", "a1"), what="the burst run")
        # The bucket is empty and the manual clock stands still: the worker's wait lasts
        # until the next token by store time (half a second here), again and again. A
        # worker that asked the store in a loop would burn a whole CPU second meanwhile.
        started = time.process_time()
        time.sleep(1.0)
        assert time.process_time() - started < 0.3
        assert [store.get(job_id).state for job_id in ("a2", "a3")] == ["ready", "ready"]
        clock.advance(1)  # two tokens: the worker takes both at its next wake-up
        wait_until(lambda: done("a2", "a3"), timeout=5, what="the jobs the tokens allow")
