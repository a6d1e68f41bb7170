"""``isolation="process"``: the handler runs in a child process that is killed at loss.

The worker (parent) keeps the lease: it renews it and decides loss, and kills the child
with SIGKILL the moment the lease is lost. The child also guards itself, for the cases
where the parent cannot act:

* the parent dies (SIGKILL, crash): the child's end of the pipe reports EOF and the child
  exits at once, so no orphan keeps working on a job nobody holds;
* the parent is stalled (SIGSTOP, swapped out): the parent sends each renewed local
  deadline down the pipe, and the child exits by itself when the last one passes (only
  when the worker runs on the system clock: the child cannot see a test's ManualClock).

Both sides live here: `run_in_process` in the worker, `child_main` in the child, and the
pipe between them (the worker sends renewed deadlines down; the child sends its `Outcome`
up, once).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

import anyio

from .._clock import SystemClock
from ..errors import InvalidArgument, LeaseLost
from ..models import Job, Lease
from ._config import Handler, HandlerFunction, Isolation, is_async
from ._context import JobContext, set_current
from ._lease import LeaseHandle, lease_extra
from ._loop import LoopCaller, run_in_daemon_thread
from ._outcome import Outcome, handler_outcome
from ._stats import Stats
from ._telemetry import continued, current_carrier

__all__ = [
    "EXIT_DEADLINE",
    "EXIT_PARENT_GONE",
    "child_main",
    "prepare_process_handlers",
    "run_in_process",
]

log = logging.getLogger("tenure")

EXIT_PARENT_GONE = 76
EXIT_DEADLINE = 75

# Down the pipe, from the worker: ("deadline", local deadline), any number of times.
# Up the pipe, from the child: its `Outcome`, made portable, once.
Message = tuple[Any, ...]


class _ChildView:
    """The lease as the child knows it: a snapshot, lost only when told or overdue."""

    def __init__(self, lease: Lease, deadline: float | None) -> None:
        self._lease = lease
        self._deadline = deadline
        self._lock = threading.Lock()
        self._reason: str | None = None

    @property
    def lease(self) -> Lease:
        return self._lease

    @property
    def lost_reason(self) -> str | None:
        self.is_lost()
        return self._reason

    def set_deadline(self, deadline: float) -> None:
        with self._lock:  # updates may arrive out of order: a lease's deadline only grows
            if self._deadline is None or deadline > self._deadline:
                self._deadline = deadline

    def deadline(self) -> float | None:
        with self._lock:
            return self._deadline

    def is_lost(self) -> bool:
        with self._lock:
            overdue = self._deadline is not None and time.monotonic() >= self._deadline
            if self._reason is None and overdue:
                self._reason = "the local deadline passed without a confirmed renewal"
            return self._reason is not None

    def remaining(self) -> float:
        deadline = self.deadline()
        if deadline is None:
            return float("inf")
        return max(0.0, deadline - time.monotonic())

    def lost_error(self) -> LeaseLost:
        lease = self._lease
        return LeaseLost(
            f"lease on job {lease.job_id!r} generation {lease.generation} is lost: "
            f"{self._reason}. Stop working on this job.",
            job_id=lease.job_id,
            generation=lease.generation,
        )


def _guard(conn: Connection, view: _ChildView) -> None:
    """Child thread: follow deadline updates; exit when the parent is gone or overdue."""
    while True:
        deadline = view.deadline()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            ready = conn.poll(timeout)
            if ready:
                message = conn.recv()
                if message[0] == "deadline":
                    view.set_deadline(float(message[1]))
                continue
        except (EOFError, OSError):
            os._exit(EXIT_PARENT_GONE)
        if view.is_lost():
            os._exit(EXIT_DEADLINE)


def child_main(
    conn: Connection,
    handler: Callable[[JobContext], Any],
    job: Job,
    lease: Lease,
    deadline: float | None,
    trace_carrier: dict[str, str] | None = None,
) -> None:
    """Entry point of a handler's child process; ``trace_carrier`` is the worker's handler
    span as propagator headers (None: no trace)."""
    # The worker decides when this process ends: a Ctrl-C or a SIGTERM sent to the whole
    # process group (terminals, systemd) must not cut the handler short in the middle of
    # the grace period. The worker kills it (SIGKILL) when the lease is lost or given back,
    # and the guard thread ends it if the worker disappears.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    view = _ChildView(lease, deadline)
    threading.Thread(target=_guard, args=(conn, view), name="tenure-guard", daemon=True).start()
    context = JobContext(view, job)
    set_current(context)
    if is_async(handler):

        async def main() -> Any:
            return await handler(context)

        def call() -> Any:
            return anyio.run(main)

    else:

        def call() -> Any:
            return handler(context)

    with continued(trace_carrier):
        outcome = handler_outcome(context, call).portable()
    try:
        conn.send(outcome)
    except Exception as exc:
        error = f"the handler's result could not be sent to the worker: {exc}"
        conn.send(Outcome("error", error=error))
    conn.close()


# -- the worker's side -------------------------------------------------------------------


def prepare_process_handlers(handlers: Sequence[Handler], default: Isolation, method: str) -> bool:
    """Check the handlers that run with process isolation; True if a fork server should be
    started (and was told what to import)."""
    modules = {__name__}
    for handler in handlers:
        if (handler.isolation or default) != "process":
            continue
        modules.add(getattr(handler.function, "__module__", None) or "__main__")
        try:
            pickle.dumps(handler.function)
        except Exception as exc:
            raise InvalidArgument(
                "handler",
                f"{handler.function!r} of queue {handler.queue!r} runs with isolation='process', "
                "so it must be importable by the child process: a function defined at "
                f"the top level of a module ({exc})",
            ) from None
    if len(modules) > 1 and method == "forkserver":
        # The fork server imports these once; each job's process then starts warm.
        # Without this it would import the main script (multiprocessing's default),
        # running an unguarded script a second time.
        forkserver: Any = multiprocessing.get_context("forkserver")
        forkserver.set_forkserver_preload(sorted(modules))
        return True
    return False


async def run_in_process(
    function: HandlerFunction,
    job: Job,
    handle: LeaseHandle,
    caller: LoopCaller,
    stats: Stats,
    method: str,
) -> Outcome:
    """Run the handler in a child process started with ``method``, killed (SIGKILL) the
    moment its lease is lost, and say how it ended."""
    lease = handle.lease
    mp: Any = multiprocessing.get_context(method)
    parent, child = mp.Pipe(duplex=True)
    on_system_clock = isinstance(handle.clock, SystemClock)
    process = mp.Process(
        target=child_main,
        args=(
            child,
            function,
            job,
            lease,
            lease.local_deadline if on_system_clock else None,
            current_carrier(),  # the handler span, current here (Invoker.__call__)
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
        log.error("could not start the handler's process", exc_info=True, extra=lease_extra(lease))
        return Outcome("error", error=f"could not start the handler's process: {exc}")
    child.close()

    def kill() -> None:
        with contextlib.suppress(Exception):  # already gone
            process.kill()

    handle.on_loss(kill)
    try:
        sent = await run_in_daemon_thread(
            partial(_receive, parent), caller, name="tenure-process-wait"
        )
        await run_in_daemon_thread(process.join, caller, name="tenure-process-join")
    finally:
        parent.close()
    return _ended(handle, stats, sent, process.exitcode, process.pid)


def _ended(
    handle: LeaseHandle,
    stats: Stats,
    sent: Outcome | None,
    exitcode: int | None,
    pid: int | None,
) -> Outcome:
    """The outcome of a handler process that sent ``sent`` (None: nothing) and exited."""
    lease = handle.lease
    if handle.is_lost():
        kind = handle.lost_kind
        if kind != "revoked" and sent is None:
            if kind != "timed_out":
                stats.incr("killed_on_loss")
            log.info(
                "handler process killed: %s",
                "it ran past its timeout" if kind == "timed_out" else "its lease is lost",
                extra=lease_extra(lease, reason=handle.lost_reason, pid=pid),
            )
        return Outcome("lost")
    if sent is None and exitcode == EXIT_DEADLINE:
        # The child gave up on a deadline that a renewal had just pushed (the update was
        # still in the pipe): not the handler's failure, so the attempt is refunded.
        log.warning("handler process stopped early; releasing its job", extra=lease_extra(lease))
        return Outcome("release")
    if sent is None:
        return Outcome("died", error=_death(exitcode))
    return sent


def _receive(conn: Connection) -> Outcome | None:
    try:
        sent: Outcome = conn.recv()
    except (EOFError, OSError):
        return None
    return sent


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
