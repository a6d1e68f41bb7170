"""Job slots: the worker's tasks that run jobs, reused from one job to the next.

A task per job cost more than a no-op job's whole store round trip (anyio's task, its
cancel scope and names); a slot task runs the jobs handed to it one after the other and,
with nothing to run, parks until it is given one. At the end of a run the parked tasks are
told to end (`close`).

No job waits for another's handler: jobs handed in (`start`) wake one slot task (or start
one), which runs as soon as the task running now suspends, and then wakes a task for each
job still waiting. Until it runs, the running task takes the waiting jobs itself, one after
the other: a batch whose handlers do not suspend runs on one task with one wake-up for the
whole batch (there was one per job), and one whose handlers suspend is spread over the
tasks one loop turn later.

Each slot task has one cancel scope for its async handlers (one per job cost about as much
as a no-op job's settle): `Slot.stop` cancels it for a lost job's handler only if that
handler still runs in it (the loss may be decided after it returned, when the task is on
the next job). A cancelled scope stays cancelled, so the task then leaves it, ends that
job outside it (`Slot.then`), and goes on in a new one.

A handler must not see what the job before it left behind in the task: each async
handler runs in a copy of the slot's context variables (`in_context`), as it would in a
task of its own; a sync handler's thread and a child process get their copy anyway.
"""

from __future__ import annotations

import contextvars
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from typing import Any, Generic, TypeVar

import anyio
import anyio.abc

from ._loop import Primitives

__all__ = ["Slot", "Slots", "in_context", "resume_in_context"]

T = TypeVar("T")


class Slot:
    """One slot task's state: the cancel scope its async handlers run in, and the job whose
    async handler runs now."""

    __slots__ = ("handling", "scope", "spent", "then")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.handling: object = None  # the job whose async handler runs in the scope now
        self.spent = False  # the scope was cancelled: the task leaves it after this job
        # The end of the job whose handler was cancelled, run once out of the scope.
        self.then: Callable[[], Awaitable[None]] | None = None

    def stop(self, job: object) -> None:
        """On the loop: cancel ``job``'s handler, if it is the one running in this slot."""
        if self.handling is job:
            self.spent = True
            self.scope.cancel()


class Slots(Generic[T]):
    """Runs ``run(item, slot)`` for each item `start` is given, on reused tasks of a task
    group. ``idle()`` is awaited by a task before it parks, and ``woke()`` called by a
    woken task about to take a job: the task before it suspended, maybe in a handler,
    before it did what it meant to do once its jobs were taken (the worker leads the
    completions that its jobs queued)."""

    def __init__(
        self,
        run: Callable[[T, Slot], Awaitable[None]],
        idle: Callable[[], Awaitable[None]] | None = None,
        woke: Callable[[], None] | None = None,
    ) -> None:
        self._run = run
        self._idle = idle
        self._woke = woke
        # The jobs handed in that wait for a task (the running one may take them): read by
        # the worker once per job, so a plain attribute.
        self.waiting: deque[T] = deque()
        self._parked: list[anyio.Event] = []
        self._woken = 0  # tasks woken (or started) that have not run yet
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._event = Primitives.current().event  # made on the loop that runs the slots

    def start(self, task_group: anyio.abc.TaskGroup, item: T) -> None:
        """Run ``item`` at once: on the task running now once its job is done, or on a
        woken or new one as soon as that task suspends."""
        self.start_many(task_group, (item,))

    def start_many(self, task_group: anyio.abc.TaskGroup, items: Iterable[T]) -> None:
        """`start` each of ``items``, in order."""
        self.waiting.extend(items)
        if not self._woken and self.waiting:
            self._task_group = task_group
            self._wake(1)

    def close(self) -> None:
        """End the parked slot tasks (and the others once they are done)."""
        self._closed = True
        parked, self._parked = self._parked, []
        self._woken += len(parked)
        for event in parked:
            event.set()

    def _wake(self, count: int) -> None:
        self._woken += count
        parked = self._parked
        while count and parked:
            parked.pop().set()
            count -= 1
        if count:
            assert self._task_group is not None
            for _ in range(count):
                self._task_group.start_soon(self._slot, name="tenure job slot")

    async def _slot(self) -> None:
        ready = self.waiting
        self._woken -= 1
        woken = True
        while True:
            slot = Slot()
            with slot.scope:
                while not slot.spent:
                    if ready:
                        item = ready.popleft()
                        if woken:
                            # The task before this one suspended: every job still waiting
                            # gets a task now.
                            woken = False
                            if self._woke is not None:
                                self._woke()
                            if len(ready) > self._woken:
                                self._wake(len(ready) - self._woken)
                        elif ready and not self._woken:
                            # This task may suspend in its handler: the next job must not
                            # wait for it to end.
                            self._wake(1)
                        await self._run(item, slot)
                        continue
                    if self._idle is not None:
                        await self._idle()
                        if ready:
                            continue
                    if self._closed:
                        return
                    parked = self._event()
                    self._parked.append(parked)
                    await parked.wait()
                    self._woken -= 1
                    woken = True
            # A lost job's handler was cancelled in this slot's scope: its job ends here.
            then, slot.then = slot.then, None
            if then is not None:
                await then()


@types.coroutine
def in_context(
    context: contextvars.Context, coroutine: Coroutine[Any, Any, T]
) -> Generator[Any, Any, T]:
    """Await ``coroutine`` with each of its steps run in ``context``: what it sets in its
    context variables stays there (as in a task of its own), not in the caller's."""
    try:
        yielded = context.run(coroutine.send, None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    return (yield from resume_in_context(context, coroutine, yielded))


@types.coroutine
def resume_in_context(
    context: contextvars.Context, coroutine: Coroutine[Any, Any, T], yielded: Any
) -> Generator[Any, Any, T]:
    """`in_context` after the first step, which the caller took in ``context`` and which
    yielded ``yielded``: a coroutine that ends in its first step needs no generator."""
    while True:
        try:
            value = yield yielded
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # cancellation and the like: the coroutine's to handle
            try:
                yielded = context.run(coroutine.throw, exc)
            except StopIteration as stop:
                thrown: T = stop.value
                return thrown
            continue
        try:
            yielded = context.run(coroutine.send, value)
        except StopIteration as stop:
            result: T = stop.value
            return result
