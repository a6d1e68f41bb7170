"""The lease protocol, without I/O.

A store operation is three steps: validate and prepare a request (here), run one atomic
statement or script in the store (a driver), interpret the row it answers (here). Drivers
only report *what the store did* (an `Outcome`); deciding which error that means, building
`Lease` and `Job` values and computing local deadlines and retry delays happens here, once,
for every store and for both the sync and async APIs.
"""

from __future__ import annotations

import hashlib
import logging
import random
import secrets
from dataclasses import dataclass
from typing import NamedTuple

from ._clock import LeaseTiming
from ._validate import MAX_GENERATION, decode_json, validate_delay
from .errors import GenerationExhausted, InvalidArgument, JobNotFound, LeaseLost
from .models import Job, Lease, lease_seal

__all__ = [
    "JOB_COLUMNS",
    "ClaimRequest",
    "ClaimVerdict",
    "Completion",
    "JobRow",
    "Outcome",
    "Status",
]

log = logging.getLogger("tenure")

# Column order every driver returns job rows in.
JOB_COLUMNS = (
    "job_id",
    "queue",
    "state",
    "owner",
    "generation",
    "secret_hash",
    "lease_until",
    "available_at",
    "attempts",
    "max_attempts",
    "payload",
    "result",
    "error",
    "created_at",
    "updated_at",
)


class JobRow(NamedTuple):
    """One job as a store holds it (payload and result still JSON text)."""

    job_id: str
    queue: str
    state: str
    owner: str | None
    generation: int
    secret_hash: str | None
    lease_until: float | None
    available_at: float
    attempts: int
    max_attempts: int
    payload: str | None
    result: str | None
    error: str | None
    created_at: float
    updated_at: float


class Status:
    """What a driver reports the store did."""

    APPLIED = "applied"  # the conditional write matched and took effect
    MISSED = "missed"  # the condition did not match; `row` is the job as it is now
    MISSING = "missing"  # no such job
    BURIED = "buried"  # claim found an expired lease with no attempts left: now dead


class Outcome(NamedTuple):
    status: str
    row: JobRow | None
    now: float


class Completion(NamedTuple):
    """One item of a batch completion, as a driver receives it (result already JSON)."""

    job_id: str
    owner: str
    generation: int
    secret_hash: str
    result: str | None


class ClaimRequest(NamedTuple):
    """A validated claim of up to ``len(secret_hashes)`` jobs: one fresh secret per lease
    wanted, drawn before the first try (``secret_of`` maps each hash to its secret)."""

    owner: str
    ttl: float
    queues: tuple[str, ...]
    secret_hashes: list[str]
    secret_of: dict[str, str]


class ClaimVerdict:
    CLAIMED = "claimed"
    ALREADY_YOURS = "already_yours"  # a retried claim found the lease it already won
    HELD = "held"
    NOT_CLAIMABLE = "not_claimable"


def new_secret() -> tuple[str, str]:
    """A fresh lease secret and the hash the store keeps instead of it."""
    secret = secrets.token_hex(24)  # 192 bits from the OS CSPRNG
    return secret, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class LeaseMaker:
    """Turns claim/renew answers into `Lease` values for one store."""

    store_id: str
    timing: LeaseTiming

    def lease(self, row: JobRow, owner: str, ttl: float, secret: str, sent_at: float) -> Lease:
        assert row.lease_until is not None
        return Lease(
            job_id=row.job_id,
            owner=owner,
            generation=row.generation,
            lease_until=float(row.lease_until),
            ttl=ttl,
            attempt=row.attempts,
            local_deadline=self.timing.local_deadline(sent_at, ttl),
            secret=secret,
            store_id=self.store_id,
            seal=lease_seal(self.store_id, row.job_id, owner, row.generation, secret, ttl),
        )

    def check(self, lease: object) -> Lease:
        """Refuse what is not an untampered lease of this store, before any I/O."""
        if not isinstance(lease, Lease):
            raise InvalidArgument("lease", f"must be a tenure.Lease, not {type(lease).__name__}")
        if lease.store_id != self.store_id:
            raise InvalidArgument(
                "lease",
                f"was granted by another store ({lease.store_id}), not this one "
                f"({self.store_id}); use the store that granted it",
            )
        expected = lease_seal(
            lease.store_id, lease.job_id, lease.owner, lease.generation, lease.secret, lease.ttl
        )
        if not secrets.compare_digest(expected, lease.seal):
            raise InvalidArgument(
                "lease",
                f"does not match what the store granted for job {lease.job_id!r} (altered "
                "job_id, owner, generation, ttl or secret); pass the Lease object unchanged",
            )
        return lease


