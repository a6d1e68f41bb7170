"""Every error tenure raises, in one tree::

    TenureError
     ├── LeaseLost             the lease is no longer yours: renew/complete/release/fail
     │                         was rejected by the store and changed nothing
     ├── StaleToken            a fenced destination refused an effect: its fencing token
     │                         is older than one the destination already accepted
     ├── JobNotFound           no job with that id exists in the store
     ├── WaitTimeout           `Store.wait` gave up: the job had not finished (done,
     │                         dead, or any other final state) within the timeout
     ├── JobStateConflict      the job's state does not allow the operation (cancel a
     │                         done job, requeue a ready one, delete a leased one);
     │                         nothing was changed
     ├── GenerationExhausted   the job's generation reached the largest representable
     │                         value (or, on PostgreSQL, its timeline's 2^40 claims:
     │                         the next timeline's base); it refuses new claims instead
     ├── LockNotAcquired       (also a TimeoutError) a named lock (`tenure.lock`) was not
     │                         acquired in time, or cannot be (its job is dead or cancelled)
     ├── InvalidArgument       (also a ValueError) an argument broke a documented rule;
     │                         nothing was sent to the store
     └── StoreUnavailable      the store could not be reached or did not answer in time;
          │                    the outcome of the operation may be unknown
          └── StoreLost        the store no longer holds what this client saw (its data
                               was lost or replaced by an older copy): generations could
                               be issued again, so the client refuses to go on

What is safe to retry after `StoreUnavailable`: ``renew``, ``complete``, ``release`` and
``fail`` with the same lease (a repeat of an operation that already took effect answers
success again and changes nothing), ``claim`` (the store methods retry internally with the
same lease secret, so a lost reply does not burn a second generation), ``submit`` (it is
idempotent by job id) and every read. ``claim_next``/``claim_many``/``complete_and_claim``
are not resent blindly: after a lost reply the store looks for the leases held under the
claim's own secret hashes and answers those, or sends the claim again only when it took
nothing; if the store cannot be asked within a third of the TTL, the error reaches the
caller (``outcome_unknown``), and a lease it may have taken expires after its TTL and the
job is claimed again with the next generation. ``cancel`` is safe to retry (cancelling a
cancelled job answers as the first cancel did), and so is ``purge`` (a repeated batch finds
fewer jobs). ``requeue`` and ``delete`` are not repeated by the store after an unknown
outcome (a repeat of one that took effect would be refused with `JobStateConflict` or
`JobNotFound`): read the job with ``get`` to know.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GenerationExhausted",
    "InvalidArgument",
    "JobNotFound",
    "JobStateConflict",
    "LeaseLost",
    "LockNotAcquired",
    "StaleToken",
    "StoreLost",
    "StoreUnavailable",
    "TenureError",
    "WaitTimeout",
]


class TenureError(Exception):
    """Base class of every error raised by tenure."""


class LeaseLost(TenureError):
    """The store rejected an operation made with a lease that is no longer current.

    The job was left unchanged. Stop working on it: another worker may hold it now.

    ``reason`` says why in one word: ``"cancelled"`` (`Store.cancel` ended the lease),
    ``"claimed"`` (taken by another claim), ``"superseded"`` (the job moved on to a later
    generation that is not held now: claimed and settled since, or cancelled and
    requeued), ``"expired"``, ``"ended"`` (the lease was
    already settled), ``"missing"`` (no such job), ``"mismatch"`` (owner or secret wrong)
    or ``"never_granted"``.
    """

    def __init__(
        self,
        message: str,
        *,
        job_id: str,
        generation: int,
        current_generation: int | None = None,
        current_owner: str | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.generation = generation
        self.current_generation = current_generation
        self.current_owner = current_owner
        self.reason = reason


class StaleToken(TenureError):
    """A fenced destination refused an effect because its token is stale or invalid."""

    def __init__(
        self,
        message: str,
        *,
        job_id: str,
        generation: int | None,
        highest_seen: int | None = None,
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.generation = generation
        self.highest_seen = highest_seen


class JobNotFound(TenureError, LookupError):
    """No job with that id exists in the store."""

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"job {job_id!r} does not exist in this store; submit it first "
            "(store.submit, tenure jobs submit) or check the id and the store URL"
        )
        self.job_id = job_id


class LockNotAcquired(TenureError, TimeoutError):
    """A named lock was not acquired: its timeout passed while another holder had it, or
    (``blocking=False``) it was held. Also raised, at once, for a lock whose job is dead
    (it expired on its last allowed attempt) or cancelled: see docs/locks.md, limits."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


class WaitTimeout(TenureError, TimeoutError):
    """`Store.wait` timed out: the job exists but had not finished. ``job`` is its last
    snapshot (its state then); waiting again is safe, nothing was changed."""

    def __init__(self, job_id: str, timeout: float, state: str, job: Any = None) -> None:
        super().__init__(
            f"job {job_id!r} was still {state} after waiting {timeout:g} s; wait again, "
            "or look at it with store.get / tenure jobs show"
        )
        self.job_id = job_id
        self.timeout = timeout
        self.state = state
        self.job = job


class JobStateConflict(TenureError):
    """The job exists, but its state does not allow ``operation``; nothing was changed.

    ``state`` is the job's state as the store saw it, ``allowed`` the states the operation
    takes.
    """

    def __init__(
        self, job_id: str, operation: str, state: str, allowed: tuple[str, ...], hint: str
    ) -> None:
        super().__init__(
            f"{operation} refused for job {job_id!r}: it is {state}, and {operation} takes "
            f"only a job that is {' or '.join(allowed)}; nothing was changed. {hint}"
        )
        self.job_id = job_id
        self.operation = operation
        self.state = state
        self.allowed = allowed


class GenerationExhausted(TenureError):
    """The job's generation cannot grow any further, so it can never be claimed again."""

    def __init__(self, job_id: str, generation: int, why: str | None = None) -> None:
        super().__init__(
            why
            or f"job {job_id!r} is at generation {generation}, the largest fencing token this "
            "store can represent; it refuses new claims rather than reuse a token. "
            "Submit the work again under a new job id."
        )
        self.job_id = job_id
        self.generation = generation


class InvalidArgument(TenureError, ValueError):
    """An argument broke a documented rule. Nothing was sent to the store."""

    def __init__(self, argument: str, rule: str) -> None:
        super().__init__(f"{argument}: {rule}")
        self.argument = argument
        self.rule = rule


class StoreUnavailable(TenureError):
    """The store could not be reached, or did not answer in time.

    ``operation`` names what was being done; ``outcome_unknown`` is True when the request
    may have reached the store and taken effect (see this module's docstring for what is
    safe to retry).
    """

    def __init__(self, message: str, *, operation: str, outcome_unknown: bool) -> None:
        super().__init__(message)
        self.operation = operation
        self.outcome_unknown = outcome_unknown


class StoreLost(StoreUnavailable):
    """The store this client opened no longer holds what the client saw: its data was lost
    (a Redis restarted without persistence, flushed or failed over to a replica that missed
    writes) or replaced by an older copy. Generations it issued could be issued again, so
    the client refuses every further operation; nothing was changed by the refused one.

    Not worth retrying: stop the workers, and read the store's documentation (docs/redis.md,
    docs/postgres.md, docs/how-it-works.md) on what to do before starting them again.
    """
