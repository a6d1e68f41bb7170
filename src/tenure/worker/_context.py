"""`JobContext`: what a handler receives, and `current_context()`."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from datetime import timedelta
from operator import attrgetter
from typing import Any, NoReturn, Protocol

from .._validate import validate_delay
from ..errors import LeaseLost
from ..models import FencingToken, Job, Lease

__all__ = [
    "current_context",
    "decision_of",
    "JobContext",
    "ReleaseDecision",
    "RetryDecision",
    "set_current",
]


class LeaseView(Protocol):
    """What a context needs to know about its lease (a `LeaseHandle` in the worker; a
    snapshot in a handler's child process)."""

    @property
    def lease(self) -> Lease: ...

    @property
    def lost_reason(self) -> str | None: ...

    def is_lost(self) -> bool: ...

    def remaining(self) -> float: ...

    def lost_error(self) -> LeaseLost: ...


class Decision(BaseException):
    """Raised by `JobContext.release` / `JobContext.retry` to end the handler. A
    BaseException, so that a handler's ``except Exception`` does not swallow it; the
    decision is recorded on the context first, so it stands even if it is swallowed."""


class ReleaseDecision(Decision):
    pass


class RetryDecision(Decision):
    def __init__(self, after: float | None) -> None:
        super().__init__(after)
        self.after = after


_current: ContextVar[JobContext | None] = ContextVar("tenure_job_context", default=None)


def current_context() -> JobContext | None:
    """The context of the job whose handler is running in this task or thread, if any."""
    return _current.get()


class JobContext:
    """What a handler gets: the job, its lease, and how to stop or hand the job back.

    ``ctx.lost`` / ``ctx.check()`` tell whether the lease must be assumed gone: a renewal
    was rejected, or the local deadline passed without a confirmed renewal, or the worker
    is stopping and gave the job back. A handler whose lease is lost must stop producing
    effects; its return value is discarded (the worker never completes a lost lease).
    """

    __slots__ = ("_decision", "_job", "_view")

    def __init__(self, view: LeaseView, job: Job) -> None:
        self._view = view
        self._job = job
        self._decision: Decision | None = None

    def __repr__(self) -> str:
        lease = self.lease
        state = "lost" if self._view.is_lost() else "held"
        return f"<JobContext {lease.job_id!r} gen {lease.generation} {state}>"

    @property
    def job(self) -> Job:
        """The job as it was when this worker claimed it."""
        return self._job

    @property
    def job_id(self) -> str:
        return self._job.job_id

    @property
    def queue(self) -> str:
        return self._job.queue

    @property
    def payload(self) -> Any:
        return self._job.payload

    @property
    def lease(self) -> Lease:
        """The current lease (renewals replace it; the generation never changes)."""
        return self._view.lease

    @property
    def token(self) -> FencingToken:
        """The fencing token to stamp on every external effect of this attempt."""
        return self._view.lease.token

    @property
    def attempt(self) -> int:
        """Which attempt this is, from 1 (claims that were released do not count)."""
        return self._view.lease.attempt

    @property
    def lost(self) -> bool:
        """True once the lease must be assumed gone: stop and return."""
        return self._view.is_lost()

    @property
    def lost_reason(self) -> str | None:
        return self._view.lost_reason

    def remaining(self) -> float:
        """Seconds before the local deadline of the current lease (renewals push it)."""
        return self._view.remaining()

    def check(self) -> None:
        """Raise `tenure.LeaseLost` if the lease is lost; call it before every effect."""
        if self._view.is_lost():
            raise self._view.lost_error()

    def release(self) -> NoReturn:
        """Give the job back now, unchanged and claimable at once; the attempt does not
        count. Ends the handler (raises; do not catch it)."""
        decision = self._decision or ReleaseDecision()
        self._decision = decision
        raise decision

    def retry(self, after: float | timedelta | None = None) -> NoReturn:
        """Record this attempt as failed and run the job again ``after`` seconds from now
        (default: the worker's backoff policy). Counts as an attempt: once the job's
        ``max_attempts`` is used it becomes ``dead``. Ends the handler (raises)."""
        seconds = None if after is None else validate_delay(after, "after")
        decision = self._decision or RetryDecision(seconds)
        self._decision = decision
        raise decision


# The release/retry the handler asked for, if any: ``decision_of(context)``, read by C code
# (no Python call: once per job).
decision_of: Callable[[JobContext], Decision | None] = attrgetter("_decision")


# Make ``context`` the current job's (`current`), in this task's or thread's context: the
# variable's own method, with no Python call around it (twice per job).
set_current: Callable[[JobContext | None], Token[JobContext | None]] = _current.set
