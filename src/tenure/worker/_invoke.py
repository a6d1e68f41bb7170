"""Running one job's handler, the three ways, each ending in an `Outcome`:

* ``async def`` handlers run on the worker's event loop, in their slot task's cancel scope,
  which the lease's loss cancels while the handler runs (`_slots.Slot`);
* sync handlers run on a daemon thread of the invoker's pool (`DaemonThread`), untraced
  ones with no task waiting for them until their lease is lost (`Invoker.start_thread`);
  a thread cannot be stopped, so the handler sees ``ctx.lost`` and is reminded until it
  returns;
* with ``isolation="process"``, either kind runs in a child process (`_process`).

A handler whose lease is already lost when its turn comes (the worker paused between the
claim and the start, say) is not started at all: no work begins under a lost lease.

At a handler's timeout (a loss of kind ``timed_out``) the async handler is cancelled and the
process killed as at any loss; a sync handler's thread is not waited for any longer: the
runner returns at once, so that the attempt is failed while the lease is still the worker's,
and the thread (``Running.straggler``) keeps its concurrency slot until it returns
(`Invoker.outlive`).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from .._protocol import RetryPolicy
from ..models import Job
from ._config import Config, Handler, Isolation
from ._context import JobContext
from ._lease import LeaseHandle, lease_extra
from ._loop import DaemonThread, LoopCaller, Primitives, ThreadPool
from ._outcome import Outcome, handler_outcome, outcome_of, returned_outcome
from ._process import run_in_process
from ._slots import Slot, resume_in_context
from ._stats import Stats
from ._telemetry import JobSpans

__all__ = ["HowItRuns", "Invoker", "Running", "attempt_timeout"]

log = logging.getLogger("tenure")


class HowItRuns:
    """How the handler of one queue runs, worked out once per claim (`Jobs._start`) and
    shared by that claim's jobs of the queue."""

    __slots__ = ("handler", "isolation", "on_loop", "on_thread", "retry", "timeout")

    def __init__(self, handler: Handler, config: Config) -> None:
        self.handler = handler
        self.isolation: Isolation = handler.isolation or config.isolation
        in_process = self.isolation == "process"
        # An async handler on the loop (in its slot task, `Invoker.begin`), a sync one on
        # a thread of the worker's pool, or either in a process (neither).
        self.on_loop = not in_process and handler.is_async
        self.on_thread = not in_process and not handler.is_async
        self.retry: RetryPolicy = handler.retry or config.retry
        # Its attempts' timeout, unless a job has one of its own.
        self.timeout = attempt_timeout(None, handler, config.timeout)


class Running:
    """One job in flight: how its handler runs, the job, and its lease."""

    # Most jobs never change these: they start as the class's, so that a claim sets five
    # attributes per job rather than ten.
    # A sync handler's thread, until it ends: interrupted to stop waiting (worker stopping).
    thread: DaemonThread[Outcome] | None = None
    # A sync handler's wait for its thread after the loss: cancelled to stop waiting.
    wait_scope: anyio.CancelScope | None = None
    # A timed-out sync handler's thread, still running after the attempt was failed.
    straggler: DaemonThread[Outcome] | None = None
    # An untraced sync handler's thread, which no task waits for (`Invoker.start_thread`),
    # until it returns or its lease is lost (then `lost_thread`, for the slot task that
    # waits for it: `Invoker._run_thread`).
    detached: DaemonThread[Outcome] | None = None
    lost_thread: DaemonThread[Outcome] | None = None
    started: float = 0.0  # when a detached handler started (`time.perf_counter`)
    abandoned: bool = False  # the worker stopped waiting for this handler (stopping)
    slot: Slot | None = None  # the slot task it runs on (`Jobs._job`)
    # An async handler that suspended in its first step (`Invoker.begin`): its context,
    # coroutine, what it yielded, and when it started.
    suspended: tuple[contextvars.Context, Coroutine[Any, Any, Any], Any, float] | None = None

    def __init__(
        self,
        how: HowItRuns,
        job: Job,
        handle: LeaseHandle,
        context: JobContext,
        spans: JobSpans | None = None,  # its OpenTelemetry spans (None without OpenTelemetry)
    ) -> None:
        self.how = how
        self.job = job
        self.handle = handle
        self.context = context
        self.spans = spans

    def abandon(self) -> None:
        """On the loop: stop waiting for the handler's thread, now and from now on."""
        self.abandoned = True
        if self.wait_scope is not None:
            self.wait_scope.cancel()
        if self.thread is not None:
            self.thread.interrupt()


