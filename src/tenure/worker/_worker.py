"""`tenure.Worker`: runs handlers under leases and stops them when a lease is lost.

Threads and tasks of a running worker::

    event loop (the thread that called run)   claim loop, one task per job, async handlers
    tenure-renewer                            renews every held lease (own store connection)
    tenure-lease-watchdog                     no I/O: declares leases lost at their deadline
    tenure-job-<id>                           one daemon thread per running sync handler
    child process                             one per running handler with isolation=process

A job's life: claim (one store call for up to ``concurrency - running`` jobs) → register
the lease with the keeper and the registry → run the handler → settle: complete, fail,
release, or nothing at all if the lease was lost (a stale worker never completes).
Completions of jobs that finish together go to the store in one call (`_completer`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import random
import secrets
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, fields
from datetime import timedelta
from functools import partial
from multiprocessing.connection import Connection
from types import FrameType
from typing import Any, Literal, TypeVar, overload

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._clock import Clock, LeaseTiming, SystemClock
from .._connect import connect
from .._protocol import RetryPolicy
from .._validate import (
    MAX_BATCH,
    error_text,
    validate_delay,
    validate_id,
    validate_queues,
    validate_ttl,
)
from ..aio import connect as connect_async
from ..aio._store import AsyncStore
from ..errors import InvalidArgument, LeaseLost, StoreUnavailable, TenureError
from ..models import Claim, Job, Lease
from ..stores import resolve_url
from ._completer import Completer, Refill
from ._context import JobContext, ReleaseDecision, RetryDecision, decision_of, set_current
from ._keeper import LeaseKeeper
from ._lease import REGISTRY, LeaseHandle
from ._loop import LoopCaller, run_in_daemon_thread
from ._process import EXIT_DEADLINE, EXIT_PARENT_GONE, Message, child_main, handler_outcome
from ._stats import Progress, Stats

__all__ = ["Handler", "Isolation", "Worker", "default_owner"]

log = logging.getLogger("tenure")

# The counters the final and progress lines carry in their structured field ``counters``.
_FINAL_COUNTERS = ("claimed", "completed", "failed", "dead", "retried", "leases_lost")

Isolation = Literal["thread", "process"]
HandlerFunction = Callable[[JobContext], Any]
F = TypeVar("F", bound=Callable[..., Any])

_ISOLATIONS = ("thread", "process")
_START_METHODS = ("forkserver", "spawn")


def default_owner() -> str:
    """``host:pid:random``: a person can find the process; the suffix tells restarts apart."""
    host = socket.gethostname()[:200] or "localhost"
    return f"{host}:{os.getpid()}:{secrets.token_hex(3)}"


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - objects with an async __call__
    )


@dataclass(frozen=True)
class Handler:
    """A registered handler: the function and how it runs."""

    queue: str
    function: HandlerFunction
    is_async: bool
    isolation: Isolation | None  # None: the worker's default
    retry: RetryPolicy | None  # None: the worker's default


@dataclass(frozen=True)
class _Config:
    url: str | None
    concurrency: int
    ttl: float
    renew_every: float | None
    grace: float
    isolation: Isolation
    retry: RetryPolicy
    poll_interval: float
    owner: str | None
    queues: tuple[str, ...] | None
    clock: Clock | None
    store_clock: Clock | None
    timing: LeaseTiming | None
    start_method: str | None
    summary_every: float

    def options(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


def _config(
    *,
    url: object,
    concurrency: object,
    ttl: object,
    renew_every: object,
    grace: object,
    isolation: object,
    retry: object,
    poll_interval: object,
    owner: object,
    queues: object,
    clock: object,
    store_clock: object,
    timing: object,
    start_method: object,
    summary_every: object,
) -> _Config:
    """Validate the worker's options (docs/design.md §6: bad input names the argument)."""
    if url is not None:
        if not isinstance(url, str):
            raise InvalidArgument("url", f"must be a str, not {type(url).__name__}")
        resolve_url(url)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise InvalidArgument("concurrency", f"must be an int, not {type(concurrency).__name__}")
    if not 1 <= concurrency <= MAX_BATCH:
        raise InvalidArgument("concurrency", f"must be from 1 to {MAX_BATCH}, got {concurrency}")
    ttl_s = validate_ttl(ttl)
    renew_s = None
    if renew_every is not None:
        renew_s = validate_delay(renew_every, "renew_every")
        if not 0 < renew_s <= ttl_s / 2:
            raise InvalidArgument(
                "renew_every",
                f"must be more than 0 and at most half the ttl ({ttl_s / 2:g} s), so that a "
                f"failed renewal can be retried before the lease runs out; got {renew_s:g} "
                "(default: a third of the ttl)",
            )
    if isolation not in _ISOLATIONS:
        raise InvalidArgument("isolation", f"must be 'thread' or 'process', got {isolation!r}")
    if retry is None:
        retry = RetryPolicy()
    if not isinstance(retry, RetryPolicy):
        raise InvalidArgument("retry", f"must be a tenure.RetryPolicy, not {type(retry).__name__}")
    poll_s = validate_delay(poll_interval, "poll_interval")
    if not 0.001 <= poll_s <= 3600:
        raise InvalidArgument(
            "poll_interval", f"must be from 0.001 to 3600 seconds, got {poll_s:g}"
        )
    for name, value in (("clock", clock), ("store_clock", store_clock)):
        if value is not None and not isinstance(value, Clock):
            raise InvalidArgument(name, f"must be a tenure.Clock, not {type(value).__name__}")
    if timing is not None and not isinstance(timing, LeaseTiming):
        raise InvalidArgument(
            "timing", f"must be a tenure.LeaseTiming, not {type(timing).__name__}"
        )
    if start_method is not None:
        if start_method not in _START_METHODS:
            raise InvalidArgument(
                "start_method", f"must be 'forkserver' or 'spawn', got {start_method!r}"
            )
        if start_method not in multiprocessing.get_all_start_methods():
            raise InvalidArgument("start_method", f"{start_method} is not available here")
    summary_s = validate_delay(summary_every, "summary_every")
    if summary_s != 0 and not 0.01 <= summary_s <= 86400:
        raise InvalidArgument(
            "summary_every",
            f"must be 0 (no progress lines) or from 0.01 to 86400 seconds, got {summary_s:g}",
        )
    return _Config(
        url=url,
        concurrency=concurrency,
        ttl=ttl_s,
        renew_every=renew_s,
        grace=validate_delay(grace, "grace"),
        isolation=isolation,  # type: ignore[arg-type]
        retry=retry,
        poll_interval=poll_s,
        owner=None if owner is None else validate_id("owner", owner),
        queues=None if queues is None else validate_queues(queues),
        clock=clock,  # type: ignore[arg-type]  # checked above
        store_clock=store_clock,  # type: ignore[arg-type]
        timing=timing,
        start_method=start_method,
        summary_every=summary_s,
    )


