"""Job slots (`tenure.worker._slots`): reused tasks, and each async handler in a context of
its own. No store: the worker-level behaviour is in test_runtime.py."""

from __future__ import annotations

import contextvars
import threading

import anyio
import anyio.lowlevel
import pytest

import tenure
from tenure.worker._loop import LoopCaller, Primitives, ThreadPool
from tenure.worker._slots import Slot, Slots, in_context
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

    async def run(item: int, slot: Slot) -> None:
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
        # Four at once at most: the later rounds ran on the parked tasks of the first (a
        # task that is done with its job takes the next one waiting, so perhaps fewer ran
        # jobs).
        assert sorted(ran) == list(range(12))
        assert 2 <= len(tasks) <= 4

    anyio.run(main)


def test_jobs_that_suspend_all_run_at_once() -> None:
    """No job waits for another's handler: each of these waits until all have started."""
    started: list[int] = []
    everyone = anyio.Event()

    async def run(item: int, slot: Slot) -> None:
        started.append(item)
        if len(started) == 6:
            everyone.set()
        await everyone.wait()

    async def main() -> None:
        slots: Slots[int] = Slots(run)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as task_group:
                for item in range(6):
                    slots.start(task_group, item)
                await everyone.wait()
                slots.close()
        assert sorted(started) == list(range(6))

    anyio.run(main)


def test_jobs_that_do_not_suspend_run_on_the_running_task_with_one_wake_up() -> None:
    """A batch handed in by a slot's own task (as a completion call that claims does) runs
    on that task, one job after the other, when no handler suspends; the one task woken
    for it finds nothing left, and leads (``idle``) before it parks."""
    tasks: list[int] = []
    idled: list[int] = []

    async def run(item: int, slot: Slot) -> None:
        tasks.append(anyio.get_current_task().id)
        if item == 0:  # the first job's end hands in a batch, as a refill does
            for more in range(1, 11):
                slots.start(task_group, more)

    async def idle() -> None:
        idled.append(anyio.get_current_task().id)

    async def main() -> None:
        nonlocal slots, task_group
        slots = Slots(run, idle)
        async with anyio.create_task_group() as task_group:
            slots.start(task_group, 0)
            await anyio.sleep(0.05)
            slots.close()
        assert len(tasks) == 11
        assert len(set(tasks)) == 1  # all on the first task
        assert len(set(idled)) == 2  # that task and the one woken for the batch

    slots: Slots[int]
    task_group: anyio.abc.TaskGroup
    anyio.run(main)


def test_a_loss_cancels_its_own_handler_only_and_the_job_ends_out_of_the_spent_scope() -> None:
    """`Slot.stop` cancels the slot's scope only for the handler running in it: a loss
    decided once the handler returned does not reach the next job. A cancelled scope is
    left before the job's end (`Slot.then`) runs, and the next job has a new one."""
    events: list[str] = []
    scopes: dict[str, anyio.CancelScope] = {}

    async def run(item: str, slot: Slot) -> None:
        scopes[item] = slot.scope
        slot.handling = item
        try:
            if item == "lost":
                slot.stop(item)  # the loss, while its handler runs
                await anyio.sleep(1)
        except anyio.get_cancelled_exc_class():
            events.append(f"{item} cancelled")
            assert slot.spent
        finally:
            slot.handling = None
        if item == "late":
            slot.stop(item)  # decided after the handler returned: nothing to cancel
            assert not slot.spent
        if slot.spent:

            async def then() -> None:
                await anyio.lowlevel.checkpoint()  # not cancelled: out of the spent scope
                events.append(f"{item} ended")
                slots.start(task_group, "after lost")  # taken by this task, in a new scope

            slot.then = then
            return
        events.append(f"{item} ended")

    async def main() -> None:
        nonlocal slots, task_group
        slots = Slots(run)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as task_group:
                for item in ("late", "after late", "lost"):
                    slots.start(task_group, item)
                await anyio.sleep(0.05)
                slots.close()

    slots: Slots[str]
    task_group: anyio.abc.TaskGroup
    anyio.run(main)
    assert events == [
        "late ended",
        "after late ended",
        "lost cancelled",
        "lost ended",
        "after lost ended",
    ]
    assert scopes["late"] is scopes["after late"] is scopes["lost"]
    assert scopes["after lost"] is not scopes["lost"]
    assert not scopes["after lost"].cancel_called


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


def _nothing() -> None:
    pass


# The pool's reports go to an event loop's caller; here they run at once, on the thread
# that sends them.
_AT_ONCE = LoopCaller(lambda callback: callback())


