"""Fixtures of the conformance suite: every test here runs once per backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

import tenure
import tenure.aio
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
def open_store(url: str, clock: tenure.ManualClock) -> Iterator[Callable[[], tenure.Store]]:
    """Open another client of the same store (another worker), on the same manual clock."""
    opened: list[tenure.Store] = []

    def factory() -> tenure.Store:
        store = tenure.connect(url, clock=clock, store_clock=clock)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[[], tenure.Store]) -> tenure.Store:
    return open_store()


@pytest.fixture
async def astore(url: str, clock: tenure.ManualClock) -> AsyncIterator[tenure.aio.AsyncStore]:
    store = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    yield store
    await store.close()
