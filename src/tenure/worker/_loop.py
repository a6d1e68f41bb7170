"""Talking to the worker's event loop from other threads.

anyio's ``from_thread`` calls wait for the loop to answer; the lease watchdog must never
wait on a loop that a handler may be blocking, so it schedules callbacks without waiting.
Handler threads are our own daemon threads, not anyio's worker threads, so that a handler
that never returns cannot keep the process alive once the worker has stopped.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio

__all__ = ["DaemonThread", "LoopCaller", "run_in_daemon_thread"]

T = TypeVar("T")


class LoopCaller:
    """Schedules plain callables on one running event loop, from any thread, at once."""

    def __init__(self, schedule: Callable[[Callable[[], object]], object]) -> None:
        self._schedule = schedule

    @classmethod
    def current(cls) -> LoopCaller:
        """The caller for the event loop running in this thread (asyncio or trio)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            trio_lowlevel: Any = importlib.import_module("trio.lowlevel")
            return cls(trio_lowlevel.current_trio_token().run_sync_soon)
        return cls(loop.call_soon_threadsafe)

    def call_soon(self, callback: Callable[[], object]) -> bool:
        """Run ``callback`` on the loop soon; False if the loop is gone."""
        try:
            self._schedule(callback)
        except Exception:  # loop closed or run finished
            return False
        return True


class DaemonThread(Generic[T]):
    """``function`` running on a new daemon thread (with the starting task's context
    variables); `wait` for its result from the loop of ``caller``, any number of times.
    Cancelling a wait abandons nothing: the thread runs on, and can be waited for again."""

    def __init__(
        self, function: Callable[[], T], caller: LoopCaller, *, name: str = "tenure-handler"
    ) -> None:
        self._done = anyio.Event()
        self._outcome: list[tuple[bool, Any]] = []
        context = contextvars.copy_context()

        def target() -> None:
            try:
                self._outcome.append((True, context.run(function)))
            except BaseException as exc:
                self._outcome.append((False, exc))
            finally:
                caller.call_soon(self._done.set)

        threading.Thread(target=target, name=name, daemon=True).start()

    @property
    def done(self) -> bool:
        """Whether the loop has been told the thread ended."""
        return self._done.is_set()

    async def wait(self) -> T:
        await self._done.wait()
        ok, value = self._outcome[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value


async def run_in_daemon_thread(
    function: Callable[[], T], caller: LoopCaller, *, name: str = "tenure-handler"
) -> T:
    """Run ``function`` on a new daemon thread (with this task's context variables) and
    return its result. Cancelling the wait abandons the thread, which runs on."""
    return await DaemonThread(function, caller, name=name).wait()
