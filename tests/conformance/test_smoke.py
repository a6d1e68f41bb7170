from __future__ import annotations

import pytest

import tenure


def test_worked_example(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J")
    lease_a = store.claim("J", "A", 10)
    assert lease_a is not None and lease_a.generation == 1
    clock.advance(11)
    lease_b = store.claim("J", "B", 10)
    assert lease_b is not None and lease_b.generation == 2
    with pytest.raises(tenure.LeaseLost):
        store.complete(lease_a)
    store.complete(lease_b, "done by B")
    job = store.get("J")
    assert (job.state, job.owner, job.generation, job.result) == ("done", "B", 2, "done by B")


@pytest.mark.anyio
async def test_async_twin(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("J")
    lease = await astore.claim_next("A", 10)
    assert lease is not None and lease.job_id == "J"
    await astore.complete(lease)
    assert (await astore.get("J")).state == "done"