@dataclass
class _Result:
    """How a handler ended: ok, error, release, retry, lost, abandoned, died."""

    kind: str
    value: Any = None
    error: BaseException | str | None = None
    detail: str = ""


@dataclass(eq=False)
class _Running:
    handler: Handler
    isolation: Isolation
    retry: RetryPolicy
    job: Job
    handle: LeaseHandle
    context: JobContext
    wait_scope: anyio.CancelScope | None = None


class Worker:
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
    ) -> None:
        self._config = _config(
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
        )
        self._handlers: dict[str, Handler] = {}
        self._stats = Stats()
        self._lock = threading.Lock()
        self._running = False
        self._owner: str | None = None
        self._caller: LoopCaller | None = None
        self._stop_requested = False
        self._stop_now = False
        self._stop_time = 0.0
        self._stop_announced = 0
        self._jobs: dict[tuple[str, int], _Running] = {}
        self._idle_scope: anyio.CancelScope | None = None
        self._slot_freed: anyio.Event | None = None
        self._keeper: LeaseKeeper | None = None
        self._completer: Completer | None = None
        self._claiming = 0  # slots the claim loop's call in flight asks for
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
        unknown = sorted(set(options) - {item.name for item in fields(_Config)})
        if unknown:
            raise InvalidArgument("configure", f"unknown option(s): {', '.join(unknown)}")
        self._config = _config(**{**self._config.options(), **options})

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
    ) -> Callable[[F], F]: ...

    def handler(
        self,
        queue: str | F = "default",
        /,
        *,
        isolation: Isolation | None = None,
        retry: RetryPolicy | None = None,
    ) -> F | Callable[[F], F]:
        """Decorator: ``@worker.handler("queue")`` (or bare ``@worker.handler`` for the
        ``default`` queue). The function is returned unchanged."""
        if callable(queue):
            return self.register("default", queue)
        queue_name = queue

        def decorate(function: F) -> F:
            return self.register(queue_name, function, isolation=isolation, retry=retry)

        return decorate

    def register(
        self,
        queue: str,
        function: F,
        *,
        isolation: Isolation | None = None,
        retry: RetryPolicy | None = None,
    ) -> F:
        """Run ``function(ctx)`` for the jobs of ``queue``; sync or ``async def``."""
        queue = validate_id("queue", queue)
        if not callable(function):
            raise InvalidArgument(
                "handler", f"must be callable (def or async def), not {type(function).__name__}"
            )
        if isolation is not None and isolation not in _ISOLATIONS:
            raise InvalidArgument("isolation", f"must be 'thread' or 'process', got {isolation!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidArgument(
                "retry", f"must be a tenure.RetryPolicy, not {type(retry).__name__}"
            )
        if queue in self._handlers:
            raise InvalidArgument(
                "queue", f"{queue!r} already has a handler ({self._handlers[queue].function!r})"
            )
        if self._running:
            raise InvalidArgument("register", "cannot add handlers while the worker runs")
        self._handlers[queue] = Handler(queue, function, _is_async(function), isolation, retry)
        return function

    def stats(self) -> dict[str, float]:
        """Counters since this worker was created (see `tenure.worker.COUNTERS`), plus
        ``in_flight`` and renewal latency (``renew_latency_max``/``_avg``, seconds)."""
        values = self._stats.snapshot()
        values["in_flight"] = len(self._jobs)
        return values

    # -- running -----------------------------------------------------------------------

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
        queues = self.queues
        if not queues:
            raise InvalidArgument("handlers", "register at least one handler before running")
        missing = [queue for queue in queues if queue not in self._handlers]
        if missing:
            raise InvalidArgument(
                "queues", f"no handler registered for {', '.join(map(repr, missing))}"
            )
        start_forkserver = self._check_process_handlers(queues)
        self._owner = config.owner or default_owner()
        self._caller = LoopCaller.current()
        clock = config.clock or SystemClock()
        url = resolve_url(config.url)
        options: dict[str, Any] = {
            "clock": clock,
            "store_clock": config.store_clock,
            "timing": config.timing,
        }
        store = await connect_async(url, **options)
        self._completer = Completer(store)
        try:
            renewer_store = await anyio.to_thread.run_sync(partial(connect, url, **options))
            keeper = LeaseKeeper(
                renewer_store,
                clock,
                self._stats,
                renew_every=lambda lease: config.renew_every or lease.ttl / 3,
            )
            self._keeper = keeper
            keeper.start()
            if start_forkserver:  # now, rather than when the first job is waiting for it
                await anyio.to_thread.run_sync(multiprocessing.forkserver.ensure_running)
            restore = self._install_signal_handlers(install_signal_handlers)
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
            summaries = anyio.CancelScope()
            try:
                async with anyio.create_task_group() as task_group:
                    if config.summary_every > 0:
                        task_group.start_soon(self._summaries, summaries, config.summary_every)
                    # A completion call also claims for the slots it frees: one store
                    # call (one commit) per batch, where completing and then refilling
                    # made two.
                    self._completer.refill = Refill(
                        self._owner,
                        config.ttl,
                        queues,
                        self._refill_slots,
                        partial(self._take_claimed, task_group, store, clock),
                    )
                    await self._claim_loop(task_group, store, queues, burst, clock)
                    await self._drain()
                    summaries.cancel()
            finally:
                restore()
                await anyio.to_thread.run_sync(keeper.stop)
                await anyio.to_thread.run_sync(renewer_store.close)
                self._keeper = None
                # One short line; every counter is in worker.stats().
                values = self.stats()
                log.info(
                    self._progress.final(values, time.monotonic()),
                    extra={
                        "owner": self._owner,
                        "store": store.url,
                        "counters": {name: values[name] for name in _FINAL_COUNTERS},
                    },
                )
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()

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

    def _check_process_handlers(self, queues: Sequence[str]) -> bool:
        """Check process-isolated handlers; True if a fork server should be started."""
        modules = {"tenure.worker._process"}
        for queue in queues:
            handler = self._handlers[queue]
            if (handler.isolation or self._config.isolation) != "process":
                continue
            modules.add(getattr(handler.function, "__module__", None) or "__main__")
            try:
                pickle.dumps(handler.function)
            except Exception as exc:
                raise InvalidArgument(
                    "handler",
                    f"{handler.function!r} of queue {queue!r} runs with isolation='process', "
                    "so it must be importable by the child process: a function defined at "
                    f"the top level of a module ({exc})",
                ) from None
        if len(modules) > 1 and self._start_method() == "forkserver":
            # The fork server imports these once; each job's process then starts warm.
            # Without this it would import the main script (multiprocessing's default),
            # running an unguarded script a second time.
            forkserver: Any = multiprocessing.get_context("forkserver")
            forkserver.set_forkserver_preload(sorted(modules))
            return True
        return False

    def _start_method(self) -> str:
        if self._config.start_method is not None:
            return self._config.start_method
        methods = multiprocessing.get_all_start_methods()
        return "forkserver" if "forkserver" in methods else "spawn"

    def _install_signal_handlers(self, install: bool | None) -> Callable[[], None]:
        in_main = threading.current_thread() is threading.main_thread()
        if install is None:
            install = in_main
        if not install:
            return lambda: None
        if not in_main:
            raise InvalidArgument(
                "install_signal_handlers", "signal handlers can only be set in the main thread"
            )
        previous = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }

        def restore() -> None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        return restore

    # -- claiming ----------------------------------------------------------------------

    async def _claim_loop(
        self,
        task_group: anyio.abc.TaskGroup,
        store: AsyncStore,
        queues: tuple[str, ...],
        burst: bool,
        clock: Clock,
    ) -> None:
        config = self._config
        failures = 0
        while not self._stop_requested:
            free = config.concurrency - len(self._jobs)
            if free <= 0:
                await self._wait_for_slot()
                continue
            if free < config.concurrency:
                # Jobs whose completions are on their way free their slots when the store
                # answers: claim for all of them in one call rather than one by one. The
                # wait is one store round trip at most.
                assert self._completer is not None
                await self._completer.quiet()
                await anyio.lowlevel.checkpoint()
                free = config.concurrency - len(self._jobs)
                if free <= 0 or self._stop_requested:
                    continue
            self._claiming = free
            try:
                claimed = await store.claim_jobs(self.owner or "", config.ttl, free, queues=queues)
            except StoreUnavailable as exc:
                failures += 1
                self._stats.incr("store_errors")
                delay = min(30.0, 0.1 * 2**failures) * self._rng.uniform(0.5, 1.0)
                log.warning(
                    "claim failed (store unavailable); trying again in %.2f s",
                    delay,
                    extra={"owner": self.owner, "error": str(exc)},
                )
                await self._idle(None, queues, delay)
                continue
            finally:
                self._claiming = 0
            failures = 0
            self._take_claimed(task_group, store, clock, claimed)
            if self._stop_requested:
                break
            if not claimed:
                if not self._said_idle and not self._jobs:
                    self._said_idle = True
                    # Said once: a worker that claims nothing names the store and queues it
                    # looked in (the usual cause is jobs submitted to another store).
                    log.info(
                        "no job to claim in %s (queues %s)%s",
                        store.url,
                        ", ".join(queues),
                        ": exiting (burst mode)" if burst else "; waiting for jobs",
                        extra={"owner": self.owner, "store": store.url},
                    )
                if burst and not self._jobs:
                    break
                await self._idle(store, queues, config.poll_interval)

    def _refill_slots(self, finishing: int) -> int:
        """How many jobs a completion call of ``finishing`` jobs should claim: the slots
        they free and any already free, less those a claim in flight is asking for."""
        if self._stop_requested:
            return 0
        free = self._config.concurrency - len(self._jobs) - self._claiming + finishing
        return max(0, min(free, MAX_BATCH))

    def _take_claimed(
        self,
        task_group: anyio.abc.TaskGroup,
        store: AsyncStore,
        clock: Clock,
        claimed: list[Claim],
    ) -> None:
        """Run what a claim (the claim loop's, or a completion call's) took; a stopping
        worker gives it back instead."""
        for lease, job in claimed:
            if self._stop_requested:
                why = "claimed as the worker was stopping"
                task_group.start_soon(self._give_back, store, lease, why)
            else:
                self._start(task_group, store, lease, job, clock)

    async def _idle(
        self, store: AsyncStore | None, queues: tuple[str, ...], timeout: float
    ) -> None:
        with anyio.CancelScope() as scope:
            self._idle_scope = scope
            if self._stop_requested:
                scope.cancel()
            try:
                if store is None:
                    await anyio.sleep(timeout)
                else:
                    await store.wait_for_jobs(queues=queues, timeout=timeout)
            except StoreUnavailable as exc:
                self._stats.incr("store_errors")
                log.warning(
                    "waiting for jobs failed (store unavailable)",
                    extra={"owner": self.owner, "error": str(exc)},
                )
                await anyio.sleep(timeout)
        self._idle_scope = None

    async def _wait_for_slot(self) -> None:
        self._slot_freed = anyio.Event()
        if not self._stop_requested and len(self._jobs) >= self._config.concurrency:
            await self._slot_freed.wait()

    async def _give_back(self, store: AsyncStore, lease: Lease, why: str) -> None:
        try:
            await store.release(lease)
        except TenureError as exc:
            log.warning(
                "could not release a lease (%s); it expires in at most %g s",
                why,
                lease.ttl,
                extra=_lease_extra(lease, error=str(exc)),
            )

    # -- one job -----------------------------------------------------------------------

    def _start(
        self,
        task_group: anyio.abc.TaskGroup,
        store: AsyncStore,
        lease: Lease,
        job: Job,
        clock: Clock,
    ) -> None:
        assert self._keeper is not None
        handler = self._handlers[job.queue]
        handle = LeaseHandle(lease, clock, on_lost=self._lease_lost)
        running = _Running(
            handler=handler,
            isolation=handler.isolation or self._config.isolation,
            retry=handler.retry or self._config.retry,
            job=job,
            handle=handle,
            context=JobContext(handle, job),
        )
        self._stats.incr("claimed")
        self._jobs[(lease.job_id, lease.generation)] = running
        REGISTRY.add(handle)
        self._keeper.add(handle)
        task_group.start_soon(self._job, store, running, name=f"tenure job {lease.job_id!r}")

    async def _job(self, store: AsyncStore, running: _Running) -> None:
        handle = running.handle
        lease = handle.lease
        log.debug(
            "job started", extra=_lease_extra(lease, queue=running.job.queue, attempt=lease.attempt)
        )
        set_current(running.context)
        try:
            try:
                if running.isolation == "process":
                    result = await self._invoke_process(running)
                elif running.handler.is_async:
                    result = await self._invoke_async(running)
                else:
                    result = await self._invoke_thread(running)
            except anyio.get_cancelled_exc_class():
                # The worker itself is being cancelled from outside: give the job back.
                handle.mark_lost("the worker was cancelled", "revoked")
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await self._settle(store, running, _Result("abandoned"))
                raise
            with anyio.CancelScope(shield=True):
                await self._settle(store, running, result)
        finally:
            handle.finish()
            if self._keeper is not None:
                self._keeper.remove(handle)
            self._jobs.pop((lease.job_id, lease.generation), None)
            if self._slot_freed is not None:
                self._slot_freed.set()
            if self._idle_scope is not None and not self._jobs:
                self._idle_scope.cancel()  # burst mode may be waiting for the last job

    async def _invoke_async(self, running: _Running) -> _Result:
        caller = self._caller
        assert caller is not None
        context = running.context
        function: Callable[[JobContext], Awaitable[Any]] = running.handler.function
        with anyio.CancelScope() as scope:
            running.handle.on_loss(partial(caller.call_soon, scope.cancel))
            try:
                value = await function(context)
                result = _Result("ok", value)
            except ReleaseDecision:
                result = _Result("release")
            except RetryDecision as retry:
                result = _Result("retry", retry.after)
            except LeaseLost as exc:
                own = exc.job_id == context.job_id and exc.generation == context.lease.generation
                result = _Result("lost" if own else "error", error=exc)
            except Exception as exc:
                result = _Result("error", error=exc)
            except BaseException as exc:
                # SystemExit and the like fail the attempt; cancellation (and Ctrl-C)
                # propagate to the cancel scope.
                if isinstance(exc, (anyio.get_cancelled_exc_class(), KeyboardInterrupt)):
                    raise
                if "ExceptionGroup" in type(exc).__name__:
                    raise
                result = _Result("error", error=exc)
            decision = decision_of(context)
            if isinstance(decision, ReleaseDecision):
                result = _Result("release")
            elif isinstance(decision, RetryDecision):
                result = _Result("retry", decision.after)
            return result
        if running.handle.lost_kind != "revoked":
            self._stats.incr("cancelled_on_loss")
        log.info(
            "async handler cancelled: its lease is lost",
            extra=_lease_extra(running.handle.lease, reason=running.handle.lost_reason),
        )
        return _Result("lost")

    async def _invoke_thread(self, running: _Running) -> _Result:
        caller = self._caller
        assert caller is not None
        context = running.context
        function = running.handler.function

        def call() -> tuple[str, Any, BaseException | None]:
            return handler_outcome(context, lambda: function(context))

        lost = anyio.Event()
        running.handle.on_loss(partial(caller.call_soon, lost.set))
        with anyio.CancelScope() as wait_scope:
            running.wait_scope = wait_scope
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(self._nag, running, lost)
                kind, value, error = await run_in_daemon_thread(
                    call, caller, name=f"tenure-job-{context.job_id}"[:64]
                )
                task_group.cancel_scope.cancel()
            return _Result(kind, value, error)
        return _Result("abandoned")

    async def _nag(self, running: _Running, lost: anyio.Event) -> None:
        """A sync handler cannot be stopped: say so if it goes on long after its loss
        (it keeps its concurrency slot until it returns)."""
        await lost.wait()
        lease = running.handle.lease
        waited = max(1.0, lease.ttl)
        await anyio.sleep(waited)
        while True:
            log.warning(
                "sync handler still running %.0f s after its lease was lost; it should "
                "check ctx.lost (or ctx.check()) and return",
                waited,
                extra=_lease_extra(lease, reason=running.handle.lost_reason),
            )
            await anyio.sleep(60.0)
            waited += 60.0

    async def _invoke_process(self, running: _Running) -> _Result:
        caller = self._caller
        assert caller is not None
        handle = running.handle
        lease = handle.lease
        mp: Any = multiprocessing.get_context(self._start_method())
        parent, child = mp.Pipe(duplex=True)
        on_system_clock = isinstance(handle.clock, SystemClock)
        process = mp.Process(
            target=child_main,
            args=(
                child,
                running.handler.function,
                running.job,
                lease,
                lease.local_deadline if on_system_clock else None,
            ),
            name=f"tenure-job-{lease.job_id}"[:64],
        )
        if on_system_clock:
            # Renewals during the child's start-up wait in the pipe for it.
            handle.on_renewed(lambda renewed: _send(parent, ("deadline", renewed.local_deadline)))
        try:
            await run_in_daemon_thread(process.start, caller, name="tenure-process-start")
        except Exception as exc:
            parent.close()
            child.close()
            log.error(
                "could not start the handler's process",
                exc_info=True,
                extra=_lease_extra(lease),
            )
            return _Result("error", error=f"could not start the handler's process: {exc}")
        child.close()

        def kill() -> None:
            with contextlib.suppress(Exception):  # already gone
                process.kill()

        handle.on_loss(kill)
        try:
            message = await run_in_daemon_thread(
                partial(_receive, parent), caller, name="tenure-process-wait"
            )
            await run_in_daemon_thread(process.join, caller, name="tenure-process-join")
        finally:
            parent.close()
        if handle.is_lost():
            if handle.lost_kind != "revoked" and message is None:
                self._stats.incr("killed_on_loss")
                log.info(
                    "handler process killed: its lease is lost",
                    extra=_lease_extra(lease, reason=handle.lost_reason, pid=process.pid),
                )
            return _Result("lost")
        if message is None and process.exitcode == EXIT_DEADLINE:
            # The child gave up on a deadline that a renewal had just pushed (the update
            # was still in the pipe): not the handler's failure, so the attempt is refunded.
            log.warning(
                "handler process stopped early; releasing its job", extra=_lease_extra(lease)
            )
            return _Result("release")
        if message is None:
            return _Result("died", error=_death(process.exitcode))
        kind = message[0]
        if kind == "ok":
            return _Result("ok", message[1])
        if kind in ("error", "lost"):
            return _Result(kind, error=str(message[1]), detail=str(message[2]))
        if kind == "retry":
            return _Result("retry", message[1])
        return _Result("release")

    # -- settling ----------------------------------------------------------------------

    async def _settle(self, store: AsyncStore, running: _Running, result: _Result) -> None:
        handle = running.handle
        loss = handle.finish()
        lease = handle.lease
        job = running.job
        extra = _lease_extra(lease, queue=job.queue, attempt=lease.attempt)
        if loss is None and result.kind == "lost":
            # The handler hit LeaseLost on this lease (the store rejected something it did
            # with it): the lease is gone even though no renewal has failed yet.
            handle = running.handle
            loss = ("rejected_by_store", str(result.error))
        if loss is not None:
            kind, reason = loss
            REGISTRY.end(handle, "lost")
            if kind == "revoked":
                if result.kind == "abandoned" and not running.handler.is_async:
                    log.warning(
                        "sync handler still running after its lease was revoked; it sees "
                        "ctx.lost and must stop",
                        extra=extra,
                    )
                still_ours = lease.local_deadline > handle.clock.monotonic()
                if still_ours and await self._store_call(
                    "release", lease, store.release(lease), extra
                ):
                    self._stats.incr("released_at_stop")
                    log.info("job released: the worker is stopping", extra=extra)
                return
            if result.kind == "ok":
                self._stats.incr("completions_refused")
                log.warning(
                    "not completing job: its lease was lost before the handler returned; "
                    "result discarded",
                    extra={**extra, "reason": reason},
                )
            elif result.kind in ("error", "died"):
                log.info(
                    "handler failed after its lease was lost; failure not recorded",
                    extra={**extra, "reason": reason, "error": str(result.error)},
                )
            return
        REGISTRY.end(handle, "ended")
        if result.kind == "ok":
            try:
                done = await self._store_call(
                    "complete", lease, self._complete(lease, result.value), extra
                )
            except InvalidArgument as exc:
                await self._fail(store, running, f"the handler's result was refused: {exc}")
                return
            if done:
                self._stats.incr("completed")
                log.debug("job completed", extra=extra)
        elif result.kind in ("error", "died"):
            error = result.error if result.error is not None else "handler failed"
            await self._fail(store, running, error, detail=result.detail)
        elif result.kind == "retry":
            await self._fail(store, running, "retry requested by the handler", result.value)
        elif result.kind in ("release", "abandoned") and await self._store_call(
            "release", lease, store.release(lease), extra
        ):
            self._stats.incr("released")
            log.debug("job released by its handler", extra=extra)

    def _complete(self, lease: Lease, value: Any) -> Awaitable[None]:
        # Through the completer: jobs finishing together share one store call.
        assert self._completer is not None  # made by _serve, before any job starts
        return self._completer.complete(lease, value)

    async def _fail(
        self,
        store: AsyncStore,
        running: _Running,
        error: BaseException | str,
        retry_in: float | None = None,
        *,
        detail: str = "",
    ) -> None:
        """Record a failed attempt and log it: one line per attempt that will run again
        (WARNING; its traceback at DEBUG), the traceback once when the job dies (ERROR).

        ``retry_in`` given: the handler asked for the retry (``ctx.retry``), logged at INFO.
        ``detail``: a traceback as text (a handler process's), for an exception not here."""
        lease = running.handle.lease
        job = running.job
        requested = retry_in is not None
        if retry_in is None:
            retry_in = running.retry.delay(lease.attempt, self._rng)
        summary = _one_line(error)
        extra = _lease_extra(lease, queue=job.queue, attempt=lease.attempt, error=summary)
        trace: Any = error if isinstance(error, BaseException) else None
        if not await self._store_call(
            "fail", lease, store.fail(lease, error, retry_in=retry_in), extra
        ):
            _log_traceback(logging.DEBUG, trace, detail, extra)
            return
        self._stats.incr("failed")
        attempts = f"attempt {lease.attempt} of {job.max_attempts}"
        if lease.attempt >= job.max_attempts:
            self._stats.incr("dead")
            # The one record of a dead job that carries the traceback.
            message = f"job {job.job_id} dead: {attempts} failed: {summary}"
            if trace is None and detail:
                message = f"{message}\n{detail.rstrip()}"
            log.error(message, exc_info=_without_tenure_frames(trace), extra=extra)
            return
        self._stats.incr("retried")
        extra["retry_in"] = round(retry_in, 3)
        if requested:
            log.info(
                "job %s: %s ends, retry requested by the handler; next in %s",
                job.job_id,
                attempts,
                _seconds(retry_in),
                extra=extra,
            )
            return
        log.warning(
            "job %s: %s failed: %s; next attempt in %s",
            job.job_id,
            attempts,
            summary,
            _seconds(retry_in),
            extra=extra,
        )
        _log_traceback(logging.DEBUG, trace, detail, extra)

    async def _store_call(
        self, operation: str, lease: Lease, call: Awaitable[None], extra: dict[str, Any]
    ) -> bool:
        try:
            await call
        except LeaseLost as exc:
            self._stats.incr("stale_rejections")
            log.warning(
                "store rejected %s: the lease is no longer current",
                operation,
                extra={**extra, "error": str(exc)},
            )
            return False
        except StoreUnavailable as exc:
            self._stats.incr("store_errors")
            log.error(
                "could not %s the job: store unavailable; the lease expires within %g s and "
                "the job will be claimed again",
                operation,
                lease.ttl,
                extra={**extra, "error": str(exc)},
            )
            return False
        return True

    # -- loss and stopping -------------------------------------------------------------

    def _lease_lost(self, handle: LeaseHandle) -> None:
        """Any thread: the first time a held lease is found lost."""
        kind = handle.lost_kind
        lease = handle.lease
        extra = _lease_extra(lease, reason=handle.lost_reason, kind=kind)
        if kind == "revoked":
            log.info("lease revoked: the worker is stopping", extra=extra)
            return
        self._stats.incr("leases_lost")
        if kind == "renewal_rejected":
            self._stats.incr("lost_renewal_rejected")
        elif kind == "deadline_passed":
            self._stats.incr("lost_deadline_passed")
        log.warning("lease lost: %s", handle.lost_reason, extra=extra)

    def _revoke_all(self, reason: str) -> None:
        """On the loop: take every running job's lease away from its handler."""
        for running in list(self._jobs.values()):
            running.handle.mark_lost(reason, "revoked")
            if running.wait_scope is not None:
                running.wait_scope.cancel()

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


