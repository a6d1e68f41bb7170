"""Job slots (`tenure.worker._slots`): reused tasks, and each async handler in a context of
its own. No store: the worker-level behaviour is in test_runtime.py."""

from __future__ import annotations

import contextvars
import threading

import anyio
import anyio.lowlevel
import pytest

import tenure
from tenure.worker._loop import ThreadPool
from tenure.worker._slots import Slots, in_context
from tests.worker._support import wait_until

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("test_slots_var", default="unset")


async def _set_and_read(value: str) -> str:
    before = VAR.get()
    VAR.set(value)
    await anyio.lowlevel.checkpoint()  # the value survives a suspension
    assert VAR.get() == value
    return before


def test_in_context_keeps_the_coroutines_variables_to_itself() -> None:
    async def main() -> None:
        VAR.set("caller")
        first = await in_context(contextvars.copy_context(), _set_and_read("one"))
        second = await in_context(contextvars.copy_context(), _set_and_read("two"))
        assert (first, second, VAR.get()) == ("caller", "caller", "caller")

    anyio.run(main)


def test_in_context_passes_errors_and_cancellation_through() -> None:
    async def fails() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("boom")

    async def sleeps(reached: list[str]) -> None:
        try:
            await anyio.sleep(10)
        finally:
            reached.append(VAR.get())

    async def main() -> None:
        with pytest.raises(ValueError, match="boom"):
            await in_context(contextvars.copy_context(), fails())
        reached: list[str] = []
        context = contextvars.copy_context()
        context.run(VAR.set, "inside")
        with anyio.move_on_after(0.01) as scope:
            await in_context(context, sleeps(reached))
        assert scope.cancelled_caught
        assert reached == ["inside"]

    anyio.run(main)


def test_slots_reuse_their_tasks_and_end_when_closed() -> None:
    ran: list[int] = []
    tasks: set[int] = set()

    async def run(item: int) -> None:
        await anyio.lowlevel.checkpoint()
        ran.append(item)
        tasks.add(anyio.get_current_task().id)

    async def main() -> None:
        slots: Slots[int] = Slots(run)
        async with anyio.create_task_group() as task_group:
            for round_ in range(3):
                for item in range(4):
                    slots.start(task_group, round_ * 4 + item)
                await anyio.sleep(0.01)
            slots.close()
        # Four at once at most: the later rounds ran on the parked tasks of the first.
        assert sorted(ran) == list(range(12))
        assert len(tasks) == 4

    anyio.run(main)


def test_an_async_handler_does_not_see_the_previous_jobs_variables(url: str) -> None:
    worker = tenure.Worker(url, concurrency=1, poll_interval=0.02)
    seen: list[str] = []

    @worker.handler("default")
    async def handler(ctx: tenure.JobContext) -> None:
        seen.append(VAR.get())
        VAR.set(ctx.job_id)

    store = tenure.connect(url)
    try:
        store.submit("a")
        store.submit("b")
        worker.run(burst=True, install_signal_handlers=False)
        assert seen == ["unset", "unset"]
        assert store.get("a").state == store.get("b").state == "done"
    finally:
        store.close()


def test_a_thread_pool_reuses_an_idle_thread_and_ends_it_when_closed() -> None:
    pool = ThreadPool()
    ran: list[threading.Thread] = []
    done = threading.Event()

    def target() -> None:
        ran.append(threading.current_thread())
        done.set()

    pool.run(target, "tenure-job-a")
    assert done.wait(5)
    wait_until(lambda: ran[0].name == "tenure-job-a" and pool.idle == 1, 5, "an idle thread")
    done.clear()
    pool.run(target, "tenure-job-b")
    assert done.wait(5)
    assert ran[1] is ran[0]
    wait_until(lambda: pool.idle == 1, 5, "an idle thread")
    pool.close()
    ran[0].join(5)
    assert not ran[0].is_alive()
