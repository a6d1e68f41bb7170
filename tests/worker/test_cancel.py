"""A job cancelled while a real Worker runs it (issue #17): the store moves the generation
on, the worker's next renewal is refused with reason "cancelled", and the handler is
stopped as for any lost lease (an async one cancelled, a sync one sees ``ctx.lost``); its
late completion is refused and the job stays cancelled."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import tenure
from tenure import JobContext
from tests.worker import apps
from tests.worker._support import running, until_lost, wait_until

TTL = 10.0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_cancel_stops_the_handler_at_its_next_renewal(
    make_worker: Callable[..., tenure.Worker],
    store: tenure.Store,
    clock: tenure.ManualClock,
    kind: str,
) -> None:
    worker = make_worker(owner="A", ttl=TTL)
    started = threading.Event()
    seen: dict[str, Any] = {}

    handler = until_lost(started, seen)

    async def ahandler(ctx: JobContext) -> str:
        started.set()
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            seen["cancelled"] = True
            seen["reason"] = ctx.lost_reason
            raise
        return "late"

    worker.register("q", handler if kind == "sync" else ahandler)
    store.submit("J", queue="q")
    with running(worker):
        assert started.wait(10)
        cancelled = store.cancel("J", "operator said so")
        assert cancelled.generation == 2
        clock.advance(TTL / 2.5)  # a renewal falls due
        wait_until(lambda: "reason" in seen, what="the handler to stop")
        wait_until(lambda: worker.stats()["leases_lost"] == 1, what="the loss")
    assert "cancelled" in seen["reason"]
    if kind == "async":
        assert seen["cancelled"] is True
    job = store.get("J")
    assert (job.state, job.generation, job.error) == ("cancelled", 2, "operator said so")
    assert worker.stats()["completed"] == 0


def test_cancel_kills_a_process_handler(
    make_worker: Callable[..., tenure.Worker],
    store: tenure.Store,
    clock: tenure.ManualClock,
    tmp_path: Path,
) -> None:
    worker = make_worker(ttl=TTL)
    worker.register("q", apps.write_pid_and_sleep, isolation="process")
    events = tmp_path / "events.jsonl"
    store.submit("J", {"events": str(events)}, queue="q")
    with running(worker):
        started = wait_until(lambda: apps.read_events(events), what="child start")
        pid = started[0]["pid"]
        assert pid != os.getpid()
        store.cancel("J")
        clock.advance(TTL / 2.5)  # a renewal falls due, and is refused
        wait_until(lambda: worker.stats()["killed_on_loss"] == 1, what="kill")
        assert not _alive(pid)
    job = store.get("J")
    assert (job.state, job.generation, job.result) == ("cancelled", 2, None)
    assert worker.stats()["completed"] == 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
