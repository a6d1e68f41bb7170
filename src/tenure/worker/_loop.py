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
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, NamedTuple, TypeVar

import anyio

__all__ = [
    "CallsInTask",
    "DaemonThread",
    "LoopCaller",
    "Primitives",
    "ThreadPool",
    "run_in_daemon_thread",
]

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

    def call_soon_batched(self, *callbacks: Callable[[], object]) -> None:
        """Run ``callbacks`` on the loop soon, with any others handed in meanwhile: one wake
        of the loop (a write to its self-pipe, a GIL hand-over) for handler threads that
        end together, not one each. For callbacks that must not wait behind the loop's
        other work, such as a lease's loss, use `call_soon`."""
        with self._lock:
            self._batch.extend(callbacks)
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


class CallsInTask:
    """Calls that the loop's callbacks hand to one task (`run`), which makes them: starting
    a task takes a task to start it from, as anyio finds the loop's backend through the
    current task when sniffio is installed, and a callback of the loop has none."""

    def __init__(self, event: Callable[[], anyio.Event]) -> None:
        self._event_class = event  # the loop's (`Primitives`)
        self._calls: list[Callable[[], object]] = []
        self._wake: anyio.Event | None = None  # set by `call` while `run` waits

    def call(self, function: Callable[..., object], *args: Any) -> None:
        """On the loop: have ``function(*args)`` called in the task, soon."""
        self._calls.append(partial(function, *args))
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Make the calls handed in, until cancelled."""
        while True:
            while self._calls:
                calls, self._calls = self._calls, []
                for call in calls:
                    call()
            self._wake = self._event_class()
            try:
                await self._wake.wait()
            finally:
                self._wake = None


# How long a spare thread waits before it looks at the pool (`ThreadPool`): the longest a
# function waits behind a handler that blocks, or a finished one's report behind it.
SPARE_DELAY = 0.001


class _Parked:
    """A parked pool thread: released to take functions, at once or as a spare."""

    __slots__ = ("lock", "spare")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.spare = False


class ThreadPool:
    """Daemon threads that run functions handed to them (`DaemonThread` with ``pool``) and
    then take the next one: a new thread per sync handler cost its start and more GIL
    hand-offs than the no-op job itself.

    Functions wait in one queue that every thread of the pool takes from, and a thread is
    woken only when no other is on its way to the queue (as `_slots.Slots` does for tasks):
    the jobs of a claimed batch, handed in together, cost one thread wake-up, and one thread
    runs those whose handlers return at once back to back. It reports them (to the loop)
    together once the queue is empty, not one by one: each report wakes the loop, and a
    wake-up and a GIL hand-over each cost more than a no-op handler.

    No function waits for another's, and no report waits for another function: a thread
    that takes a function while others wait, or while reports wait, wakes a spare thread
    first (or starts one), unless one is on its way. The spare sleeps `SPARE_DELAY` (the
    GIL released), then takes what is still waiting and sends the reports: if the handler
    blocks, the rest go on within that delay; if it returns at once (most), the first
    thread has taken them all by then, and the spare has one look and parks (so it does
    too if no handler runs and a thread is on its way to the queue). (Woken at
    once, the spare fought the first thread for the GIL over a batch of quick handlers,
    and the batch spread over several threads.) A thread busy with a function that never
    returns stays busy, and is never given another meanwhile; `close` ends the idle threads
    and the others once their function returns."""

    def __init__(self, caller: LoopCaller) -> None:
        self._caller = caller  # told of the functions that returned (`run`'s ``reported``)
        self._lock = threading.Lock()
        self._ready: deque[tuple[Callable[[], None], Callable[[], None], str]] = deque()
        self._idle: list[_Parked] = []  # parked threads
        self._woken = 0  # threads woken (or started) that have not taken a function yet
        # Spare threads woken (or started) that have not looked yet: not `_woken`, so that
        # a function handed in meanwhile does not wait for a spare's delay.
        self._spares = 0
        self._running = 0  # functions taken by a thread and not yet returned
        self._unreported: list[Callable[[], None]] = []  # reports of functions returned
        self._closed = False

    @property
    def idle(self) -> int:
        """How many threads wait for a function."""
        return len(self._idle)

    @property
    def busy(self) -> bool:
        """Whether functions are queued or running, or their reports not sent yet (read
        without the lock: a hint)."""
        return bool(self._running or self._ready or self._unreported)

    def run(self, target: Callable[[], None], reported: Callable[[], None], name: str) -> None:
        """Run ``target`` on a thread of the pool (renamed ``name``), waking or starting one
        unless one is already on its way to the queue; then ``reported`` on the loop (the
        caller's), with the others reported together. Neither may raise."""
        with self._lock:
            self._ready.append((target, reported, name))
            if self._woken:
                return
            parked = self._wake_locked(spare=False)
        self._start_or_wake(parked, spare=False)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._woken += len(idle)
        for parked in idle:
            parked.spare = False
            parked.lock.release()

    def _wake_locked(self, *, spare: bool) -> _Parked | None:
        """With the lock held: count one more thread on its way (or spare), and return the
        parked one to release (None: a new thread is to be started)."""
        if spare:
            self._spares += 1
        else:
            self._woken += 1
        return self._idle.pop() if self._idle else None

    def _start_or_wake(self, parked: _Parked | None, *, spare: bool) -> None:
        if parked is not None:
            parked.spare = spare
            parked.lock.release()
        else:
            threading.Thread(
                target=self._serve, args=(spare,), name="tenure-handler", daemon=True
            ).start()

    def _serve(self, spare: bool) -> None:
        thread = threading.current_thread()
        ready, unreported = self._ready, self._unreported
        counted = True  # started or woken: counted (`_woken`, `_spares`) until it looks
        parked = _Parked()
        while True:
            if spare:
                time.sleep(SPARE_DELAY)
            with self._lock:
                # A spare is for a handler that may block: with none running and a thread
                # on its way to the queue, it leaves the functions to that one (it would
                # only fight it for the GIL over them).
                needless = spare and not self._running and self._woken
                if counted:
                    counted = False
                    if spare:
                        self._spares -= 1
                        spare = False
                    else:
                        self._woken -= 1
                if not ready or needless:
                    reports = unreported.copy()
                    unreported.clear()
                    closing = self._closed
                    if not closing:
                        # Parked from now on: a function handed in while it sends the
                        # reports releases it, and it looks again at once.
                        self._idle.append(parked)
                    item = None
                else:
                    reports, closing = None, False
                    item = ready.popleft()
                    self._running += 1
                    # Its handler may block: what waits must not wait for it.
                    more = bool(ready or unreported) and not (self._woken or self._spares)
                    waking = self._wake_locked(spare=True) if more else None
            if item is None:
                if reports:
                    # Sent once no longer counted running: the loop, woken by a report,
                    # must not see these functions as still busy (`busy`). In one call:
                    # each write to the loop's self-pipe let it take the GIL for one.
                    self._caller.call_soon_batched(*reports)
                if closing:
                    return
                parked.lock.acquire()  # released by `run` or `close`, which counted it woken
                spare = parked.spare
                counted = True
                continue
            target, reported, thread.name = item
            if more:
                self._start_or_wake(waking, spare=True)
            target()  # never raises (DaemonThread's target catches everything)
            with self._lock:
                self._running -= 1
                unreported.append(reported)


class DaemonThread(Generic[T]):
    """``function`` running on a new daemon thread (with the starting task's context
    variables), or on one of ``pool``'s; `wait` for its result from the loop of ``caller``,
    any number of times, or be told by ``then``, called on the loop once it has ended.
    Cancelling a wait abandons nothing: the thread runs on, and can be waited for again.
    ``event``: the loop's `anyio.Event` class (`Primitives`), found once by a caller that
    starts many."""

    def __init__(
        self,
        function: Callable[[], T],
        caller: LoopCaller,
        *,
        name: str = "tenure-handler",
        pool: ThreadPool | None = None,
        event: Callable[[], anyio.Event] = anyio.Event,
        then: Callable[[], object] | None = None,
    ) -> None:
        self._event_class = event
        # Made by a wait (a thread that only tells ``then`` needs none), set once the loop
        # is told the thread ended or by `interrupt`.
        self._event: anyio.Event | None = None
        self._told = False
        self._interrupted = False
        self._then = then
        self._outcome: list[tuple[bool, Any]] = []
        self._function = function
        self._caller = caller
        self._context = contextvars.copy_context()
        if pool is None:
            threading.Thread(target=self._alone, name=name, daemon=True).start()
        else:
            pool.run(self._target, self._reported, name)

    def _target(self) -> None:
        try:
            self._outcome.append((True, self._context.run(self._function)))
        except BaseException as exc:
            self._outcome.append((False, exc))

    def _alone(self) -> None:
        try:
            self._target()
        finally:
            self._caller.call_soon_batched(self._reported)

    def _reported(self) -> None:
        self._told = True
        if self._event is not None:
            self._event.set()
        if self._then is not None:
            self._then()

    def interrupt(self) -> None:
        """On the loop: end a `wait_until_interrupted` now, or the next one (the thread
        runs on)."""
        self._interrupted = True
        if self._event is not None:
            self._event.set()

    async def wait_until_interrupted(self) -> bool:
        """Wait until the thread has ended (True) or `interrupt` is called (False): one
        event for both, where a cancel scope around `wait` cost as much as the rest of a
        sync handler's run on the loop."""
        if not self._told and not self._interrupted:
            event = self._event
            if event is None:  # (shared by the waits of the moment)
                self._event = event = self._event_class()
            await event.wait()
        if self._told:
            return True
        # Interrupted: the next wait waits again.
        self._interrupted = False
        self._event = None
        return False

    def result(self) -> T:
        """The function's return value (or its exception raised), once the loop has been
        told the thread ended."""
        ok, value = self._outcome[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    async def wait(self) -> T:
        while not await self.wait_until_interrupted():
            pass
        return self.result()


async def run_in_daemon_thread(
    function: Callable[[], T], caller: LoopCaller, *, name: str = "tenure-handler"
) -> T:
    """Run ``function`` on a new daemon thread (with this task's context variables) and
    return its result. Cancelling the wait abandons the thread, which runs on."""
    return await DaemonThread(function, caller, name=name).wait()
