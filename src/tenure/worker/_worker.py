"""`tenure.Worker`: runs handlers under leases and stops them when a lease is lost.

Threads and tasks of a running worker::

    event loop (the thread that called run)   claim loop, one task per job, async handlers
    tenure-renewer                            renews every held lease (own store connection)
    tenure-lease-watchdog                     no I/O: declares leases lost at their deadline
    tenure-job-<id>                           one daemon thread per running sync handler
    child process                             one per running handler with isolation=process

A job's life: claim (one store call for up to ``concurrency - running`` jobs) → register
the lease with the keeper and the registry → run the handler (`_invoke`, ending in an
`_outcome.Outcome`) → settle (`_settle`): complete, fail, release, or nothing at all if the
lease was lost (a stale worker never completes). Completions of jobs that finish together
go to the store in one call (`_completer`). This class is the orchestrator: options
(`_config`), the claim loop, the jobs in flight, stopping and draining.
"""

from __future__ import annotations

import logging
import multiprocessing.forkserver
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from types import FrameType
from typing import Any, TypeVar, overload

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._clock import Clock, LeaseTiming, SystemClock
from .._protocol import RetryPolicy
from .._schedule import Schedule, make_schedule
from .._store import connect
from .._store_async import AsyncStore
from ..aio import connect as connect_async
from ..errors import InvalidArgument, StoreLost
from ..stores import resolve_url
from ._claiming import Claiming
from ._completer import Completer, Refill
from ._config import Config, Handler, Isolation, default_owner, make_config, make_handler
from ._config import start_method as resolve_start_method
from ._invoke import Invoker, Running
from ._jobs import Jobs
from ._keeper import LeaseKeeper
from ._lease import LeaseHandle
from ._loop import CallsInTask, LoopCaller, Primitives, run_in_daemon_thread
from ._periodic import Periodic
from ._process import prepare_process_handlers
from ._renewer_store import OnDemandStore
from ._retention import Retention
from ._retry import Outage, open_through_outage
from ._settle import Settler
from ._signals import install_handlers
from ._slots import Slots
from ._stats import Durations, Progress, Stats

__all__ = ["Worker"]

log = logging.getLogger("tenure")

# The counters the final and progress lines carry in their structured field ``counters``.
_FINAL_COUNTERS = ("claimed", "completed", "failed", "dead", "retried", "leases_lost")

F = TypeVar("F", bound=Callable[..., Any])


