"""A real Worker and a paused queue (issue #18): it serves the other queues and leaves the
paused one's jobs alone, a job it already holds there finishes, and after resume it takes
the waiting ones."""

from __future__ import annotations

import threading
from collections.abc import Callable

import tenure
from tenure import JobContext
from tests.worker._support import running, wait_until


def test_a_worker_skips_a_paused_queue_and_takes_it_after_resume(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store
) -> None:
    worker = make_worker(owner="A", ttl=10.0, concurrency=2)
    started, go_on = threading.Event(), threading.Event()

    def slow(ctx: JobContext) -> str:
        if ctx.job_id == "held":
            started.set()
            assert go_on.wait(10)
        return "ok"

    worker.register("a", slow)
    worker.register("b", lambda ctx: "ok")
    store.submit("held", queue="a")
    with running(worker):
        assert started.wait(10)
        store.pause_queue("a")
        store.submit("a1", queue="a")
        store.submit("b1", queue="b")
        wait_until(lambda: store.get("b1").state == "done", what="b1 done")
        go_on.set()  # the lease held when the queue was paused still completes
        wait_until(lambda: store.get("held").state == "done", what="held done")
        assert store.get("a1").state == "ready"
        store.resume_queue("a")
        wait_until(lambda: store.get("a1").state == "done", what="a1 done after resume")
