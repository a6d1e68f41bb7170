"""Settling a job whose handler has ended: complete, fail (with the retry policy), release,
or nothing at all when the lease was lost; and the log lines that say which.

`_outcome` has the table of what each way of ending leads to; this is where it happens.
A store call the store cannot answer (`StoreUnavailable`) is retried under `_retry.RETRY`
while the lease's local deadline allows (the lease is still renewed meanwhile); one the
store refuses (the lease went stale) or that could not be made in time is logged and
counted, never raised: the job is then the store's to hand out again. After `StoreLost`
nothing more is sent.
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from .._store_async import AsyncStore
from .._validate import error_text
from ..errors import InvalidArgument, LeaseLost, StoreLost, StoreUnavailable, TenureError
from ..models import Lease
from ._completer import NOT_SENT_CAUSES, Completer
from ._invoke import Running
from ._lease import REGISTRY, LeaseHandle, LossKind, lease_extra
from ._outcome import Outcome
from ._retry import RETRY, Outage
from ._stats import Stats
from ._telemetry import JobSpans

__all__ = ["Settler", "note_loss", "timeout_error"]

log = logging.getLogger("tenure")


# The start of the loss reason of a settle given up before it was sent: the store is not
# blamed for it (`note_loss` counts no outage).
_NOT_SENT = "the local deadline came before the "


def timeout_error(timeout: float | None) -> str:
    """The error a timed-out attempt is failed with (``Job.error``)."""
    return f"timeout: handler ran longer than {timeout:g} s"


# The "... of which" counter of `Stats` of a loss kind, counted with leases_lost.
_LOSS_COUNTERS: dict[str | None, tuple[str, ...]] = {
    "renewal_rejected": ("lost_renewal_rejected",),
    "deadline_passed": ("lost_deadline_passed",),
}


def note_loss(
    stats: Stats,
    handle: LeaseHandle,
    outage: Outage | None = None,
    spans: JobSpans | None = None,
) -> None:
    """Any thread: the first time a held lease is found lost (`LeaseHandle` ``on_lost``)."""
    if spans is not None:
        spans.lost(handle)
    kind = handle.lost_kind
    if (
        kind == "deadline_passed"
        and handle.is_settling
        and outage is not None
        and not (handle.lost_reason or "").startswith(_NOT_SENT)
    ):
        # A settle with no answer in a whole lease: the store is away even though no call
        # failed yet (each may be waiting for a connection). Not one given up unsent: a
        # paused process, not the store, is the likely cause of that.
        outage.failed(
            StoreUnavailable(
                "no answer to a settle before its lease's local deadline",
                operation="settle",
                outcome_unknown=True,
            )
        )
    lease = handle.lease
    extra = lease_extra(lease, reason=handle.lost_reason, kind=kind)
    if kind == "revoked":
        log.info("lease revoked: the worker is stopping", extra=extra)
        return
    if kind == "timed_out":
        stats.incr("timeouts")
        log.warning(
            "job %s timed out: its handler ran longer than %g s; stopping it and failing "
            "the attempt",
            lease.job_id,
            handle.timeout,
            extra={**extra, "timeout": handle.timeout},
        )
        return
    # One step for the total and its cause: the lost leases of no known cause (their
    # difference, a Prometheus counter) must never be seen going down.
    stats.incr_many("leases_lost", *_LOSS_COUNTERS.get(kind, ()))
    log.warning("lease lost: %s", handle.lost_reason, extra=extra)


def completion_deadline(handle: LeaseHandle) -> float | None:
    """Until when a finished handler's completion may be tried (`Completer`'s `Deadline`):
    its lease's local deadline; after a loss, never (-inf), except a revocation (the worker
    stopping now, or its grace over): the handler has finished and the store still holds
    its lease, so the completion goes to the store once, rather than leaving the job leased
    until its lease expires, and is not retried, so that the stop is not held up."""
    if not handle.is_lost():
        return handle.lease.local_deadline
    return None if handle.lost_kind == "revoked" else -math.inf


def _running_deadline(running: Running) -> float | None:
    """`completion_deadline` of a handed-off job (`Completer.enqueue`'s deadline), asked
    before each try to send it. Without a loss decided already, the lease's local deadline
    as it stands, not deciding whether it has passed: the completer gives the completion
    up unless that deadline is later than the try could end, which it is not once passed,
    and the loss is decided as the job is forgotten (`LeaseHandle.finish`)."""
    handle = running.handle
    if handle.lost_flag:
        return completion_deadline(handle)
    return handle.lease.local_deadline


class Settler:
    """Settles the jobs of one worker run in its store. ``finished(runnings, confirmed)``
    is called once jobs handed off (`hand_off`) have their store's answer (``confirmed``:
    the store completed them, a batch in one call): the worker forgets them."""

    def __init__(
        self,
        store: AsyncStore,
        completer: Completer,
        stats: Stats,
        rng: random.Random,
        outage: Outage | None = None,
        *,
        finished: Callable[[list[Running], bool], None],
    ) -> None:
        self._store = store
        # Completions go through the completer: jobs finishing together share one call.
        self._completer = completer
        self._stats = stats
        self._completed = stats.on_loop  # its "completed", counted on the loop
        self._rng = rng
        self._outage = outage or Outage(store.clock, stats)
        self._finished = finished
        # Starts a task in the worker's task group (`hand_off` needs one for a result the
        # store refused: that job is failed instead).
        self.spawn: Callable[..., object] | None = None

    def hand_off(self, running: Running, outcome: Outcome) -> bool:
        """The common settle without waiting: a handler that returned under a lease still
        held, untraced, is completed through `Completer.enqueue` (the caller then awaits
        `Completer.lead`), and ``finished`` is called once the store has answered, as
        after `settle`. False: nothing was done, `settle` it."""
        handle = running.handle
        if (
            outcome.kind != "ok"
            or running.spans is not None
            or self._outage.lost is not None
            or handle.settling() is not None
        ):
            return False
        handle.ended_as = "ended"  # `REGISTRY.end`, written out: once per job
        self._completer.enqueue(handle.lease, outcome.value, _running_deadline, self, running)
        return True

    # -- `Answers`: the store's answers to the jobs `hand_off` handed in, on the loop ------

    def completed(self, runnings: list[Running]) -> None:
        """The store completed these jobs (in one call): they are counted, and forgotten."""
        self._completed["completed"] += len(runnings)
        if log.isEnabledFor(logging.DEBUG):
            for running in runnings:
                log.debug("job completed", extra=_job_extra(running))
        self._finished(runnings, True)

    def answered(self, running: Running, error: BaseException) -> None:
        """The store did not complete this job: ``error`` says why."""
        if isinstance(error, InvalidArgument) and self.spawn is not None:
            self.spawn(self._refused, running, error)
        else:
            try:
                self._call_failed("complete", running, error)
            finally:
                self._finished([running], False)

    async def _refused(self, running: Running, error: InvalidArgument) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await self.fail(running, f"the handler's result was refused: {error}")
        finally:
            self._finished([running], False)

    async def settle(self, running: Running, outcome: Outcome) -> None:
        spans = running.spans
        if spans is None:
            await self._settle(running, outcome)
            return
        with spans.settling(running.handle):
            await self._settle(running, outcome)

    async def _settle(self, running: Running, outcome: Outcome) -> None:
        handle = running.handle
        loss = handle.settling()
        if loss is None and outcome.kind == "lost":
            # The handler hit LeaseLost on this lease (the store rejected something it did
            # with it): the lease is gone even though no renewal has failed yet.
            loss = ("rejected_by_store", str(outcome.error))
        if loss is not None:
            REGISTRY.end(handle, "lost")
            await self._after_loss(running, outcome, *loss)
            return
        REGISTRY.end(handle, "ended")
        extra = _job_extra(running)
        if outcome.kind == "ok":

            def complete(lease: Lease) -> Awaitable[None]:
                # The completer retries (keeping results in order), not this settle.
                return self._completer.complete(
                    lease, outcome.value, partial(completion_deadline, handle)
                )

            try:
                done = await self._store_call("complete", running, complete, extra, retry=False)
            except InvalidArgument as exc:
                if running.spans is not None:
                    running.spans.refused(exc)
                await self.fail(running, f"the handler's result was refused: {exc}")
                return
            if done:
                self._completed["completed"] += 1
                log.debug("job completed", extra=extra)
        elif outcome.kind in ("error", "died"):
            error = outcome.error if outcome.error is not None else "handler failed"
            await self.fail(running, error, detail=outcome.detail)
        elif outcome.kind == "retry":
            await self.fail(running, "retry requested by the handler", outcome.value)
        elif outcome.kind in ("release", "abandoned") and await self._store_call(
            "release", running, self._store.release, extra
        ):
            self._stats.incr("released")
            log.debug("job released by its handler", extra=extra)

    async def _after_loss(
        self, running: Running, outcome: Outcome, kind: LossKind, reason: str
    ) -> None:
        """Nothing is settled under a lost lease, except that a lease the worker revoked
        (stopping) is given back while it still runs, for the next worker to take at once,
        and that a timed-out attempt (its lease still the worker's) is failed."""
        handle = running.handle
        lease = handle.lease
        extra = _job_extra(running)
        if kind == "timed_out":
            if lease.local_deadline > handle.clock.monotonic() and self._outage.lost is None:
                await self.fail(running, timeout_error(handle.timeout))
            return
        if kind == "revoked":
            if outcome.kind == "abandoned" and not running.how.handler.is_async:
                log.warning(
                    "sync handler still running after its lease was revoked; it sees "
                    "ctx.lost and must stop",
                    extra=extra,
                )
            still_ours = lease.local_deadline > handle.clock.monotonic()
            if (
                still_ours
                and self._outage.lost is None
                and await self._store_call("release", running, self._store.release, extra)
            ):
                self._stats.incr("released_at_stop")
                log.info("job released: the worker is stopping", extra=extra)
            return
        if outcome.kind == "ok":
            self._stats.incr("completions_refused")
            log.warning(
                "not completing job: its lease was lost before the handler returned; "
                "result discarded",
                extra={**extra, "reason": reason},
            )
        elif outcome.kind in ("error", "died"):
            log.info(
                "handler failed after its lease was lost; failure not recorded",
                extra={**extra, "reason": reason, "error": str(outcome.error)},
            )

    async def fail(
        self,
        running: Running,
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
            retry_in = running.how.retry.delay(lease.attempt, self._rng)
        summary = _one_line(error)
        extra = _job_extra(running, error=summary)
        trace: Any = error if isinstance(error, BaseException) else None

        def call(current: Lease) -> Awaitable[None]:
            return self._store.fail(current, error, retry_in=retry_in)

        if not await self._store_call("fail", running, call, extra):
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

    async def give_back(self, lease: Lease, why: str) -> None:
        """Release a lease no handler ran under (claimed as the worker was stopping)."""
        if self._outage.lost is not None:
            return
        try:
            await self._store.release(lease)
        except TenureError as exc:
            log.warning(
                "could not release a lease (%s); it expires in at most %g s",
                why,
                lease.ttl,
                extra=lease_extra(lease, error=str(exc)),
            )

    async def _store_call(
        self,
        operation: str,
        running: Running,
        call: Callable[[Lease], Awaitable[None]],
        extra: dict[str, Any],
        *,
        retry: bool = True,
    ) -> bool:
        """Make ``call`` with the job's current lease until the store answers; True if it
        took effect. ``retry=False``: ``call`` retries by itself (the completer)."""
        handle = running.handle
        clock = handle.clock
        spans = running.spans
        failures = 0
        while True:
            if self._outage.lost is not None:
                return False  # the store lost its data: nothing more is sent (see Worker)
            if spans is not None:
                spans.sent(operation)
            try:
                # Not cut short at the deadline: once the request has left, the store's
                # answer (done, or stale) is the truth, and a late one is still taken.
                await call(handle.lease)
                break
            except StoreUnavailable as exc:
                if retry and not isinstance(exc, StoreLost):
                    self._stats.incr("store_errors")
                    failures += 1
                    self._outage.failed(exc, operation=operation)
                    now = clock.monotonic()
                    deadline = handle.lease.local_deadline
                    wait = RETRY.next_wait(exc, failures, now, deadline, self._rng)
                    # A timed-out lease is still ours until its deadline (``wait`` says).
                    if wait is not None and (
                        not handle.is_lost() or handle.lost_kind == "timed_out"
                    ):
                        self._stats.incr("settle_retries")
                        await anyio.sleep(wait)
                        continue
                self._call_failed(operation, running, exc, extra=extra)
                return False
            except LeaseLost as exc:
                self._call_failed(operation, running, exc, extra=extra)
                return False
        self._outage.ok()
        return True

    def _call_failed(
        self,
        operation: str,
        running: Running,
        error: BaseException,
        *,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """A settle's store call ended in ``error`` (no more retrying): log and count it;
        raise it if it is none of the store's answers about the lease or its availability."""
        if extra is None:
            extra = _job_extra(running)
        if isinstance(error, LeaseLost):
            if running.spans is not None:
                running.spans.rejected(error)
            self._stats.incr("stale_rejections")
            log.warning(
                "store rejected %s: the lease is no longer current",
                operation,
                extra={**extra, "error": str(error)},
            )
        elif isinstance(error, StoreLost):
            self._stats.incr("store_errors")
            self._outage.store_lost(error)
        elif isinstance(error, StoreUnavailable):
            if self._outage.lost is None:
                self._gave_up(operation, running.handle, error, extra)
        else:
            raise error

    def _gave_up(
        self, operation: str, handle: LeaseHandle, error: StoreUnavailable, extra: dict[str, Any]
    ) -> None:
        """The store did not answer ``operation`` before the lease's local deadline: the
        lease is lost (the existing loss path counts and logs it), the job runs again."""
        if handle.lost_kind == "revoked":  # given back at stop: the lease just expires
            log.warning(
                "could not %s the job (store unavailable); its lease expires within %g s",
                operation,
                handle.lease.ttl,
                extra={**extra, "error": str(error)},
            )
            return
        if not error.outcome_unknown:  # given up unsent (`Completer`): nothing was done
            why = f"{_NOT_SENT}{operation} could be sent ({NOT_SENT_CAUSES})"
        else:
            why = (
                f"the store stayed unavailable until the local deadline ({operation} not confirmed)"
            )
        handle.mark_lost(why, "deadline_passed")
        self._stats.incr("settles_given_up")
        log.warning(
            "could not %s the job: %s; it will be claimed again once the lease expires",
            operation,
            why,
            extra={**extra, "error": str(error)},
        )


def _job_extra(running: Running, **more: Any) -> dict[str, Any]:
    lease = running.handle.lease
    return lease_extra(lease, queue=running.job.queue, attempt=lease.attempt, **more)


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