def _one_line(error: BaseException | str, limit: int = 300) -> str:
    """``Type: message`` (or the text) on one line, cut at ``limit`` characters."""
    text = " ".join(error_text(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value: float) -> str:
    return f"{value:.3g} s" if value < 100 else f"{value:.0f} s"


def _log_traceback(
    level: int, error: BaseException | None, detail: str, extra: dict[str, Any]
) -> None:
    """The traceback of a failed attempt as a record of its own (a handler process's comes
    as text in ``detail``)."""
    if not log.isEnabledFor(level):
        return
    if error is not None:
        error = _without_tenure_frames(error)
        log.log(level, "traceback of job %s", extra["job_id"], exc_info=error, extra=extra)
    elif detail:
        log.log(level, "traceback of job %s:\n%s", extra["job_id"], detail.rstrip(), extra=extra)


_TENURE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _without_tenure_frames(error: BaseException | None) -> BaseException | None:
    """``error`` with the worker's own frames (tenure calling the handler) cut from the
    front of its traceback: what is left starts in the handler. The handler has ended, so
    nothing else looks at this traceback."""
    if error is None:
        return None
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_TENURE_DIR):
        tb = tb.tb_next
    if tb is not None:
        error.__traceback__ = tb
    return error


def _lease_extra(lease: Lease, **more: Any) -> dict[str, Any]:
    return {
        "job_id": lease.job_id,
        "owner": lease.owner,
        "generation": lease.generation,
        **more,
    }


def _receive(conn: Connection) -> Message | None:
    try:
        message: Message = conn.recv()
    except (EOFError, OSError):
        return None
    return message


def _send(conn: Connection, message: Message) -> None:
    with contextlib.suppress(OSError, ValueError):  # the child has gone, or the pipe closed
        conn.send(message)


def _death(exitcode: int | None) -> str:
    if exitcode is None:
        return "the handler's process did not report a result"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the handler's process was killed by {name}"
    if exitcode == EXIT_DEADLINE:
        return "the handler's process stopped itself: its lease's local deadline passed"
    if exitcode == EXIT_PARENT_GONE:
        return "the handler's process stopped itself: the worker went away"
    return f"the handler's process exited with code {exitcode} without a result"
