"""The worker's group commit of completions (tenure.worker._completer), on every backend."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import tenure
import tenure.aio
from tenure.worker._completer import Completer

pytestmark = pytest.mark.anyio


class GatedDriver:
    """A real driver whose complete/complete_many wait at a gate before going to the store,
    so a test can hold a call in flight. Everything else passes straight through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.gate = anyio.Event()
        self.entered = anyio.Event()
        self.sizes: list[int] = []
        self.refuse = False  # complete answers StoreUnavailable, as a store that is away

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _wait(self, size: int) -> None:
        self.sizes.append(size)
        self.entered.set()
        await self.gate.wait()

    async def complete(self, *args: Any) -> Any:
        await self._wait(1)
        if self.refuse:
            raise tenure.StoreUnavailable(
                "the store is away (test)", operation="complete", outcome_unknown=False
            )
        return await self._inner.complete(*args)

    async def complete_many(self, completions: Any) -> Any:
        await self._wait(len(completions))
        return await self._inner.complete_many(completions)


@pytest.fixture
async def gated(
    url: str, clock: tenure.ManualClock
) -> AsyncIterator[tuple[tenure.aio.AsyncStore, GatedDriver]]:
    plain = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    driver = GatedDriver(plain._driver)
    store = tenure.aio.AsyncStore(driver, clock=clock)  # type: ignore[arg-type]
    yield store, driver
    await plain.close()


async def claimed(store: tenure.aio.AsyncStore, count: int) -> list[tenure.Lease]:
    for index in range(count):
        await store.submit(f"job-{index:02d}")
    return await store.claim_many("w", 60, count)