class Worker(Claiming, Jobs):
    """Runs registered handlers on the jobs of their queues, under leases.

    ::

        worker = tenure.Worker("sqlite:///tenure.db", concurrency=4, ttl=30)

        @worker.handler("reports")
        def build_report(ctx: tenure.JobContext) -> dict:
            ctx.check()                       # raises LeaseLost once the lease is gone
            write(ctx.payload, token=ctx.token)
            return {"rows": 1234}             # -> complete(result)

        worker.run()                          # until SIGTERM/SIGINT (or worker.stop())

    Arguments (all validated here; `configure` changes them before `run`):

    * ``url``: the store (default ``TENURE_STORE_URL``, else ``sqlite:///tenure.db``).
    * ``concurrency``: handlers running at once in this process (1-1000).
    * ``ttl``: lease length in seconds; ``renew_every``: renewal period (default a third of
      the ttl, at most half), each period shortened by a random 0-25 % (jitter).
    * ``grace``: seconds in-flight handlers get to finish after the first SIGTERM/SIGINT
      (or `stop`) before their leases are given back; a second signal gives them back at
      once.
    * ``isolation``: ``"thread"`` (sync handlers on a thread of their own, async handlers
      on the worker's event loop) or ``"process"`` (each job in a child process, killed
      when its lease is lost). Handlers can override it.
    * ``retry``: the backoff (`tenure.RetryPolicy`) after a handler raised; the job's
      ``max_attempts`` (given at submit) decides when it is dead instead.
    * ``poll_interval``: the longest an idle worker waits before asking the store again
      (stores that notify wake it earlier).
    * ``owner``: the owner id of the leases (default ``host:pid:random``).
    * ``queues``: serve only these of the registered queues.
    * ``clock``, ``store_clock``, ``timing``: as in `tenure.connect` (tests).
    * ``start_method``: ``"forkserver"`` (default where available) or ``"spawn"``, for
      process isolation.
    * ``summary_every``: seconds between the one-line progress summaries logged at INFO
      (done, failed, retried, lost, in flight, rate; none while nothing changes); 0: none.
    * ``retention``: purge done, dead and cancelled jobs older than this (e.g.
      ``timedelta(days=7)``; default None: keep them), one worker of the fleet per
      ``retention_every`` seconds of store time (`_retention`).
    * ``timeout``: the per-attempt timeout (seconds) of handlers that set none (default
      None: none). Past it the handler is stopped as at a lost lease, its lease no longer
      renewed, and the attempt failed under the retry policy (docs/worker.md, Timeouts).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        concurrency: int = 1,
        ttl: float | timedelta = 30.0,
        renew_every: float | timedelta | None = None,
        grace: float | timedelta = 30.0,
        isolation: Isolation = "thread",
        retry: RetryPolicy | None = None,
        poll_interval: float | timedelta = 1.0,
        owner: str | None = None,
        queues: Sequence[str] | None = None,
        clock: Clock | None = None,
        store_clock: Clock | None = None,
        timing: LeaseTiming | None = None,
        start_method: str | None = None,
        summary_every: float | timedelta = 10.0,
        retention: float | timedelta | None = None,
        retention_every: float | timedelta = 3600.0,
        timeout: float | timedelta | None = None,
    ) -> None:
        self._config = make_config(
            url=url,
            concurrency=concurrency,
            ttl=ttl,
            renew_every=renew_every,
            grace=grace,
            isolation=isolation,
            retry=retry,
            poll_interval=poll_interval,
            owner=owner,
            queues=queues,
            clock=clock,
            store_clock=store_clock,
            timing=timing,
            start_method=start_method,
            summary_every=summary_every,
            retention=retention,
            retention_every=retention_every,
            timeout=timeout,
        )
        self._handlers: dict[str, Handler] = {}
        self._schedules: dict[str, Schedule] = {}
        self._stats = Stats()
        self._lock = threading.Lock()
        self._running = False
        self._owner: str | None = None
        self._caller: LoopCaller | None = None
        self._stop_requested = False
        self._stop_now = False
        self._stop_time = 0.0
        self._stop_announced = 0
        self._jobs: dict[LeaseHandle, Running] = {}
        self._idle_scope: anyio.CancelScope | None = None
        self._slot_freed: anyio.Event | None = None
        # Made by _serve for each run, before any job starts.
        self._keeper: LeaseKeeper | None = None
        self._completer: Completer | None = None
        self._settler: Settler | None = None
        self._invoker: Invoker | None = None
        self._slots: Slots[Running] | None = None
        self._outage: Outage | None = None
        self._claiming = 0  # slots the claim loop's call in flight asks for
        # Until when (worker clock) leases taken by a claim whose reply was lost may last.
        self._unknown_claims_until = 0.0
        self._rng = random.Random()
        self._progress: Progress | None = None
        self._said_idle = False  # "no job to claim" is said once per run

    def __repr__(self) -> str:
        queues = ", ".join(self._handlers) or "no handlers"
        return f"<Worker {queues} concurrency={self._config.concurrency}>"

    # -- configuration -----------------------------------------------------------------

    def configure(self, **options: Any) -> None:
        """Change constructor options (same names) before `run`; validated like them."""
        if self._running:
            raise InvalidArgument("configure", "cannot change a worker while it runs")
        unknown = sorted(set(options) - Config.names())
        if unknown:
            raise InvalidArgument("configure", f"unknown option(s): {', '.join(unknown)}")
        self._config = make_config(**{**self._config.options(), **options})

    @property
    def handlers(self) -> dict[str, Handler]:
        """Registered handlers by queue (a copy)."""
        return dict(self._handlers)

    @property
    def queues(self) -> tuple[str, ...]:
        """The queues this worker serves."""
        return self._config.queues or tuple(self._handlers)

    @property
    def owner(self) -> str | None:
        """The owner id of this worker's leases (set when it runs, unless given)."""
        return self._owner or self._config.owner

    @property
    def url(self) -> str | None:
        """The store URL given to this worker (None: ``TENURE_STORE_URL`` or the default)."""
        return self._config.url

    @property
    def concurrency(self) -> int:
        return self._config.concurrency

    @property
    def ttl(self) -> float:
        return self._config.ttl

    @property
    def running(self) -> bool:
        return self._running

    @overload
    def handler(self, queue: F, /) -> F: ...

    @overload
    def handler(
        self,
        queue: str = "default",
        /,
        *,
        isolation: Isolation | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
    ) -> Callable[[F], F]: ...

    def handler(
        self,
        queue: str | F = "default",
        /,
        *,
        isolation: Isolation | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
    ) -> F | Callable[[F], F]:
        """Decorator: ``@worker.handler("queue")`` (or bare ``@worker.handler`` for the
        ``default`` queue). The function is returned unchanged. ``timeout``: seconds an
        attempt may run (None: the worker's ``timeout``)."""
        if callable(queue):
            return self.register("default", queue)
        queue_name = queue

        def decorate(function: F) -> F:
            return self.register(
                queue_name, function, isolation=isolation, retry=retry, timeout=timeout
            )

        return decorate

    def register(
        self,
        queue: str,
        function: F,
        *,
        isolation: Isolation | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
    ) -> F:
        """Run ``function(ctx)`` for the jobs of ``queue``; sync or ``async def``."""
        handler = make_handler(queue, function, isolation, retry, timeout)
        queue = handler.queue
        if queue in self._handlers:
            raise InvalidArgument(
                "queue", f"{queue!r} already has a handler ({self._handlers[queue].function!r})"
            )
        if self._running:
            raise InvalidArgument("register", "cannot add handlers while the worker runs")
        self._handlers[queue] = handler
        return function

    def periodic(
        self,
        cron: str,
        /,
        *,
        queue: str,
        payload: Any = None,
        tz: str = "UTC",
        catch_up: str = "skip",
        name: str | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run the function for each tick of ``cron`` (in time zone ``tz``) as
        a job of ``queue`` with ``payload``; ``options`` are `handler`'s. Each tick is one
        job across a fleet, its id ``cron:<name>:<tick UTC>`` (``name``: the queue's by
        default); ``catch_up`` says what a worker that could not submit for a while does:
        ``"skip"`` submits the latest due tick only, ``"once"`` also one run for the
        missed ones. Needs ``tenure[cron]``."""
        schedule = make_schedule(
            queue if name is None else name,
            cron,
            queue=queue,
            payload=payload,
            tz=tz,
            catch_up=catch_up,
        )
        if schedule.name in self._schedules:
            raise InvalidArgument("name", f"a periodic job {schedule.name!r} exists already")

        def decorate(function: F) -> F:
            self.register(queue, function, **options)
            self._schedules[schedule.name] = schedule
            return function

        return decorate

    def stats(self) -> dict[str, float]:
        """Counters since this worker was created (see `tenure.worker.COUNTERS`), plus
        ``in_flight`` and renewal latency (``renew_latency_max``/``_avg``, seconds)."""
        values = self._stats.snapshot()
        values["in_flight"] = len(self._jobs)
        return values

    # -- running -----------------------------------------------------------------------

    def handler_durations(self) -> Durations:
        """How long handlers ran (seconds), by (queue, outcome kind): the cumulative counts
        per upper bound of ``HANDLER_BUCKETS``, their sum and count (what
        ``tenure_handler_duration_seconds`` exports)."""
        return self._stats.durations()

    def run(self, *, burst: bool = False, install_signal_handlers: bool | None = None) -> None:
        """Run until stopped (SIGTERM/SIGINT when in the main thread, or `stop`). With
        ``burst=True``, return once no job is claimable and none is running."""
        anyio.run(
            partial(self.run_async, burst=burst, install_signal_handlers=install_signal_handlers)
        )

    async def run_async(
        self, *, burst: bool = False, install_signal_handlers: bool | None = None
    ) -> None:
        """`run` inside an existing event loop (asyncio or trio, through anyio)."""
        with self._lock:
            if self._running:
                raise InvalidArgument("run", "this Worker is already running")
            self._running = True
        try:
            await self._serve(burst, install_signal_handlers)
        finally:
            with self._lock:
                self._running = False
                self._caller = None
                self._stop_requested = self._stop_now = False
                self._stop_announced = 0

    def stop(self, *, immediate: bool = False) -> None:
        """Stop claiming and finish; thread-safe (also the first SIGTERM/SIGINT).

        In-flight handlers get ``grace`` seconds to finish; then (or at once with
        ``immediate=True``, the second signal) async handlers are cancelled, process
        handlers killed, sync handlers see ``ctx.lost``, and their leases are released.
        """
        with self._lock:
            if not self._running:
                return  # nothing to stop (a later run starts afresh)
            if not self._stop_requested:
                self._stop_time = time.monotonic()
            self._stop_requested = True
            self._stop_now = self._stop_now or immediate
            caller = self._caller
        if caller is not None:
            caller.call_soon(self._wake)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stop(immediate=self._stop_requested)

    def _wake(self) -> None:
        """On the loop: act on a stop request."""
        if self._stop_announced < 1 and not self._stop_now:
            self._stop_announced = 1
            log.info(
                "worker stopping: no new claims; in-flight handlers have %g s to finish",
                self._config.grace,
                extra={"owner": self.owner, "in_flight": len(self._jobs)},
            )
        if self._stop_now and self._stop_announced < 2:
            self._stop_announced = 2
            log.warning(
                "worker stopping now: giving back %d lease(s)",
                len(self._jobs),
                extra={"owner": self.owner, "in_flight": len(self._jobs)},
            )
            self._revoke_all("the worker was stopped immediately")
        if self._idle_scope is not None:
            self._idle_scope.cancel()
        if self._slot_freed is not None:
            self._slot_freed.set()

    async def _serve(self, burst: bool, install_signal_handlers: bool | None) -> None:
        config = self._config
        queues = self._checked_queues()
        method = resolve_start_method(config)
        handlers = [self._handlers[queue] for queue in queues]
        start_forkserver = prepare_process_handlers(handlers, config.isolation, method)
        self._owner = config.owner or default_owner()
        self._caller = LoopCaller.current()
        clock = config.clock or SystemClock()
        url = resolve_url(config.url)
        options: dict[str, Any] = {
            "clock": clock,
            "store_clock": config.store_clock,
            "timing": config.timing,
        }
        caller = self._caller
        # One outage for every caller (claim loop, settles, the keeper's thread): one line
        # when the store goes away and one when it is back; a store down at start too.
        outage = Outage(
            clock, self._stats, on_lost=lambda error: caller.call_soon(partial(self._lost, error))
        )
        self._outage = outage
        store = await open_through_outage(partial(connect_async, url, **options), outage, self._rng)
        self._invoker = invoker = Invoker(self._caller, self._stats, method)
        self._completer = Completer(
            store, clock=clock, outage=outage, stats=self._stats, rng=self._rng, busy=invoker.busy
        )
        self._settler = Settler(
            store, self._completer, self._stats, self._rng, outage, finished=self._forget
        )
        try:
            # The keeper's own connection: opened by its renewer ahead of the first renewal,
            # and never by a run whose jobs all end before one is due.
            renewer_store = OnDemandStore(partial(connect, url, **options))
            keeper = LeaseKeeper(
                renewer_store,
                clock,
                self._stats,
                renew_every=lambda lease: config.renew_every or lease.ttl / 3,
                # The worker's own: seeding one from the OS costs a short run 15 µs, and
                # `Random.random` is one C call, safe from either thread.
                rng=self._rng,
                outage=outage,
            )
            self._keeper = keeper
            keeper.start()
            if start_forkserver:  # now, rather than when the first job is waiting for it
                await anyio.to_thread.run_sync(multiprocessing.forkserver.ensure_running)
            restore = install_handlers(install_signal_handlers, self._on_signal)
            # The store's URL as the driver shows it (never a password): a worker pointed at
            # the wrong store says so in its first line.
            log.info(
                "worker started on %s: queues %s, concurrency %d, ttl %g s",
                store.url,
                ", ".join(queues),
                config.concurrency,
                config.ttl,
                extra={"owner": self._owner, "store": store.url},
            )
            self._progress = Progress(time.monotonic())
            self._said_idle = False
            try:
                await self._work(store, queues, burst, clock)
            finally:
                restore()
                self._invoker.close()
                await _stop_keeper(keeper, renewer_store, caller)
                self._keeper = None
                self._log_final(store)
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()
        if outage.lost is not None:
            raise outage.lost

    def _checked_queues(self) -> tuple[str, ...]:
        queues = self.queues
        if not queues:
            raise InvalidArgument("handlers", "register at least one handler before running")
        missing = [queue for queue in queues if queue not in self._handlers]
        if missing:
            raise InvalidArgument(
                "queues", f"no handler registered for {', '.join(map(repr, missing))}"
            )
        return queues

    async def _work(
        self, store: AsyncStore, queues: tuple[str, ...], burst: bool, clock: Clock
    ) -> None:
        """Claim and run jobs until stopped (or, in burst mode, out of jobs), then drain."""
        config = self._config
        assert self._completer is not None
        # The background tasks' scopes, cancelled once the jobs are done. Only those of
        # tasks started: anyio's `cancel` formats the current task's repr each time.
        background: list[anyio.CancelScope] = []
        try:
            async with anyio.create_task_group() as task_group:
                if config.summary_every > 0:
                    background.append(scope := anyio.CancelScope())
                    task_group.start_soon(self._summaries, scope, config.summary_every)
                if config.retention is not None:
                    retention = Retention(
                        store, self.owner or "", config.retention, config.retention_every
                    )
                    background.append(scope := anyio.CancelScope())
                    task_group.start_soon(self._retention, scope, retention)
                self._calls, self._leading = None, False  # (a run cancelled may leave them)
                if any(not self._handlers[queue].is_async for queue in queues):
                    # The tasks that loop callbacks start (a sync handler returned or lost).
                    self._calls = calls = CallsInTask(Primitives.current().event)
                    background.append(scope := anyio.CancelScope())
                    task_group.start_soon(self._make_calls, scope, calls)
                if self._schedules or not burst:  # a burst run reads no store schedules
                    own, stored = list(self._schedules.values()), None if burst else queues
                    periodic = Periodic(store, own, clock.time, queues=stored)
                    background.append(scope := anyio.CancelScope())
                    task_group.start_soon(self._periodic, scope, periodic)
                # A completion call also claims for the slots it frees: one store call (one
                # commit) per batch, where completing and then refilling made two.
                self._completer.refill = Refill(
                    self.owner or "",
                    config.ttl,
                    queues,
                    self._refill_slots,
                    partial(self._take_claimed, task_group, clock),
                    partial(self._claim_reply_lost, clock),
                )
                # Before a slot task parks it leads what its jobs queued (`Jobs._end`).
                self._slots = Slots(
                    self._job, self._completer.lead, partial(self._lead_unled, task_group)
                )
                if self._calls is not None:
                    assert self._invoker is not None
                    self._invoker.report_threads_to(
                        partial(self._thread_returned, task_group),
                        partial(self._calls.call, self._slots.start, task_group),
                    )
                assert self._settler is not None
                self._settler.spawn = task_group.start_soon
                await self._claim_loop(task_group, store, queues, burst, clock)
                await self._drain()
                self._slots.close()
                for scope in background:
                    scope.cancel()
        except BaseException:  # cancelled from outside, or failed
            await self._give_back_threads()
            raise

    @staticmethod
    async def _make_calls(scope: anyio.CancelScope, calls: CallsInTask) -> None:
        with scope:
            await calls.run()

    async def _retention(self, scope: anyio.CancelScope, retention: Retention) -> None:
        with scope:
            await retention.run(min(self._config.retention_every, 60.0))

    async def _periodic(self, scope: anyio.CancelScope, periodic: Periodic) -> None:
        with scope:
            await periodic.run()

    def _log_final(self, store: AsyncStore) -> None:
        # One short line; every counter is in worker.stats().
        assert self._progress is not None
        values = self.stats()
        log.info(
            self._progress.final(values, time.monotonic()),
            extra={
                "owner": self._owner,
                "store": store.url,
                "counters": {name: values[name] for name in _FINAL_COUNTERS},
            },
        )

    async def _summaries(self, scope: anyio.CancelScope, every: float) -> None:
        """Every ``every`` seconds, one progress line at INFO, unless nothing changed."""
        with scope:
            while True:
                await anyio.sleep(every)
                self._summarize(time.monotonic())

    def _summarize(self, now: float) -> None:
        assert self._progress is not None
        values = self.stats()
        line = self._progress.line(values, now)
        if line is not None:
            counters = {name: values[name] for name in (*_FINAL_COUNTERS, "in_flight")}
            log.info(line, extra={"owner": self._owner, "counters": counters})

    # -- loss and stopping -------------------------------------------------------------

    def _lost(self, error: StoreLost) -> None:
        """On the loop, once: the store no longer holds what this worker saw. Nothing more
        is sent to it (a settle could act on a generation the store may issue again); the
        leases are revoked unsettled and `run` raises ``error`` once stopped."""
        log.error(
            "worker stopping: the store lost its data, %d lease(s) revoked without settling "
            "them; stop every worker of this store and follow its documentation before "
            "starting them again: %s",
            len(self._jobs),
            error,
            extra={"owner": self.owner, "in_flight": len(self._jobs), "error": str(error)},
        )
        with self._lock:
            self._stop_requested = self._stop_now = True
            self._stop_announced = 2
        self._revoke_all("the store lost its data")
        if self._idle_scope is not None:
            self._idle_scope.cancel()
        if self._slot_freed is not None:
            self._slot_freed.set()

    def _revoke_all(self, reason: str) -> None:
        """On the loop: take every running job's lease away from its handler."""
        for running in list(self._jobs.values()):
            running.handle.mark_lost(reason, "revoked")
            running.abandon()

    async def _drain(self) -> None:
        if not self._jobs:
            return
        remaining = self._stop_time + self._config.grace - time.monotonic()
        with anyio.move_on_after(max(0.0, remaining)):
            while self._jobs and not self._stop_now:
                self._slot_freed = anyio.Event()
                await self._slot_freed.wait()
        if self._jobs and not self._stop_now:
            log.warning(
                "grace period over: giving back %d lease(s)",
                len(self._jobs),
                extra={"owner": self.owner},
            )
            self._revoke_all("the worker's grace period ended")
        # Every lease left is revoked: those jobs are given back now, each on a slot task;
        # a sync handler's job goes to one from its loss's loop callback (`Jobs._start_threads`),
        # so the run waits for them here, while its task group still takes new tasks.
        while self._jobs:
            self._slot_freed = anyio.Event()
            await self._slot_freed.wait()


async def _stop_keeper(
    keeper: LeaseKeeper, renewer_store: OnDemandStore, caller: LoopCaller
) -> None:
    """Stop the keeper's threads, then close its connection: both, even in a run cancelled
    from outside. Here, if the renewer is asleep and never opened its connection (most
    short runs); else on one thread of their own, as they may wait for a call on its way
    (anyio's worker threads would be started for this alone, and their pool's start and
    stop cost a short run more than the calls: `benchmarks/client_instructions.py
    --start`)."""
    if keeper.stop_if_idle() and not renewer_store.is_open:
        renewer_store.close()  # closes nothing, and refuses any open after it
        return

    def stop() -> None:
        try:
            keeper.stop()
        finally:
            renewer_store.close()

    with anyio.CancelScope(shield=True):
        await run_in_daemon_thread(stop, caller, name="tenure-stop")
