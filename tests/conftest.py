"""The fixture vocabulary of the whole suite: each name has one meaning, everywhere.

- ``backend``: the store under test, parametrized over every backend of
  `tests.backends.BACKENDS` (a test that asks for it, or for anything below, runs once per
  backend). What is about one backend pins it to that one (tests/postgres, tests/redis,
  tests/sqlite, tests/integration/test_cli.py); nothing else redefines it.
- ``url``: an isolated store URL of ``backend`` for this test (its own file, schema or key
  prefix), cleaned up afterwards. tests/postgres narrows it (its ``schema``, and an
  ``application_name`` to find the test's connections): still an isolated URL.
- ``clock``: the test's `tenure.ManualClock`; it moves only when the test moves it.
- ``open_store(**options)`` / ``store`` / ``astore``: clients of ``url`` (sync, sync,
  async) whose client clock and store clock are both ``clock``: deterministic. Options
  go to `tenure.connect` and override the defaults (``url=...`` another URL, ``clock=`` /
  ``store_clock=`` another clock).
- ``open_real_store(**options)`` / ``real_store``: clients of ``url`` on real clocks: the
  store's own time (the server's for PostgreSQL and Redis, the host's for SQLite). For
  tests of real time, real processes, real waits.

Every client a fixture opens is closed at the end of the test.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import tenure
import tenure.aio
from tests._phases import REAL_TIME_LAST, make_scheduler, module_of
from tests.backends import BACKENDS, IN_CI, Backend

# The stateful conformance test runs once per backend: keep each run to a few seconds.
settings.register_profile(
    "ci",
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=30, stateful_step_count=50, deadline=None)
settings.load_profile("ci" if IN_CI else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "races: real concurrency (OS processes, threads) against a shared store"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    last = [item for item in items if module_of(item.nodeid) in REAL_TIME_LAST]
    items[:] = [item for item in items if module_of(item.nodeid) not in REAL_TIME_LAST] + last


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The suite's two phases (tests/_phases.py), unless ``--dist each`` asks otherwise."""
    if config.getoption("dist") == "each":
        return None
    return make_scheduler(config, log)


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


def _opener(
    url: str, defaults: dict[str, Any]
) -> tuple[Callable[..., tenure.Store], Callable[[], None]]:
    opened: list[tenure.Store] = []

    def factory(**options: Any) -> tenure.Store:
        settings = {**defaults, **options}
        store = tenure.connect(settings.pop("url", url), **settings)
        opened.append(store)
        return store

    def close_all() -> None:
        for store in opened:
            store.close()

    return factory, close_all


@pytest.fixture
def open_store(url: str, clock: tenure.ManualClock) -> Iterator[Callable[..., tenure.Store]]:
    """Open another client of the test's store (another worker) on ``clock``."""
    factory, close_all = _opener(url, {"clock": clock, "store_clock": clock})
    yield factory
    close_all()


@pytest.fixture
def store(open_store: Callable[..., tenure.Store]) -> tenure.Store:
    """A client of the test's store on ``clock`` (the test's eyes)."""
    return open_store()


@pytest.fixture
async def astore(url: str, clock: tenure.ManualClock) -> AsyncIterator[tenure.aio.AsyncStore]:
    """An async client of the test's store on ``clock``."""
    opened = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    yield opened
    await opened.close()


@pytest.fixture
def open_real_store(url: str) -> Iterator[Callable[..., tenure.Store]]:
    """Open another client of the test's store on real clocks (the store's own time)."""
    factory, close_all = _opener(url, {})
    yield factory
    close_all()


@pytest.fixture
def real_store(open_real_store: Callable[..., tenure.Store]) -> tenure.Store:
    """A client of the test's store on real clocks."""
    return open_real_store()
