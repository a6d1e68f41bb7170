"""One job in the worker: started on a slot task once claimed (`Slots`), its handler run
(`_invoke`), its job settled (`_settle`), then forgotten. An untraced sync handler's job
holds no task: its thread starts with the claim and its job is settled from the loop's
callback when it returns, or on a slot task once its lease is lost first
(`_start_threads`).

`Jobs` is the part of `Worker` that owns this (the worker mixes it in); the state it shares
with the rest of the worker is declared here, and set by `Worker.__init__` and
`Worker._serve`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from .._clock import Clock
from ..models import Job, Lease
from ._completer import Completer
from ._config import Config, Handler
from ._context import JobContext, set_current
from ._invoke import HowItRuns, Invoker, Running
from ._keeper import LeaseKeeper
from ._lease import REGISTRY, LeaseHandle, lease_extra
from ._loop import CallsInTask
from ._outcome import Outcome
from ._retry import Outage
from ._settle import Settler, note_loss
from ._slots import Slot, Slots
from ._stats import Stats
from ._telemetry import JobSpans, job_spans, tracing

__all__ = ["Jobs"]

log = logging.getLogger("tenure")


class Jobs:
    """Running jobs, for `Worker` (see the module docstring)."""

    _config: Config
    _stats: Stats
    _handlers: dict[str, Handler]
    _jobs: dict[LeaseHandle, Running]  # by identity: a handle is one lease of one store
    _keeper: LeaseKeeper | None
    _settler: Settler | None
    _completer: Completer | None
    _invoker: Invoker | None
    _slots: Slots[Running] | None
    _outage: Outage | None
    _stop_requested: bool
    _say_started: bool = False
    _leading: bool = False  # a task is on its way to lead returned handlers' completions
    _calls: CallsInTask | None = None  # starts the tasks that loop callbacks need
    _idle_scope: anyio.CancelScope | None
    _slot_freed: anyio.Event | None

    def _start(
        self, task_group: anyio.abc.TaskGroup, claimed: Sequence[tuple[Lease, Job]], clock: Clock
    ) -> None:
        """Start the jobs of one claim: registered with the registry and the keeper as one
        batch (one lock each, not one per job), then each on a slot task."""
        assert self._keeper is not None
        assert self._slots is not None
        assert self._invoker is not None
        traced = tracing()  # once per claim: a provider set meanwhile traces the next one
        # Whether each job says it started (DEBUG): asked once per claim, as tracing is.
        self._say_started = log.isEnabledFor(logging.DEBUG)
        handlers, config, jobs = self._handlers, self._config, self._jobs
        on_lost = self._lease_lost
        lock = threading.Lock()  # one for the claim's handles (`LeaseHandle` says why)
        started: list[Running] = []  # on slot tasks
        detached: list[Running] = []  # untraced sync handlers: on pool threads, no task
        handles: list[LeaseHandle] = []
        on_threads = 0
        runs: dict[str, HowItRuns] = {}  # how each queue's handler runs, once per claim
        for lease, job in claimed:
            how = runs.get(job.queue)
            if how is None:
                how = runs[job.queue] = HowItRuns(handlers[job.queue], config)
            spans = job_spans(job, lease) if traced else None
            handle = LeaseHandle(
                lease,
                clock,
                on_lost if spans is None else partial(on_lost, spans=spans),
                how.timeout if job.timeout is None else job.timeout,  # `attempt_timeout`
                lock,
            )
            running = Running(how, job, handle, JobContext(handle, job), spans)
            jobs[handle] = running
            (detached if how.on_thread and spans is None else started).append(running)
            handles.append(handle)
            on_threads += how.on_thread
        self._stats.incr("claimed", len(handles))
        REGISTRY.add_many(handles)
        self._keeper.add_many(handles)
        self._invoker.expect(on_threads)
        if detached:
            self._start_threads(task_group, detached)
        self._slots.start_many(task_group, started)

    def _start_threads(self, task_group: anyio.abc.TaskGroup, runnings: list[Running]) -> None:
        """Start sync handlers on pool threads with no task waiting for each
        (`Invoker.start_thread`). One that returns is settled from the loop's callback
        (`_thread_returned`); one whose lease is lost first goes to a slot task, which
        waits for its thread as for any sync handler after a loss."""
        assert self._invoker is not None
        assert self._slots is not None
        start, slots = self._invoker.start_thread, self._slots
        for running in runnings:
            if running.handle.is_lost():  # lost already: not started, on a slot task
                slots.start(task_group, running)
                continue
            if self._say_started:
                _say_started(running)
            set_current(running.context)  # the thread's copy of the context: its handler's
            start(running)
        set_current(None)

    def _thread_returned(
        self, task_group: anyio.abc.TaskGroup, running: Running, outcome: Outcome
    ) -> None:
        """On the loop: a sync handler with no task of its own returned (`_start_threads`).
        Its job is settled as `_job` settles one: most are completed in a batch, whose call
        one task leads for all the handlers that returned together."""
        assert self._settler is not None
        assert self._calls is not None
        try:
            handed_off = self._settler.hand_off(running, outcome)
        except BaseException:
            self._finished(running)
            raise
        if not handed_off:
            self._calls.call(task_group.start_soon, self._end, running, outcome)
        elif not self._leading:
            self._leading = True
            self._calls.call(task_group.start_soon, self._lead_returned)

    async def _lead_returned(self) -> None:
        """Lead the completions of the sync handlers that returned (`_thread_returned`)."""
        assert self._completer is not None
        self._leading = False
        await self._completer.lead()

    async def _give_back_threads(self) -> None:
        """The run ends with an error or is cancelled from outside: the jobs whose sync
        handlers run with no task waiting for them are given back (released), as `_job`
        gives back its own."""
        assert self._settler is not None
        runnings = [
            running
            for running in self._jobs.values()
            # (lost: on its way to a slot task, which the cancellation stopped)
            if running.detached is not None or running.lost_thread is not None
        ]
        if not runnings:
            return
        for running in runnings:
            running.detached = running.lost_thread = None  # its return settles nothing
        try:
            await self._give_back(runnings)
        finally:
            self._forget(runnings, False)

    async def _give_back(self, runnings: list[Running]) -> None:
        """The worker is being cancelled from outside: these jobs' leases are revoked and
        released (shielded, for 5 s at most), so that another worker takes them at once."""
        assert self._settler is not None
        for running in runnings:
            running.handle.mark_lost("the worker was cancelled", "revoked")
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            for running in runnings:
                await self._settler.settle(running, Outcome("abandoned"))

    def _lease_lost(self, handle: LeaseHandle, spans: JobSpans | None = None) -> None:
        """Any thread, once: a job's lease is lost (its `LeaseHandle`'s ``on_lost``). It is
        counted and said, and its async handler, if it runs, is stopped (`Invoker.lost`)."""
        note_loss(self._stats, handle, outage=self._outage, spans=spans)
        running = self._jobs.get(handle)  # atomic on any thread
        if running is not None and self._invoker is not None:
            self._invoker.lost(running)

    async def _job(self, running: Running, slot: Slot) -> None:
        """Run one job on ``slot``'s task: its handler, then its end (`_end`)."""
        if TYPE_CHECKING:  # (set by `_serve` before any job: asserted for mypy, not per job)
            assert self._invoker is not None
            assert self._settler is not None
            assert self._slots is not None
            assert self._completer is not None
        if self._say_started and running.lost_thread is None:  # (else said as it started)
            _say_started(running)
        running.slot = slot
        set_current(running.context)
        invoker = self._invoker
        try:
            if running.how.on_loop and running.spans is None:  # most jobs: no coroutine between
                outcome = invoker.begin(running) or await invoker.go_on(running)
            else:
                outcome = await invoker(running)
        except BaseException as exc:
            try:
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    await self._give_back([running])  # the worker is cancelled from outside
            finally:
                set_current(None)
                self._finished(running)
            raise
        if slot.spent:
            # Its handler was cancelled in the slot's scope, which stays cancelled: the job
            # ends once the slot's task has left that scope (`Slots`).
            slot.then = partial(self._end, running, outcome)
            return
        # Most jobs: completed in a batch with no wait here; the completer calls
        # `_finished` with the store's answer, and this task runs the next job.
        try:
            handed_off = self._settler.hand_off(running, outcome)
        except BaseException:
            set_current(None)
            self._finished(running)
            raise
        if not handed_off:
            await self._end(running, outcome)
            return
        set_current(None)  # the slot task runs other jobs next
        # With jobs waiting for a task, this one takes them first (a batch whose handlers
        # do not suspend runs on one task) and leads the completions after the last
        # (`Slots` leads before parking; `_lead_unled` if it suspended).
        if not self._slots.waiting:
            await self._completer.lead()

    async def _end(self, running: Running, outcome: Outcome) -> None:
        """Settle a job whose handler has ended and that was not handed off (`_job`), then
        forget it (`_finished`)."""
        assert self._invoker is not None
        assert self._settler is not None
        try:
            with anyio.CancelScope(shield=True):
                await self._settler.settle(running, outcome)
            await self._invoker.outlive(running)  # a timed-out thread keeps its slot
        finally:
            set_current(None)  # the slot task runs other jobs next
            self._finished(running)

    def _lead_unled(self, task_group: anyio.abc.TaskGroup) -> None:
        """A woken slot task is about to take a job: the task that ran before it suspended,
        perhaps in a handler, after queuing completions it meant to lead once it had taken
        the waiting jobs. They leave now, on a task of their own, rather than wait for the
        handler."""
        completer = self._completer
        if completer is not None and completer.unled:
            task_group.start_soon(completer.lead, name="tenure completions")

    def _finished(self, running: Running) -> None:
        """On the loop, once the job is settled: forget it and free its slot."""
        self._forget([running], False)

    def _forget(self, runnings: list[Running], confirmed: bool) -> None:
        """On the loop, once these jobs are settled (``confirmed``: the store has just
        completed them, `Settler.completed`, a batch in one call): forget them and free
        their slots."""
        keeper, forget = self._keeper, self._jobs.pop
        handles = []
        for running in runnings:
            handle = running.handle
            handle.finish(not confirmed)
            if keeper is not None:  # (none once the run has stopped it)
                keeper.remove(handle)
            forget(handle, None)
            handles.append(handle)
        REGISTRY.keep_ended(handles)  # the registry keeps how they ended, not them
        self._freed()

    def _freed(self) -> None:
        """On the loop: jobs have ended (`_finished`)."""
        # The claim loop waits for a free slot (or, draining, for the last job). Set once:
        # its waiter holds it, and each wait makes a new one (no call per job meanwhile).
        freed = self._slot_freed
        if freed is not None and (
            len(self._jobs) < self._config.concurrency or self._stop_requested
        ):
            self._slot_freed = None
            freed.set()
        # The idle claim loop looks again once its last job ended: a burst may be
        # waiting for it, and a limited queue has room again (no store notifies that;
        # its wait would last until the first lease's end). On Redis this costs the
        # wait's connection (a BLPOP cut off mid-reply is not reused).
        if self._idle_scope is not None and not self._jobs:
            self._idle_scope.cancel()


def _say_started(running: Running) -> None:
    """The DEBUG record of a job whose handler starts (`Jobs._say_started`)."""
    lease = running.handle.lease
    log.debug(
        "job started",
        extra=lease_extra(lease, queue=running.job.queue, attempt=lease.attempt),
    )
