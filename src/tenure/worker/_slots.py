"""Job slots: the worker's tasks that run jobs, reused from one job to the next.

A task per job cost more than a no-op job's whole store round trip (anyio's task, its
cancel scope and names); a slot task runs the jobs handed to it one after the other and,
with nothing to run, parks until it is given one. A job started while every slot task is
busy gets a new one, so no job ever waits for another's handler or settle: jobs run at
once, each in its own task as before, only the task is not new. At the end of a run the
parked tasks are told to end (`close`).

A handler must not see what the job before it left behind in the task: each async
handler runs in a copy of the slot's context variables (`in_context`), as it would in a
task of its own; a sync handler's thread and a child process get their copy anyway.
"""

from __future__ import annotations

import contextvars
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

import anyio
import anyio.abc

__all__ = ["Slots", "in_context"]

T = TypeVar("T")


class Slots(Generic[T]):
    """Runs ``run(item)`` for each item `start` is given, on reused tasks of a task group."""

    def __init__(self, run: Callable[[T], Awaitable[None]]) -> None:
        self._run = run
        self._ready: deque[T] = deque()
        self._parked: list[anyio.Event] = []
        self._closed = False

    def start(self, task_group: anyio.abc.TaskGroup, item: T) -> None:
        """Run ``item`` now: on a parked slot task if there is one, else on a new one."""
        self._ready.append(item)
        if self._parked:
            self._parked.pop().set()
        else:
            task_group.start_soon(self._slot, name="tenure job slot")

    def close(self) -> None:
        """End the parked slot tasks (and the others once they are done)."""
        self._closed = True
        parked, self._parked = self._parked, []
        for event in parked:
            event.set()

    async def _slot(self) -> None:
        ready = self._ready
        while True:
            while ready:
                await self._run(ready.popleft())
            if self._closed:
                return
            parked = anyio.Event()
            self._parked.append(parked)
            await parked.wait()


@types.coroutine
def in_context(
    context: contextvars.Context, coroutine: Coroutine[Any, Any, T]
) -> Generator[Any, Any, T]:
    """Await ``coroutine`` with each of its steps run in ``context``: what it sets in its
    context variables stays there (as in a task of its own), not in the caller's."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                yielded = context.run(coroutine.send, value)
            else:
                yielded = context.run(coroutine.throw, error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        error = None
        try:
            value = yield yielded
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # cancellation and the like: the coroutine's to handle
            value, error = None, exc
