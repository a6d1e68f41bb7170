"""Fixtures of the worker tests: every test runs once per backend of tests/backends.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tenure
from tests.backends import BACKENDS, Backend


@pytest.fixture(params=BACKENDS, ids=str)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def url(backend: Backend, tmp_path: Path) -> Iterator[str]:
    with backend.isolated_url(tmp_path) as isolated:
        yield isolated


@pytest.fixture
def clock() -> tenure.ManualClock:
    return tenure.ManualClock()


@pytest.fixture
def store(url: str, clock: tenure.ManualClock) -> Iterator[tenure.Store]:
    """A client of the worker's store on the same manual clock (the test's eyes)."""
    opened = tenure.connect(url, clock=clock, store_clock=clock)
    yield opened
    opened.close()


@pytest.fixture
def real_store(url: str) -> Iterator[tenure.Store]:
    """A client of the store on real clocks, for tests with real worker processes."""
    opened = tenure.connect(url)
    yield opened
    opened.close()


@pytest.fixture
def make_worker(url: str, clock: tenure.ManualClock) -> Callable[..., tenure.Worker]:
    """A Worker on the test's store and manual clock (override anything by keyword)."""

    def make(**options: Any) -> tenure.Worker:
        settings: dict[str, Any] = {
            "clock": clock,
            "store_clock": clock,
            "ttl": 10.0,
            "poll_interval": 0.02,
            "grace": 5.0,
            **options,
        }
        return tenure.Worker(url, **settings)

    return make


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
def running(worker: tenure.Worker, *, timeout: float = 15.0) -> Iterator[tenure.Worker]:
    """Run ``worker`` on a thread for the duration of the block; stop it afterwards and
    fail if it does not stop within ``timeout`` or if it raised."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run(install_signal_handlers=False)
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


def run_burst(worker: tenure.Worker, timeout: float = 15.0) -> None:
    """``worker.run(burst=True)`` on a thread, bounded by ``timeout``."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run(burst=True, install_signal_handlers=False)
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
