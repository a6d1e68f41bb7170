"""Real Workers and a limited queue (issue #18): two workers, each with room for four jobs,
never run more than the queue's limit of its jobs at once between them, and take the rest as
places come free; another queue is served meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable

import tenure
from tenure import JobContext
from tests.worker._support import running, wait_until

LIMIT = 2


def test_two_workers_run_at_most_the_limit_at_once(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store
) -> None:
    lock = threading.Lock()
    running_now, most = [0], [0]
    release = threading.Semaphore(0)

    def limited(ctx: JobContext) -> str:
        with lock:
            running_now[0] += 1
            most[0] = max(most[0], running_now[0])
        try:
            assert release.acquire(timeout=10)  # held until the test lets one go
        finally:
            with lock:
                running_now[0] -= 1
        return "ok"

    store.set_queue_limit("a", LIMIT)
    workers = [make_worker(owner=name, ttl=10.0, concurrency=4) for name in ("A", "B")]
    for worker in workers:
        worker.register("a", limited)
        worker.register("b", lambda ctx: "ok")
    for n in range(6):
        store.submit(f"a{n}", queue="a")
    store.submit("b1", queue="b")
    with running(workers[0]), running(workers[1]):
        wait_until(lambda: running_now[0] == LIMIT, what="the limit reached")
        wait_until(lambda: store.get("b1").state == "done", what="the other queue served")
        assert len(store.jobs(queue="a", state="leased", limit=10)) == LIMIT
        for _ in range(6):
            release.release()  # each handler that ends makes room for one more
        wait_until(
            lambda: all(store.get(f"a{n}").state == "done" for n in range(6)), what="all done"
        )
    assert most[0] == LIMIT
