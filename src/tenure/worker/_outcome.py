"""How a handler ended: one `Outcome`, whichever way it ran (async on the event loop, on a
thread of its own, or in a child process, which sends it up the pipe).

What a handler does, the outcome it makes, and what `_settle` then does with the job while
the lease is held:

===============================  =============  ==========================================
the handler                      kind           the job
===============================  =============  ==========================================
returns a value                  ``ok``         completed with it (a value the store
                                                refuses, say not JSON: failed instead)
raises (SystemExit included)     ``error``      failed: retried after the handler's (else
                                                the worker's) `RetryPolicy`, dead once its
                                                last attempt is used
calls ``ctx.release()``          ``release``    released: claimable at once, the attempt
                                                not counted
calls ``ctx.retry(after)``       ``retry``      failed, to run again ``after`` seconds on
raises LeaseLost for its own     ``lost``       nothing: the store refused that lease, so
lease                                           it is lost though no renewal failed yet
its process died                 ``died``       failed, as ``error``
runs past its ``timeout``        ``lost``       failed with "timeout: handler ran longer
(the lease's loss kind                          than N s", as ``error`` (retried, then
``timed_out``: stopped as at a                  dead): the lease is still the worker's
loss, no longer renewed)                        until its local deadline
===============================  =============  ==========================================

A release or retry the handler asked for stands even when its `Decision` was swallowed
(``except BaseException`` in the handler) or followed by another exception. The runners
add two kinds of their own: ``lost`` when they stopped a handler at its lease's loss
(cancelled, killed), ``abandoned`` when the worker stopped waiting for it (stopping).

Once the lease is lost, nothing is settled whatever the outcome (a stale worker never
completes; a result is discarded, a failure not recorded), except when the worker itself
revoked it (stopping, grace over): then the job is released if the lease still runs; and
except at a timeout, when the worker took the lease from the handler while the store still
holds it: then the attempt is failed, whatever the handler's outcome.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .._validate import error_text
from ..errors import LeaseLost
from ._context import JobContext, ReleaseDecision, RetryDecision, decision_of

__all__ = ["Outcome", "OutcomeKind", "handler_outcome", "outcome_of", "returned_outcome"]

OutcomeKind = Literal["ok", "error", "release", "retry", "lost", "abandoned", "died"]


@dataclass(frozen=True)
class Outcome:
    """How a handler ended (see the table above). Picklable once `portable`."""

    kind: OutcomeKind
    value: Any = None  # ok: the result; retry: the delay the handler asked for (or None)
    # error, lost, died: the exception, or its text when it happened in another process
    error: BaseException | str | None = None
    detail: str = ""  # the traceback as text, when ``error`` is text

    def portable(self) -> Outcome:
        """This outcome with the exception as text and its traceback in ``detail``: what a
        handler process sends (an exception may not unpickle in the worker)."""
        if not isinstance(self.error, BaseException):
            return self
        detail = "".join(traceback.format_exception(self.error))
        return Outcome(self.kind, self.value, error_text(self.error), detail)


# A handler that returned None (most do): one outcome for all (it is immutable), as building a
# frozen dataclass costs a call per field.
_OK = Outcome("ok")


def outcome_of(context: JobContext, raised: BaseException | None, value: Any = None) -> Outcome:
    """The outcome of a handler call that returned ``value`` or ``raised``."""
    # A decision taken in the handler (`ctx.release()`, `ctx.retry()`) stands, whatever the
    # handler then returned or raised; else one it raised.
    decision = decision_of(context)
    chosen = raised if decision is None else decision
    if isinstance(chosen, ReleaseDecision):
        return Outcome("release")
    if isinstance(chosen, RetryDecision):
        return Outcome("retry", chosen.after)
    if raised is None:
        return Outcome("ok", value) if value is not None else _OK
    if isinstance(raised, LeaseLost):
        # Another lease's LeaseLost (a job the handler itself claimed, say) is its failure.
        own = raised.job_id == context.job_id and raised.generation == context.lease.generation
        return Outcome("lost" if own else "error", error=raised)
    return Outcome("error", error=raised)


def returned_outcome(context: JobContext, value: Any) -> Outcome:
    """`outcome_of` a handler call that returned ``value``: its common case (no decision
    taken) first, as it comes once per job."""
    if decision_of(context) is None:
        return Outcome("ok", value) if value is not None else _OK
    return outcome_of(context, None, value)


def handler_outcome(context: JobContext, call: Callable[[], Any]) -> Outcome:
    """Run a sync handler call (on a handler thread, or in a handler process) and say how
    it ended. Every exception is the handler's: there, no cancellation comes from us."""
    try:
        value = call()
    except BaseException as exc:
        return outcome_of(context, exc)
    return returned_outcome(context, value)
