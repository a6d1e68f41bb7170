"""Helpers of the worker tests: waiting for a condition, running a worker on a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Literal

import trio

import tenure

# The event loops a worker runs on: ``worker.run`` (asyncio), or ``await worker.run_async()``
# under ``trio.run`` (through anyio; the server stores run their sync drivers on threads).
Loop = Literal["asyncio", "trio"]
LOOPS: tuple[Loop, ...] = ("asyncio", "trio")


def _run(worker: tenure.Worker, loop: Loop, burst: bool) -> None:
    if loop == "trio":
        trio.run(partial(worker.run_async, burst=burst, install_signal_handlers=False))
    else:
        worker.run(burst=burst, install_signal_handlers=False)


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


@contextmanager
def running(
    worker: tenure.Worker, *, timeout: float = 15.0, loop: Loop = "asyncio"
) -> Iterator[tenure.Worker]:
    """Run ``worker`` on a thread (on ``loop``) for the duration of the block; stop it
    afterwards and fail if it does not stop within ``timeout`` or if it raised."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            _run(worker, loop, burst=False)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    wait_until(lambda: worker.running or errors or not thread.is_alive(), what="worker start")
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout)
        assert not thread.is_alive(), "the worker did not stop"
        if errors:
            raise errors[0]


def run_burst(worker: tenure.Worker, timeout: float = 15.0, loop: Loop = "asyncio") -> None:
    """A burst run of ``worker`` on a thread (on ``loop``), bounded by ``timeout``."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            _run(worker, loop, burst=True)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker-burst", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        worker.stop(immediate=True)
        thread.join(5)
        raise AssertionError(f"burst run did not finish within {timeout} s")
    if errors:
        raise errors[0]


def until_lost(started: threading.Event, seen: dict[str, Any]) -> Callable[[Any], str]:
    """A sync handler that sets ``started``, runs until it sees ``ctx.lost`` (10 s at
    most), records its ``lost_reason`` in ``seen["reason"]`` and returns "late"."""

    def handler(ctx: Any) -> str:
        started.set()
        deadline = time.monotonic() + 10
        while not ctx.lost and time.monotonic() < deadline:
            time.sleep(0.002)
        seen["reason"] = ctx.lost_reason
        return "late"

    return handler
