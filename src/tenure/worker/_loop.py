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
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

import anyio

__all__ = ["DaemonThread", "LoopCaller", "Primitives", "ThreadPool", "run_in_daemon_thread"]

T = TypeVar("T")


class Primitives(NamedTuple):
    """The running loop's `anyio.Event` and `anyio.CancelScope` classes, found once.

    ``anyio.Event()`` and ``anyio.CancelScope()`` look up the running backend at each call
    (sniffio, then the current task: about a microsecond), and the worker makes one of
    each per completion batch and per parked slot task. Each backend's class is made
    directly (its ``__new__`` is plain), so `current` asks anyio once per worker run."""

    event: Callable[[], anyio.Event]
    cancel_scope: Callable[..., anyio.CancelScope]

    @classmethod
    def current(cls) -> Primitives:
        """The primitives of the event loop running in this thread."""
        return cls(type(anyio.Event()), type(anyio.CancelScope()))


class LoopCaller:
    """Schedules plain callables on one running event loop, from any thread, at once."""

    def __init__(self, schedule: Callable[[Callable[[], object]], object]) -> None:
        self._schedule = schedule
        # `call_soon_batched`: callbacks waiting for the one loop wake-up scheduled for them.
        self._lock = threading.Lock()
        self._batch: list[Callable[[], object]] = []
        self._scheduled = False

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

    def call_soon_batched(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the loop soon, with any others handed in meanwhile: one wake
        of the loop (a write to its self-pipe, a GIL hand-over) for handler threads that
        end together, not one each. For callbacks that must not wait behind the loop's
        other work, such as a lease's loss, use `call_soon`."""
        with self._lock:
            self._batch.append(callback)
            if self._scheduled:
                return
            self._scheduled = True
        self.call_soon(self._run_batch)

    def _run_batch(self) -> None:
        with self._lock:
            batch, self._batch = self._batch, []
            self._scheduled = False
        for callback in batch:
            callback()


class ThreadPool:
    """Daemon threads that run functions handed to them (`DaemonThread` with ``pool``) and
    then take the next one: a new thread per sync handler cost its start and more GIL
    hand-offs than the no-op job itself.

    Functions wait in one queue that every thread of the pool takes from, and a thread is
    woken only when no other is on its way to the queue (as `_slots.Slots` does for tasks):
    the jobs of a claimed batch, handed in together, cost one thread wake-up, and one thread
    runs those whose handlers return at once back to back (a wake-up and a GIL hand-over
    each cost more than a no-op handler). No function waits for another's: a thread that
    takes one while others still wait wakes a thread first (or starts one), so that if its
    handler blocks the next function is taken by that one. A thread busy with a function
    that never returns stays busy, and is never given another meanwhile; `close` ends the
    idle threads and the others once their function returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: deque[tuple[Callable[[], None], Callable[[], None], str]] = deque()
        self._idle: list[threading.Lock] = []  # parked threads, each waiting on its lock
        self._woken = 0  # threads woken (or started) that have not taken a function yet
        self._running = 0  # functions taken by a thread and not yet returned
        self._closed = False

    @property
    def idle(self) -> int:
        """How many threads wait for a function."""
        return len(self._idle)

    @property
    def busy(self) -> bool:
        """Whether functions are queued or running (read without the lock: a hint)."""
        return bool(self._running or self._ready)

    def run(self, target: Callable[[], None], report: Callable[[], None], name: str) -> None:
        """Run ``target`` then ``report`` on a thread of the pool (renamed ``name``),
        waking or starting one unless one is already on its way to the queue. Neither may
        raise."""
        with self._lock:
            self._ready.append((target, report, name))
            if self._woken:
                return
            parked = self._wake_locked()
        self._start_or_wake(parked)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._woken += len(idle)
        for parked in idle:
            parked.release()

    def _wake_locked(self) -> threading.Lock | None:
        """With the lock held: count one more thread on its way, and return the parked one
        to release (None: a new thread is to be started)."""
        self._woken += 1
        return self._idle.pop() if self._idle else None

    def _start_or_wake(self, parked: threading.Lock | None) -> None:
        if parked is not None:
            parked.release()
        else:
            threading.Thread(target=self._serve, name="tenure-handler", daemon=True).start()

    def _serve(self) -> None:
        thread = threading.current_thread()
        ready = self._ready
        woken = True  # started or woken: counted in `_woken` until it takes a function
        parked = threading.Lock()
        parked.acquire()
        while True:
            with self._lock:
                if woken:
                    woken = False
                    self._woken -= 1
                if not ready:
                    if self._closed:
                        return
                    self._idle.append(parked)
                    item = None
                else:
                    item = ready.popleft()
                    self._running += 1
                    # Its handler may block: the next function must not wait for it.
                    more = bool(ready) and not self._woken
                    spare = self._wake_locked() if more else None
            if item is None:
                parked.acquire()  # released by `run` or `close`, which counted it woken
                woken = True
                continue
            target, report, thread.name = item
            if more:
                self._start_or_wake(spare)
            target()  # never raises (DaemonThread's target catches everything)
            with self._lock:
                self._running -= 1
            # Reported once no longer counted running: the loop, woken by the report,
            # must not see this function as still busy (`busy`).
            report()


class DaemonThread(Generic[T]):
    """``function`` running on a new daemon thread (with the starting task's context
    variables), or on one of ``pool``'s; `wait` for its result from the loop of ``caller``,
    any number of times. Cancelling a wait abandons nothing: the thread runs on, and can be
    waited for again."""

    def __init__(
        self,
        function: Callable[[], T],
        caller: LoopCaller,
        *,
        name: str = "tenure-handler",
        pool: ThreadPool | None = None,
    ) -> None:
        self._done = anyio.Event()
        self._outcome: list[tuple[bool, Any]] = []
        context = contextvars.copy_context()

        def target() -> None:
            try:
                self._outcome.append((True, context.run(function)))
            except BaseException as exc:
                self._outcome.append((False, exc))

        def report() -> None:
            caller.call_soon_batched(self._done.set)

        if pool is None:

            def alone() -> None:
                try:
                    target()
                finally:
                    report()

            threading.Thread(target=alone, name=name, daemon=True).start()
        else:
            pool.run(target, report, name)

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