def test_a_thread_pool_reuses_an_idle_thread_and_ends_it_when_closed() -> None:
    pool = ThreadPool(_AT_ONCE)
    ran: list[threading.Thread] = []
    done = threading.Event()

    def target() -> None:
        ran.append(threading.current_thread())
        done.set()

    pool.run(target, _nothing, "tenure-job-a")
    assert done.wait(5)
    wait_until(lambda: ran[0].name == "tenure-job-a" and pool.idle == 1, 5, "an idle thread")
    done.clear()
    pool.run(target, _nothing, "tenure-job-b")
    assert done.wait(5)
    assert ran[1] is ran[0]
    wait_until(lambda: pool.idle == 1, 5, "an idle thread")
    pool.close()
    ran[0].join(5)
    assert not ran[0].is_alive()


def test_a_thread_pool_never_makes_a_function_wait_for_a_blocked_one() -> None:
    # Handed in together, as a claimed batch's sync jobs are: each of the first three
    # blocks until the last has run, which it can only do on a fourth thread.
    pool = ThreadPool(_AT_ONCE)
    last_ran = threading.Event()
    ran: list[threading.Thread] = []
    lock = threading.Lock()

    def blocked() -> None:
        with lock:
            ran.append(threading.current_thread())
        last_ran.wait(10)

    def last() -> None:
        with lock:
            ran.append(threading.current_thread())
        last_ran.set()

    for name in ("a", "b", "c"):
        pool.run(blocked, _nothing, f"tenure-job-{name}")
    pool.run(last, _nothing, "tenure-job-d")
    assert last_ran.wait(5), "a function waited for a blocked one"
    assert len({id(thread) for thread in ran}) == 4  # no busy thread was given another
    wait_until(lambda: pool.idle == 4, 5, "four idle threads")
    pool.close()
    for thread in ran:
        thread.join(5)
        assert not thread.is_alive()


def test_a_thread_pool_sends_a_report_while_a_later_function_blocks() -> None:
    # A thread sends the reports of the functions it ran once the queue is empty, so that
    # a batch's reach the loop together; not once a function it takes next returns, as
    # that one may block: a spare sends them (`SPARE_DELAY` after it was woken).
    pool = ThreadPool(_AT_ONCE)
    warm = threading.Event()
    pool.run(_nothing, warm.set, "tenure-job-warm")
    assert warm.wait(5)
    # One thread parked: it takes "a" once woken, and finds "b" queued by then.
    wait_until(lambda: pool.idle == 1, 5, "an idle thread")
    reported = threading.Event()
    release = threading.Event()
    pool.run(_nothing, reported.set, "tenure-job-a")
    pool.run(lambda: release.wait(10) and None, _nothing, "tenure-job-b")
    try:
        assert reported.wait(5), "a report waited for a blocked function"
    finally:
        release.set()
    pool.close()


def test_a_thread_pool_runs_quick_functions_back_to_back_on_few_threads() -> None:
    # A batch of functions that return at once is taken from the shared queue by the
    # threads already awake, not one woken thread each.
    pool = ThreadPool(_AT_ONCE)
    names: list[str] = []
    threads: set[int] = set()
    all_ran = threading.Event()
    lock = threading.Lock()

    def quick() -> None:
        with lock:
            names.append(threading.current_thread().name)
            threads.add(threading.get_ident())
            if len(names) == 100:
                all_ran.set()

    for index in range(100):
        pool.run(quick, _nothing, f"tenure-job-{index}")
    assert all_ran.wait(5)
    assert sorted(names) == sorted(f"tenure-job-{index}" for index in range(100))
    assert len(threads) < 100
    pool.close()


def test_the_loops_primitives_are_anyios_and_behave_as_anyio_makes_them() -> None:
    # Made directly from the backend's classes (`Primitives`): the same objects that
    # anyio.Event() and anyio.CancelScope() make, a shield that holds, an event that wakes.
    async def main() -> list[str]:
        made = Primitives.current()
        event, scope = made.event(), made.cancel_scope(shield=True)
        assert isinstance(event, anyio.Event)
        assert isinstance(scope, anyio.CancelScope)
        assert type(event) is type(anyio.Event())
        seen: list[str] = []

        async def shielded_waiter() -> None:
            with scope:
                await event.wait()
                seen.append("woken in the shield")

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(shielded_waiter)
            await anyio.lowlevel.checkpoint()
            task_group.cancel_scope.cancel()  # the shield holds the waiter
            event.set()  # not awaited: the task group's end waits for the waiter
        return seen

    assert anyio.run(main) == ["woken in the shield"]