class Invoker:
    """Runs the handlers of one worker run, on its event loop (``caller``)."""

    def __init__(self, caller: LoopCaller, stats: Stats, start_method: str) -> None:
        self._caller = caller
        self._stats = stats
        self._start_method = start_method
        self._threads = ThreadPool(caller)  # sync handlers' threads, kept for the next job
        self._event = Primitives.current().event  # made on the loop that runs the handlers
        self._expected = 0  # started jobs of sync handlers whose handlers have not ended
        # Where a detached sync handler's job goes once it returned, or lost its lease
        # first (`report_threads_to`).
        self._report_returned: Callable[[Running, Outcome], object] | None = None
        self._report_lost: Callable[[Running], object] | None = None

    def report_threads_to(
        self, returned: Callable[[Running, Outcome], object], lost: Callable[[Running], object]
    ) -> None:
        """For `start_thread`, once per run: on the loop, ``returned(running, outcome)``
        once a detached handler has returned; or, if its lease is lost first,
        ``lost(running)``, which gives the job to a slot task that waits for the thread as
        `_run_thread` does after a loss (reminded, left at its timeout, abandoned when the
        worker stops waiting)."""
        self._report_returned, self._report_lost = returned, lost

    def expect(self, count: int) -> None:
        """``count`` jobs of a claim, whose handlers run on threads (`Running.on_thread`),
        were started: each counts as busy until its handler has ended. Their slot tasks
        hand them to the pool over the next loop turns, and the first one's thread may
        report before the others are in the pool: the completer must wait for them too."""
        self._expected += count

    def lost(self, running: Running) -> None:
        """Any thread: ``running``'s lease is lost. Its async handler, if it still runs in
        its slot, is cancelled on the loop (`Slot.stop`); one that has not started yet is
        never started (`begin`). A sync handler that no task waits for has its job go to
        one (`_thread_lost`). The other runners wait for the loss on their own
        (`LeaseHandle.on_loss`)."""
        slot = running.slot
        if slot is not None:
            self._caller.call_soon(partial(slot.stop, running))
        elif running.detached is not None:  # (checked again on the loop)
            self._caller.call_soon(partial(self._thread_lost, running))

    def busy(self) -> bool:
        """Whether sync handlers run, wait for a thread, or are about to."""
        return self._expected > 0 or self._threads.busy

    def close(self) -> None:
        """At the end of the run: the idle handler threads end (busy ones once done)."""
        self._threads.close()

    async def __call__(self, running: Running) -> Outcome:
        """Run ``running``'s handler, whichever way it runs, traced or not. (`Jobs._job`
        runs the common case, an untraced async handler, with `begin` and `go_on`.)"""
        spans = running.spans
        if running.how.on_loop:
            if spans is None:
                return self.begin(running) or await self.go_on(running)
            with spans.handling():
                outcome = self.begin(running) or await self.go_on(running)
            spans.handled(outcome, running.handle)
            return outcome
        # (A detached handler brought here by its loss started earlier: `start_thread`.)
        started = time.perf_counter() if running.lost_thread is None else running.started
        try:
            if running.lost_thread is None and running.handle.is_lost():
                return _not_started(running)  # before its thread or process is started
            if spans is None:
                outcome = await self._invoke(running)
            else:
                with spans.handling():
                    outcome = await self._invoke(running)
                spans.handled(outcome, running.handle)
        finally:
            if running.how.on_thread:
                self._expected -= 1
        self._stats.handled(running.job.queue, outcome.kind, time.perf_counter() - started)
        return outcome

    def start_thread(self, running: Running) -> None:
        """Start an untraced sync handler (`Jobs._start`) on a pool thread that no task
        waits for (a slot task per job, suspended on an event until the thread reported,
        cost a sync job about as much on the loop as the rest of its run there); its job
        goes where `report_threads_to` said."""
        context = running.context
        function = running.how.handler.function
        running.started = time.perf_counter()
        running.detached = DaemonThread(
            partial(handler_outcome, context, lambda: function(context)),
            self._caller,
            name=f"tenure-job-{context.job_id}"[:64],
            pool=self._threads,
            event=self._event,
            then=partial(self._thread_returned, running),
        )
        # Its loss reaches `_thread_lost` through `lost` (the handle's one callback, not
        # one more per job), which finds no detached thread if it came before it was set.
        if running.handle.lost_flag:
            self._caller.call_soon(partial(self._thread_lost, running))

    def _thread_returned(self, running: Running) -> None:
        """On the loop: a detached handler returned, unless its loss came first (then
        the task waiting for `lost_thread` takes its outcome)."""
        thread = running.detached
        if thread is None:
            return
        running.detached = None
        self._expected -= 1
        outcome = thread.result()
        self._stats.handled(running.job.queue, outcome.kind, time.perf_counter() - running.started)
        assert self._report_returned is not None
        self._report_returned(running, outcome)

    def _thread_lost(self, running: Running) -> None:
        """On the loop: a detached handler's lease is lost before it returned (`lost`)."""
        thread = running.detached
        if thread is None:  # it returned first: its settle finds the loss
            return
        running.detached = None
        running.lost_thread = thread
        assert self._report_lost is not None
        self._report_lost(running)

    async def _invoke(self, running: Running) -> Outcome:
        if running.how.isolation == "process":
            return await run_in_process(
                running.how.handler.function,
                running.job,
                running.handle,
                self._caller,
                self._stats,
                self._start_method,
            )
        return await self._run_thread(running)

    def begin(self, running: Running) -> Outcome | None:
        """Start an async handler in its slot task's cancel scope (`Jobs._job` set
        ``running.slot``), and take its first step here, with no coroutine of the worker's
        around it: its outcome if it ended there (most do), else None, and `go_on` runs
        the rest."""
        slot = running.slot
        if TYPE_CHECKING:  # (`Jobs._job` set it: asserted for mypy, not per job)
            assert slot is not None
        # A loss decided before now found no handler to stop (`lost` cancels the slot's
        # scope only while this handler runs in it): the handler is not started at all.
        if running.handle.is_lost():
            return _not_started(running)
        slot.handling = running
        # In a context of its own: the slot task runs other jobs after this one.
        own = contextvars.copy_context()
        started = time.perf_counter()
        try:
            coroutine = running.how.handler.function(running.context)
            yielded = own.run(coroutine.send, None)
        except StopIteration as stop:  # `_returned`, written out: most jobs end here
            slot.handling = None
            outcome = returned_outcome(running.context, stop.value)
        except BaseException as exc:
            outcome = self._raised(running, exc)
        else:
            running.suspended = (own, coroutine, yielded, started)
            return None
        self._stats.handled(running.job.queue, outcome.kind, time.perf_counter() - started)
        return outcome

    async def go_on(self, running: Running) -> Outcome:
        """Run the rest of a handler that `begin` started and that suspended."""
        assert running.suspended is not None
        own, coroutine, yielded, started = running.suspended
        running.suspended = None
        try:
            value = await resume_in_context(own, coroutine, yielded)
        except BaseException as exc:
            outcome = self._raised(running, exc)
        else:
            outcome = self._returned(running, value)
        self._stats.handled(running.job.queue, outcome.kind, time.perf_counter() - started)
        return outcome

    @staticmethod
    def _returned(running: Running, value: Any) -> Outcome:
        assert running.slot is not None
        running.slot.handling = None
        return returned_outcome(running.context, value)

    def _raised(self, running: Running, exc: BaseException) -> Outcome:
        """The outcome of an async handler that raised ``exc`` (or raise it again: not its
        outcome, `_propagates`)."""
        slot = running.slot
        assert slot is not None
        slot.handling = None
        if not (slot.spent and isinstance(exc, anyio.get_cancelled_exc_class())):
            if _propagates(exc):
                raise exc
            return outcome_of(running.context, exc)
        # Stopped by the loss (the slot's task leaves its scope before settling the job).
        kind = running.handle.lost_kind
        if kind not in ("revoked", "timed_out"):
            self._stats.incr("cancelled_on_loss")
        log.info(
            "async handler cancelled: %s",
            "it ran past its timeout" if kind == "timed_out" else "its lease is lost",
            extra=lease_extra(running.handle.lease, reason=running.handle.lost_reason),
        )
        return Outcome("lost")

    async def _run_thread(self, running: Running) -> Outcome:
        thread = running.lost_thread
        if thread is not None:  # a detached handler whose lease was lost (`start_thread`)
            running.lost_thread = None
            return await self._wait_after_loss(running, thread)
        context = running.context
        function = running.how.handler.function
        running.thread = thread = DaemonThread(
            partial(handler_outcome, context, lambda: function(context)),
            self._caller,
            name=f"tenure-job-{context.job_id}"[:64],
            pool=self._threads,
            event=self._event,
        )
        # Until the lease is lost, only the thread is waited for (no helper tasks, no
        # cancel scope): the loss and the worker's stopping (`Running.abandon`) interrupt
        # the wait.
        running.handle.on_loss(partial(self._caller.call_soon, thread.interrupt))
        ended = await thread.wait_until_interrupted()
        running.thread = None
        if ended:
            return thread.result()
        return await self._wait_after_loss(running, thread)

    @staticmethod
    async def _wait_after_loss(running: Running, thread: DaemonThread[Outcome]) -> Outcome:
        """A sync handler whose lease is lost (or that the worker stopped waiting for) runs
        on: its outcome once it returns, unless it times out or is abandoned first."""
        if running.abandoned:
            return Outcome("abandoned")
        with anyio.CancelScope() as wait_scope:
            running.wait_scope = wait_scope
            # Lost while the thread runs: remind it, and leave it at its timeout.
            lost = anyio.Event()
            lost.set()
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(_nag, running, lost)
                task_group.start_soon(_leave_at_timeout, running, lost, task_group.cancel_scope)
                outcome = await thread.wait()
                task_group.cancel_scope.cancel()
                return outcome
            # The handler timed out: its attempt is failed now, the thread runs on.
            running.straggler = thread
            return Outcome("lost")
        return Outcome("abandoned")

    async def outlive(self, running: Running) -> None:
        """After a timed-out sync handler's attempt was settled: wait for its thread, which
        keeps its concurrency slot until it returns (reminded as at a loss), unless the
        worker stops waiting (`Running.abandon`)."""
        thread = running.straggler
        if thread is None or running.abandoned:
            return
        lost = anyio.Event()
        lost.set()
        with anyio.CancelScope() as wait_scope:
            running.wait_scope = wait_scope
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(_nag, running, lost)
                await thread.wait()
                task_group.cancel_scope.cancel()


