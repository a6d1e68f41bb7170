"""The async twin (`tenure.aio`): a representative subset of the protocol through `astore`,
on asyncio and on trio (where the server stores run their sync drivers on worker threads:
their async clients run on asyncio only)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import anyio
import pytest

import tenure
import tenure.aio

pytestmark = pytest.mark.anyio
T0 = tenure.ManualClock().time()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_lifecycle(astore: tenure.aio.AsyncStore, clock: tenure.ManualClock) -> None:
    job = await astore.submit("J", {"n": 1}, queue="q", max_attempts=3)
    assert (job.state, job.queue, job.payload) == ("ready", "q", {"n": 1})
    assert (await astore.submit("J", {"n": 2})).payload == {"n": 1}  # idempotent
    assert await astore.now() == T0
    lease = await astore.claim_next("A", 10, queues=["q"])
    assert lease is not None
    assert (lease.job_id, lease.generation, lease.lease_until) == ("J", 1, T0 + 10)
    clock.advance(5)
    renewed = await astore.renew(lease, timedelta(seconds=20))
    assert renewed.lease_until == T0 + 25
    await astore.complete(renewed, {"ok": True})
    await astore.complete(renewed, {"ok": True})  # a repeat
    done = await astore.get("J")
    assert (done.state, done.result, done.generation) == ("done", {"ok": True}, 1)
    assert [j.job_id for j in await astore.jobs(state="done")] == ["J"]


async def test_stale_holder_is_rejected(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    await astore.submit("J")
    lease_a = await astore.claim("J", "A", 10)
    assert lease_a is not None
    assert await astore.claim("J", "B", 10) is None
    clock.advance(10)
    lease_b = await astore.claim("J", "B", 10)
    assert lease_b is not None
    assert lease_b.generation == 2
    before = await astore.get("J")
    for call in (
        lambda: astore.renew(lease_a),
        lambda: astore.complete(lease_a),
        lambda: astore.release(lease_a),
        lambda: astore.fail(lease_a, "x"),
    ):
        with pytest.raises(tenure.LeaseLost) as caught:
            await call()
        assert caught.value.current_generation == 2
        assert "'J'" in str(caught.value)
    after = await astore.get("J")
    assert dataclasses.replace(after, as_of=0) == dataclasses.replace(before, as_of=0)


async def test_release_fail_and_dead(
    astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    await astore.submit("J", max_attempts=2)
    lease = await astore.claim("J", "A", 10)
    assert lease is not None
    await astore.release(lease)
    assert (await astore.get("J")).attempts == 0
    lease = await astore.claim("J", "A", 10)
    assert lease is not None
    assert lease.generation == 2
    await astore.fail(lease, "one", retry_in=5)
    assert (await astore.get("J")).available_at == T0 + 5
    clock.advance(5)
    leases = await astore.claim_many("A", 10, 5)
    assert [lease.generation for lease in leases] == [3]
    await astore.fail(leases[0], ValueError("two"))
    job = await astore.get("J")
    assert (job.state, job.attempts) == ("dead", 2)
    assert job.error is not None
    assert "two" in job.error


async def test_errors(astore: tenure.aio.AsyncStore) -> None:
    with pytest.raises(tenure.JobNotFound):
        await astore.get("missing")
    with pytest.raises(tenure.JobNotFound):
        await astore.claim("missing", "A", 10)
    for ttl in (0, float("nan"), True, "10", 10**400):
        with pytest.raises(tenure.InvalidArgument) as caught:
            await astore.claim("missing", "A", ttl)  # type: ignore[arg-type]
        assert caught.value.argument == "ttl"
    with pytest.raises(tenure.InvalidArgument) as caught:
        await astore.submit("J", {1, 2})
    assert caught.value.argument == "payload"
    with pytest.raises(tenure.InvalidArgument) as caught:
        await astore.claim_next("A", 10, queues="default")
    assert caught.value.argument == "queues"
    assert await astore.jobs() == []


async def test_edited_and_malformed_leases(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("J")
    lease = await astore.claim("J", "A", 10)
    assert lease is not None
    with pytest.raises(tenure.LeaseLost, match="never granted generation 2"):
        await astore.complete(dataclasses.replace(lease, generation=2))
    with pytest.raises(tenure.InvalidArgument, match=r"^lease\.ttl: "):
        await astore.renew(dataclasses.replace(lease, ttl=float("nan")))
    await astore.complete(lease)


async def test_concurrent_tasks_claim_once(
    url: str, astore: tenure.aio.AsyncStore, clock: tenure.ManualClock
) -> None:
    await astore.submit("J")
    clients = [await tenure.aio.connect(url, clock=clock, store_clock=clock) for _ in range(8)]
    won: list[tenure.Lease] = []

    async def contender(index: int, client: tenure.aio.AsyncStore) -> None:
        lease = await client.claim("J", f"task{index}", 10)
        if lease is not None:
            won.append(lease)

    try:
        async with anyio.create_task_group() as group:
            for index, client in enumerate(clients):
                group.start_soon(contender, index, client)
    finally:
        for client in clients:
            await client.close()
    assert len(won) == 1
    assert won[0].generation == 1
    assert (await astore.get("J")).owner == won[0].owner


async def test_time_floor(astore: tenure.aio.AsyncStore, clock: tenure.ManualClock) -> None:
    first = await astore.now()
    clock.jump(-600)
    assert await astore.now() >= first
