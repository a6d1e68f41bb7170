"""`Store.queue_stats`: the live jobs of each queue, counted by the store (every backend;
Redis from its per-queue bookkeeping, issue #20)."""

from __future__ import annotations

import pytest

import tenure


def test_queue_stats_counts_live_jobs_by_queue_and_state(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    for index in range(3):
        store.submit(f"a{index}", queue="alpha")
    store.submit("later", queue="alpha", delay=60)
    store.submit("b0", queue="beta")
    store.submit("b1", queue="beta")
    store.submit("finished", queue="gamma")
    first = store.claim("a0", "w1", 10)
    assert first is not None
    clock.advance(5)
    held = store.claim("b0", "w2", 30)
    lapsed = store.claim("b1", "w3", 1)
    assert held is not None
    assert lapsed is not None
    done = store.claim("finished", "w4", 30)
    assert done is not None
    store.complete(done)
    clock.advance(2)

    stats = store.queue_stats()
    assert stats is not None
    assert [found.queue for found in stats.queues] == ["alpha", "beta"]  # gamma: none live
    alpha, beta = stats.queues
    assert (alpha.ready, alpha.scheduled, alpha.leased, alpha.expired) == (2, 1, 1, 0)
    assert (beta.ready, beta.scheduled, beta.leased, beta.expired) == (0, 0, 1, 1)
    assert alpha.oldest_ready_at is not None
    assert alpha.oldest_ready_age == pytest.approx(7.0, abs=0.01)
    assert beta.oldest_ready_at is None
    assert beta.oldest_ready_age == 0.0
    assert stats.as_of == pytest.approx(clock.time(), abs=0.01)
    assert stats.queue("beta") == beta
    assert stats.queue("gamma") is None


def test_queue_stats_of_an_empty_store(store: tenure.Store) -> None:
    stats = store.queue_stats()
    assert stats is not None
    assert stats.queues == ()
    assert stats.as_of > 0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_queue_stats_async(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("x", queue="q")
    stats = await astore.queue_stats()
    assert stats is not None
    assert [(q.queue, q.ready) for q in stats.queues] == [("q", 1)]