def job_from_row(row: JobRow, as_of: float) -> Job:
    return Job(
        job_id=row.job_id,
        queue=row.queue,
        state=row.state,  # type: ignore[arg-type]
        owner=row.owner,
        generation=row.generation,
        lease_until=None if row.lease_until is None else float(row.lease_until),
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        payload=decode_json(row.payload),
        result=decode_json(row.result),
        error=row.error,
        available_at=float(row.available_at),
        created_at=float(row.created_at),
        updated_at=float(row.updated_at),
        as_of=float(as_of),
    )


def claim_verdict(outcome: Outcome, job_id: str, owner: str, secret_hash: str) -> str:
    """Classify a claim answer; raises for missing jobs and exhausted generations."""
    if outcome.status == Status.APPLIED:
        return ClaimVerdict.CLAIMED
    row = outcome.row
    if outcome.status == Status.MISSING or row is None:
        raise JobNotFound(job_id)
    if outcome.status == Status.BURIED:
        log.info(
            "job buried: its last attempt's lease expired",
            extra={"job_id": row.job_id, "generation": row.generation, "attempts": row.attempts},
        )
        return ClaimVerdict.NOT_CLAIMABLE
    live = row.state == "leased" and row.lease_until is not None and row.lease_until > outcome.now
    if live and row.owner == owner and row.secret_hash == secret_hash:
        return ClaimVerdict.ALREADY_YOURS
    if live:
        return ClaimVerdict.HELD
    claimable = row.state in ("ready", "leased") and row.available_at <= outcome.now
    if claimable and row.generation >= MAX_GENERATION:
        raise GenerationExhausted(row.job_id, row.generation)
    return ClaimVerdict.NOT_CLAIMABLE


def ended_by_same_lease(
    row: JobRow, lease: Lease, secret_hash: str, states: tuple[str, ...]
) -> bool:
    """True when the job already left the lease through this very lease (a retried call)."""
    return (
        row.state in states
        and row.generation == lease.generation
        and row.secret_hash == secret_hash
    )


def lease_lost(operation: str, lease: Lease, outcome: Outcome) -> LeaseLost:
    """The error for an operation the store rejected, saying why in plain words."""
    row = outcome.row
    if outcome.status == Status.MISSING or row is None:
        reason = "the job no longer exists"
        error = LeaseLost(
            f"{operation} rejected for job {lease.job_id!r} generation {lease.generation}: "
            f"{reason}. Stop working on it.",
            job_id=lease.job_id,
            generation=lease.generation,
        )
    else:
        if row.generation != lease.generation:
            reason = (
                f"the job was claimed again: it is now at generation {row.generation}, "
                f"held by {row.owner!r}"
            )
        elif row.state != "leased":
            reason = f"the lease already ended (job is {row.state})"
        elif row.lease_until is not None and row.lease_until <= outcome.now:
            reason = (
                f"the lease expired {outcome.now - row.lease_until:.3f} s ago by the store's clock"
            )
        else:
            reason = "owner or secret does not match the current lease"
        error = LeaseLost(
            f"{operation} rejected for job {lease.job_id!r} generation {lease.generation} "
            f"(owner {lease.owner!r}): {reason}. The store changed nothing; stop working on "
            "this job and do not retry with this lease.",
            job_id=lease.job_id,
            generation=lease.generation,
            current_generation=row.generation,
            current_owner=row.owner,
        )
    log.warning(
        "stale %s rejected",
        operation,
        extra={
            "job_id": lease.job_id,
            "owner": lease.owner,
            "generation": lease.generation,
            "current_generation": error.current_generation,
        },
    )
    return error


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter for failed attempts (used when no retry_in)."""

    base: float = 1.0
    cap: float = 3600.0

    def __post_init__(self) -> None:
        # Checked here, not at the first fail(): a NaN or negative delay must never reach
        # a store. Seconds from 0 to 366 days, as for retry_in.
        object.__setattr__(self, "base", validate_delay(self.base, "base"))
        object.__setattr__(self, "cap", validate_delay(self.cap, "cap"))

    def delay(self, attempt: int, rng: random.Random) -> float:
        ceiling = min(self.cap, self.base * (2.0 ** min(max(attempt - 1, 0), 60)))
        # Half fixed, half jitter: spreads retries without ever retrying at once.
        return ceiling / 2.0 + rng.uniform(0.0, ceiling / 2.0)