def attempt_timeout(job: Job | None, handler: Handler, default: float | None) -> float | None:
    """The timeout of one attempt, in seconds (None: none): the job's own if it has one,
    else the handler's, else the worker's (`Job.timeout`: set by ``submit(timeout=...)``,
    checked there). Without ``job``: what a job with no timeout of its own gets."""
    if job is not None and job.timeout is not None:
        return job.timeout
    return handler.timeout if handler.timeout is not None else default


def _not_started(running: Running) -> Outcome:
    """The outcome of a job whose lease was lost before its handler started (a worker
    paused between its claim and the handler's start, a timeout already passed, the worker
    stopping): the handler is not run, as a worker that cannot keep a lease stops its work,
    and the job is settled as after any loss."""
    handle = running.handle
    log.info(
        "handler not started: the job's lease was lost before it could start",
        extra=lease_extra(handle.lease, reason=handle.lost_reason),
    )
    return Outcome("lost")


def _propagates(exc: BaseException) -> bool:
    """Whether an exception out of an async handler is not its outcome: cancellation (and
    Ctrl-C) belong to the cancel scope and the worker; a base exception group may hold
    them. SystemExit and the like fail the attempt."""
    if isinstance(exc, (anyio.get_cancelled_exc_class(), KeyboardInterrupt)):
        return True
    return not isinstance(exc, Exception) and "ExceptionGroup" in type(exc).__name__


async def _leave_at_timeout(running: Running, lost: anyio.Event, scope: anyio.CancelScope) -> None:
    """Stop waiting for a sync handler's thread once it has timed out."""
    await lost.wait()
    if running.handle.lost_kind != "timed_out":
        return
    log.warning(
        "sync handler timed out: ctx.lost is set, but a thread cannot be stopped; the job is "
        "failed now and the thread keeps its slot until it returns",
        extra=lease_extra(running.handle.lease, reason=running.handle.lost_reason),
    )
    scope.cancel()


async def _nag(running: Running, lost: anyio.Event) -> None:
    """A sync handler cannot be stopped: say so if it goes on long after its loss (it
    keeps its concurrency slot until it returns)."""
    await lost.wait()
    lease = running.handle.lease
    waited = max(1.0, lease.ttl)
    await anyio.sleep(waited)
    while True:
        log.warning(
            "sync handler still running %.0f s after its lease was lost; it should "
            "check ctx.lost (or ctx.check()) and return",
            waited,
            extra=lease_extra(lease, reason=running.handle.lost_reason),
        )
        await anyio.sleep(60.0)
        waited += 60.0