async def test_jobs_finishing_together_share_one_call(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    store, driver = gated
    leases = await claimed(store, 20)
    completer = Completer(store)
    answers: dict[str, BaseException | None] = {}

    async def finish(lease: tenure.Lease) -> None:
        try:
            await completer.complete(lease, lease.job_id.upper())
            answers[lease.job_id] = None
        except tenure.TenureError as exc:
            answers[lease.job_id] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(finish, leases[0])
        await driver.entered.wait()  # the first job's completion is on its way, alone
        for lease in leases[1:]:
            tg.start_soon(finish, lease)
        await anyio.wait_all_tasks_blocked()
        driver.gate.set()
    # The first went alone (no waiting for company); the 19 that finished meanwhile, together.
    assert driver.sizes == [1, 19]
    assert completer.calls == 2
    assert answers == {lease.job_id: None for lease in leases}
    for lease in leases:
        job = await store.get(lease.job_id)
        assert (job.state, job.result) == ("done", lease.job_id.upper())


async def test_jobs_finishing_in_the_same_turn_go_in_the_first_call(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    # A batch claimed together whose handlers do no I/O finishes within one turn of the
    # event loop: the leader waits that one turn, so all of them go in its call.
    store, driver = gated
    leases = await claimed(store, 10)
    completer = Completer(store)
    driver.gate.set()
    async with anyio.create_task_group() as tg:
        for lease in leases:
            tg.start_soon(completer.complete, lease, None)
    assert driver.sizes == [10]
    assert completer.calls == 1
    assert {(await store.get(lease.job_id)).state for lease in leases} == {"done"}


async def test_sync_jobs_reaching_the_loop_turns_apart_share_one_call(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    # Sync handlers' completions reach the loop one thread report at a time, turns apart:
    # while the threads are busy, the leader waits for them (not a single turn), and the
    # batch leaves as soon as the last report finds the threads idle.
    store, driver = gated
    driver.gate.set()
    leases = await claimed(store, 5)
    threads_busy = True
    completer = Completer(store, busy=lambda: threads_busy, linger=30.0)
    with anyio.fail_after(10):  # not the linger: the last arrival finds the threads idle
        async with anyio.create_task_group() as tg:
            for index, lease in enumerate(leases):
                if index == len(leases) - 1:
                    threads_busy = False  # the last thread returned before reporting
                tg.start_soon(completer.complete, lease, None)
                for _ in range(3):  # its report comes a few turns after the one before
                    await anyio.lowlevel.checkpoint()
    assert driver.sizes == [5]
    assert {(await store.get(lease.job_id)).state for lease in leases} == {"done"}


async def test_a_blocked_sync_handler_holds_a_batch_up_for_the_linger_only(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    store, driver = gated
    driver.gate.set()
    (lease,) = await claimed(store, 1)
    completer = Completer(store, busy=lambda: True, linger=0.05)  # a thread never returns
    started = anyio.current_time()
    with anyio.fail_after(10):
        await completer.complete(lease, None)
    assert anyio.current_time() - started >= 0.05
    assert driver.sizes == [1]
    assert (await store.get(lease.job_id)).state == "done"


async def test_a_completion_whose_lease_is_revoked_meanwhile_goes_to_the_store_once(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    """Revoked while it waited (the worker stopping now; `completion_deadline` answers None
    from then on): its handler finished and the store still holds the lease, so it is sent.
    Lost meanwhile (-inf): given up, not sent."""
    store, driver = gated
    driver.gate.set()
    revoked, lost = await claimed(store, 2)
    completer = Completer(store)
    with anyio.fail_after(10):
        deadlines = iter([revoked.local_deadline, None])
        await completer.complete(revoked, "ok", lambda: next(deadlines, None))
        deadlines = iter([lost.local_deadline, -math.inf])
        with pytest.raises(tenure.StoreUnavailable, match="given up"):
            await completer.complete(lost, "ok", lambda: next(deadlines, -math.inf))
    assert driver.sizes == [1]
    assert (await store.get(revoked.job_id)).state == "done"
    assert (await store.get(lost.job_id)).state == "leased"


async def test_a_completion_with_no_deadline_is_not_retried(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    store, driver = gated
    driver.gate.set()
    driver.refuse = True
    (lease,) = await claimed(store, 1)
    completer = Completer(store)
    with anyio.fail_after(10), pytest.raises(tenure.StoreUnavailable, match="given up"):
        await completer.complete(lease, "ok", lambda: None)
    assert completer.calls == 1  # one try: a stopping worker is not held up


async def test_each_job_gets_its_own_answer(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver], clock: tenure.ManualClock
) -> None:
    store, driver = gated
    driver.gate.set()
    first = await claimed(store, 1)
    clock.advance(61)  # first lease expired, and another worker took the job
    assert await store.claim("job-00", "other", 60) is not None
    for index in range(1, 4):
        await store.submit(f"job-{index:02d}")
    live = await store.claim_many("w", 60, 3)
    answers: dict[str, BaseException | None] = {}
    completer = Completer(store)
    values: dict[str, Any] = {"job-02": {"not", "json"}}

    async def finish(lease: tenure.Lease) -> None:
        try:
            await completer.complete(lease, values.get(lease.job_id, "ok"))
            answers[lease.job_id] = None
        except tenure.TenureError as exc:
            answers[lease.job_id] = exc

    driver.gate = anyio.Event()
    async with anyio.create_task_group() as tg:
        for lease in [*first, *live]:
            tg.start_soon(finish, lease)
        await anyio.wait_all_tasks_blocked()
        driver.gate.set()
    assert isinstance(answers["job-00"], tenure.LeaseLost)  # stale: only its own job
    assert isinstance(answers["job-02"], tenure.InvalidArgument)  # bad result: only its own
    assert answers["job-01"] is None
    assert answers["job-03"] is None
    states = {job.job_id: job.state for job in await store.jobs(limit=10)}
    assert states == {"job-00": "leased", "job-01": "done", "job-02": "leased", "job-03": "done"}


class Told:
    """An `Answers` that records what it hears (`Completer.enqueue`)."""

    def __init__(self) -> None:
        self.completed_calls: list[list[str]] = []
        self.errors: dict[str, BaseException] = {}

    def completed(self, subjects: list[Any]) -> None:
        self.completed_calls.append(list(subjects))

    def answered(self, subject: Any, error: BaseException) -> None:
        self.errors[subject] = error


def _held(subject: Any) -> float:
    return math.inf  # `enqueue`'s deadline: held for as long as the test runs


async def test_enqueued_jobs_the_store_completed_together_are_told_in_one_call(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    """A worker's completions are handed in with `enqueue` and told back through one
    `Answers`: the jobs of one store call in one `completed` call, in order, and a caller
    awaiting `complete` in the same batch gets its own answer as before."""
    store, driver = gated
    driver.gate.set()
    completer, told, leases = Completer(store), Told(), await claimed(store, 6)
    for lease in leases[:5]:
        completer.enqueue(lease, lease.job_id, _held, told, lease.job_id)
    with anyio.fail_after(10):
        await completer.complete(leases[5], "awaited")  # leads the batch, its own included
    assert driver.sizes == [6]
    assert told.completed_calls == [[lease.job_id for lease in leases[:5]]]
    assert told.errors == {}
    for lease in leases:
        assert (await store.get(lease.job_id)).state == "done"


async def test_a_completion_whose_deadline_comes_before_it_can_be_sent_is_not_blamed_on_the_store(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver], clock: tenure.ManualClock
) -> None:
    """Its lease's deadline is nearer than one attempt takes (a process that was paused
    finds it so): given up unsent, with an outcome that is known (nothing was done), and a
    message that does not say the store was away (nothing says it was)."""
    store, driver = gated
    driver.gate.set()
    completer, told, (lease,) = Completer(store), Told(), await claimed(store, 1)

    def nearly_over(subject: Any) -> float:
        return clock.monotonic() + 0.01  # within RETRY.attempt_time (0.05 s)

    completer.enqueue(lease, "r", nearly_over, told, "J")
    with anyio.fail_after(10):
        await completer.lead()
    assert driver.sizes == []  # not sent
    error = told.errors["J"]
    assert isinstance(error, tenure.StoreUnavailable)
    assert error.outcome_unknown is False
    assert "before the call could be sent" in str(error)
    assert "unavailable" not in str(error)
    assert (await store.get(lease.job_id)).state == "leased"


async def test_an_enqueued_job_the_store_refused_is_told_alone(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver], clock: tenure.ManualClock
) -> None:
    store, driver = gated
    driver.gate.set()
    (stale,) = await claimed(store, 1)
    clock.advance(61)  # its lease expired, and another worker took the job
    assert await store.claim("job-00", "other", 60) is not None
    for index in range(1, 4):
        await store.submit(f"job-{index:02d}")
    live = await store.claim_many("w", 60, 3)
    completer = Completer(store)
    told = Told()
    for lease in [stale, *live]:
        completer.enqueue(lease, "ok", _held, told, lease.job_id)
    with anyio.fail_after(10):
        await completer.lead()
    assert set(told.errors) == {"job-00"}
    assert isinstance(told.errors["job-00"], tenure.LeaseLost)
    assert sorted(job for call in told.completed_calls for job in call) == [
        "job-01",
        "job-02",
        "job-03",
    ]
    assert (await store.get("job-00")).state == "leased"


async def test_a_cancelled_leader_strands_nobody(
    gated: tuple[tenure.aio.AsyncStore, GatedDriver],
) -> None:
    store, driver = gated
    leases = await claimed(store, 4)
    completer = Completer(store)
    answers: dict[str, BaseException | None] = {}

    async def finish(lease: tenure.Lease) -> None:
        try:
            await completer.complete(lease, "v")
            answers[lease.job_id] = None
        except tenure.TenureError as exc:
            answers[lease.job_id] = exc

    leader_scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_in_scope, leader_scope, finish, leases[0])
        await driver.entered.wait()
        for lease in leases[1:]:
            tg.start_soon(finish, lease)
        await anyio.wait_all_tasks_blocked()
        leader_scope.cancel()  # the leader is cancelled while its call is in flight
        await anyio.wait_all_tasks_blocked()
        driver.gate.set()
    # The leader's own outcome is unknown to it; the three queued behind it were sent by
    # the next in line and completed.
    assert "job-00" not in answers
    assert answers == {"job-01": None, "job-02": None, "job-03": None}
    assert driver.sizes[1:] == [3]
    for lease in leases[1:]:
        assert (await store.get(lease.job_id)).state == "done"


async def _in_scope(scope: anyio.CancelScope, function: Any, *args: Any) -> None:
    with scope:
        await function(*args)
