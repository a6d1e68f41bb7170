"""``isolation="process"``: the handler runs in a child process that is killed at loss.

The worker (parent) keeps the lease: it renews it and decides loss, and kills the child
with SIGKILL the moment the lease is lost. The child also guards itself, for the cases
where the parent cannot act:

* the parent dies (SIGKILL, crash): the child's end of the pipe reports EOF and the child
  exits at once, so no orphan keeps working on a job nobody holds;
* the parent is stalled (SIGSTOP, swapped out): the parent sends each renewed local
  deadline down the pipe, and the child exits by itself when the last one passes (only
  when the worker runs on the system clock: the child cannot see a test's ManualClock).
"""

from __future__ import annotations

import inspect
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import anyio

from .._validate import error_text
from ..errors import LeaseLost
from ..models import Job, Lease
from ._context import JobContext, ReleaseDecision, RetryDecision, decision_of, set_current

__all__ = ["EXIT_DEADLINE", "EXIT_PARENT_GONE", "Message", "child_main", "handler_outcome"]

EXIT_PARENT_GONE = 76
EXIT_DEADLINE = 75

# ("ok", result) | ("error", text, traceback) | ("release",) | ("retry", after) |
# ("lost", text)
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


def handler_outcome(
    context: JobContext, call: Callable[[], Any]
) -> tuple[str, Any, BaseException | None]:
    """Run a handler call and classify how it ended: ("ok", result, None),
    ("error", None, exc), ("release", None, None), ("retry", after, None),
    ("lost", None, exc). A release/retry the handler asked for wins over what followed."""
    kind: str
    result: Any = None
    error: BaseException | None = None
    try:
        kind, result = "ok", call()
    except ReleaseDecision:
        kind = "release"
    except RetryDecision as retry:
        kind, result = "retry", retry.after
    except LeaseLost as exc:
        own = exc.job_id == context.job_id and exc.generation == context.lease.generation
        kind, error = ("lost" if own else "error"), exc
    except BaseException as exc:  # on a thread or in a child: SystemExit is a failure too
        kind, error = "error", exc
    decision = decision_of(context)
    if isinstance(decision, ReleaseDecision):
        return "release", None, None
    if isinstance(decision, RetryDecision):
        return "retry", decision.after, None
    return kind, result, error


def child_main(
    conn: Connection,
    handler: Callable[[JobContext], Any],
    job: Job,
    lease: Lease,
    deadline: float | None,
) -> None:
    """Entry point of a handler's child process."""
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
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects with async __call__
    ):

        async def main() -> Any:
            return await handler(context)

        def call() -> Any:
            return anyio.run(main)

    else:

        def call() -> Any:
            return handler(context)

    kind, result, error = handler_outcome(context, call)
    message: Message
    if kind == "ok":
        message = ("ok", result)
    elif kind in ("error", "lost"):
        assert error is not None
        message = (kind, error_text(error), "".join(traceback.format_exception(error)))
    elif kind == "retry":
        message = ("retry", result)
    else:
        message = ("release",)
    try:
        conn.send(message)
    except Exception as exc:
        conn.send(("error", f"the handler's result could not be sent to the worker: {exc}", ""))
    conn.close()
