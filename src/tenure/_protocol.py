"""The lease protocol, without I/O.

A store operation is three steps: validate and prepare a request (here), run one atomic
statement or script in the store (a driver), interpret the row it answers (here). Drivers
only report *what the store did* (an `Outcome`); deciding which error that means, building
`Lease` and `Job` values and computing local deadlines and retry delays happens here, once,
for every store and for both the sync and async APIs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import random
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._clock import Clock, LeaseTiming
from ._snapshots import UNDECODED, job_from_row, new_lease
from ._validate import (
    MAX_ATTEMPTS,
    MAX_GENERATION,
    MAX_ID_LENGTH,
    MAX_TTL,
    MIN_TTL,
    SECRET_LENGTH,
    SECRET_TEXT,
    decode_json,
    validate_attempts,
    validate_delay,
    validate_generation,
    validate_id,
    validate_real,
    validate_secret,
    validate_ttl,
)
from .errors import (
    GenerationExhausted,
    InvalidArgument,
    JobNotFound,
    JobStateConflict,
    LeaseLost,
    StoreUnavailable,
)
from .models import JobState, Lease, StrEnum

__all__ = [
    "CLAIM_RECOVERY_TRIES",
    "check_instances",
    "JOB_COLUMNS",
    "UNDECODED",
    "check_lease",
    "claim_not_recovered",
    "claim_recovery_budget",
    "claim_recovery_pause",
    "claim_verdict",
    "CONTROL_TAKES",
    "control_verdict",
    "ClaimRequest",
    "ClaimVerdict",
    "Completion",
    "ended_by",
    "hash_secret",
    "is_repeat",
    "job_from_row",
    "JobRow",
    "lease_lost",
    "LeaseMaker",
    "new_secret",
    "Outcome",
    "Renewal",
    "RetryPolicy",
    "settle_receipt",
    "settle_verdict",
    "Status",
    "Submission",
    "JobFilter",
    "UNFINISHED_STATES",
]

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
    "priority",
    "timeout",
    "unique_key",
    "headers",
)


# tuple.__new__ directly: a NamedTuple's own __new__ is a Python function, a large share
# of the cost of building a batch's rows.
_tuple = tuple.__new__


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
    # Issue #18, last so that rows of 15 fields (a backend written before) still build.
    priority: int = 0  # claims take the highest first
    timeout: float | None = None  # the job's own per-attempt timeout, seconds
    unique_key: str | None = None
    headers: str | None = None  # issue #20: the job's headers as JSON text (None: none)


class Status(StrEnum):
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
    """One item of a batch completion, as a driver receives it (result already JSON;
    ``receipt`` is what the store keeps in place of ``secret_hash`` once done)."""

    job_id: str
    owner: str
    generation: int
    secret_hash: str
    receipt: str
    result: str | None


class Renewal(NamedTuple):
    """One item of a batch renewal, as a driver receives it: the lease's job, owner,
    generation and secret hash, and the new lease's length in seconds from store time."""

    job_id: str
    owner: str
    generation: int
    secret_hash: str
    ttl: float


class Submission(NamedTuple):
    """One job of a batch submit, as a driver receives it (checked; payload already JSON)."""

    job_id: str
    queue: str
    payload: str | None
    delay: float
    max_attempts: int
    priority: int = 0
    timeout: float | None = None
    # Unique jobs (issue #18): the key the job holds while unfinished and for unique_for
    # seconds after it finishes (None: no key; no window after it finishes).
    unique_key: str | None = None
    unique_for: float | None = None
    # The job's headers (issue #20; W3C trace context and the like) as JSON text, None: none.
    headers: str | None = None

    def driver_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of a driver's ``submit`` for this job. The
        unique ones only with a key, the headers only with some: a driver that knows none
        still works."""
        args = (
            self.job_id, self.queue, self.payload, self.delay, self.max_attempts,
            self.priority, self.timeout,
        )  # fmt: skip
        options: dict[str, Any] = {}
        if self.unique_key is not None:
            options = {"unique_key": self.unique_key, "unique_for": self.unique_for}
        if self.headers is not None:
            options["headers"] = self.headers
        return args, options

    def new_row(self, now: float) -> JobRow:
        """The row a store's submit writes for this job at store time ``now``: ready,
        generation 0, no attempt, available at ``now`` + delay (the same double the store
        adds), a REAL timeout. Drivers answer a batch's new jobs with it instead of reading
        them back; the conformance suite holds it to what each store holds."""
        timeout = None if self.timeout is None else float(self.timeout)
        return _tuple(JobRow, (
            self.job_id, self.queue, "ready", None, 0, None, None, now + self.delay, 0,
            self.max_attempts, self.payload, None, None, now, now, self.priority, timeout,
            self.unique_key, self.headers,
        ))  # fmt: skip


class JobFilter(NamedTuple):
    """What a listing selects, checked: jobs of ``queue``, in ``state``, last claimed by
    ``owner`` (None: any), created at least ``older_than`` seconds before store time, whose
    submission number is above ``after`` (the cursor), oldest first, at most ``limit``."""

    queue: str | None
    state: str | None
    owner: str | None
    older_than: float | None
    after: int | None
    limit: int


# A job in neither of these states is finished: done, dead, or any final state added later.
UNFINISHED_STATES = ("ready", "leased")


# A claim whose reply was lost (StoreUnavailable with outcome_unknown) is not resent
# blindly: the store asks for the leases held under the claim's own secret hashes, which no
# one else knows (`AsyncDriver.find_leases`). Found: they are what the claim took, since
# every try of one claim sends the same hashes. None: no try took effect that the store
# shows (or it took nothing), so sending the claim again cannot take a job twice; a try
# still on its way that commits later only leaves leases that expire, as before. At most
# CLAIM_RECOVERY_TRIES tries (a look, then a resend if nothing was found) within
# `claim_recovery_budget`, so the leases found keep most of their time.
CLAIM_RECOVERY_TRIES = 8


def claim_recovery_budget(ttl: float) -> float:
    """How long a claim whose reply was lost may spend finding out what it took: a third
    of its ttl (its leases' time runs meanwhile), at most 5 s."""
    return min(ttl / 3.0, 5.0)


def claim_recovery_pause(attempt: int, jitter: float) -> float:
    """The pause before recovery try ``attempt`` (0, 1, ...): 50 ms doubling to at most
    0.5 s (a restarted server is usually back within a second), times ``jitter`` in
    [0.5, 1.5)."""
    return min(0.05 * 2.0**attempt, 0.5) * jitter


def claim_not_recovered(operation: str, ttl: float, error: Exception) -> StoreUnavailable:
    return StoreUnavailable(
        f"{operation}: the reply was lost and the store could not be asked what the claim "
        f"took within {claim_recovery_budget(ttl):.2g} s (last: {error}); jobs it may have "
        "taken are claimable again when their lease ends",
        operation=operation,
        outcome_unknown=True,
    )


class ClaimRequest(NamedTuple):
    """A validated claim of up to ``len(secret_hashes)`` jobs: one fresh secret per lease
    wanted, drawn before the first try (``secret_of`` maps each hash to its secret)."""

    owner: str
    ttl: float
    queues: tuple[str, ...]
    secret_hashes: list[str]
    secret_of: dict[str, str]


class ClaimVerdict(StrEnum):
    """What a claim of one job by id means for its caller (`claim_verdict`)."""

    CLAIMED = "claimed"
    ALREADY_YOURS = "already_yours"  # a retried claim found the lease it already won
    HELD = "held"
    BURIED = "buried"  # the claim found the last attempt's lease expired: the job is dead
    NOT_CLAIMABLE = "not_claimable"


class Settle(StrEnum):
    """The three operations that end a lease ("settle" it); each leaves its own receipt."""

    COMPLETE = "complete"
    RELEASE = "release"
    FAIL = "fail"


def new_secret() -> tuple[str, str]:
    """A fresh lease secret and the hash the store keeps instead of it."""
    # 192 bits from the OS CSPRNG: what secrets.token_hex does, without its two calls.
    secret = os.urandom(SECRET_LENGTH // 2).hex()
    return secret, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# The operations that end a lease, each leaving its own receipt, with the states the job
# can be in once that operation has ended it (fail: ready for a retry, or dead).
END_STATES: dict[str, tuple[JobState, ...]] = {
    Settle.COMPLETE: (JobState.DONE,),
    Settle.RELEASE: (JobState.READY,),
    Settle.FAIL: (JobState.READY, JobState.DEAD),
}


def settle_receipt(secret_hash: str, operation: str) -> str:
    """What the store keeps in place of the secret's hash once ``operation`` (complete,
    release or fail) has ended the lease.

    A retry of that very operation (after a lost reply) finds its own receipt and is told
    it already took effect; any other operation on the ended lease finds a receipt that is
    not its own and is refused. Without receipts, ``release`` then ``fail`` on one lease
    both answered success (the second one a false "repeat", its error never recorded).
    """
    return hashlib.sha256(f"tenure-settle:{operation}:{secret_hash}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class LeaseMaker:
    """Turns claim/renew answers into `Lease` values for one store."""

    store_id: str
    timing: LeaseTiming

    def lease(self, row: JobRow, owner: str, ttl: float, secret: str, sent_at: float) -> Lease:
        lease_until = row.lease_until
        assert lease_until is not None
        return new_lease(
            row.job_id,
            owner,
            row.generation,
            float(lease_until),
            ttl,
            row.attempts,
            self.timing.local_deadline(sent_at, ttl),
            secret,
            self.store_id,
        )

    def check(self, lease: object, argument: str = "lease") -> Lease:
        """Refuse what is not a well-formed lease of this store, before any I/O."""
        if _plain_lease(lease, self.store_id):  # check_lease's own first test, a call fewer
            return lease  # type: ignore[return-value]
        return check_lease(lease, self.store_id, argument)


def check_lease(lease: object, store_id: str, argument: str = "lease") -> Lease:
    """Check every field of a lease handed back to a store by the rules that made it.

    Nothing in a `Lease` is trusted because the client holds it: a field that breaks its
    rule is `InvalidArgument` naming ``lease.<field>`` before anything is sent. Fields that
    pass go to the store, whose own check (job, owner, generation and secret hash of the live
    lease, by store time) decides; see docs/design.md, "Decisions", for why there is no seal.
    A lease whose ttl is a `timedelta` comes back with it in seconds.
    """
    if _plain_lease(lease, store_id):
        return lease  # type: ignore[return-value]
    if not isinstance(lease, Lease):
        raise InvalidArgument(argument, f"must be a tenure.Lease, not {type(lease).__name__}")
    if not isinstance(lease.store_id, str) or lease.store_id != store_id:
        raise InvalidArgument(
            f"{argument}.store_id",
            f"was granted by another store ({lease.store_id!r}), not this one "
            f"({store_id}); use the store that granted it",
        )
    validate_id(f"{argument}.job_id", lease.job_id)
    validate_id(f"{argument}.owner", lease.owner)
    validate_generation(f"{argument}.generation", lease.generation)
    ttl = validate_ttl(lease.ttl, f"{argument}.ttl")
    validate_secret(f"{argument}.secret", lease.secret)
    validate_attempts(lease.attempt, f"{argument}.attempt")
    validate_real(f"{argument}.lease_until", lease.lease_until)
    validate_real(f"{argument}.local_deadline", lease.local_deadline)
    if type(lease.ttl) is not float:
        return dataclasses.replace(lease, ttl=ttl)
    return lease


_INF = math.inf


def _plain_lease(lease: object, store_id: str) -> bool:
    """True when ``lease`` passes every rule of `check_lease` and is returned as it is: the
    case of each lease a store made, tested in one expression of exact types and ranges.
    False says nothing: `check_lease` then applies the rules one by one (which accept more,
    e.g. an int ttl or an id with non-ASCII letters, and name the rule a field breaks).

    The rules one by one cost a call each and the text of each field's argument name, about
    a tenth of the Store's cost per claim -> complete cycle (issue #19). Each clause is the
    strict form of one rule (tests/unit/test_protocol_leases.py compares the two):
    `validate_id`'s 1-255 printable ASCII characters, `validate_generation`'s and
    `validate_attempts`' ranges of non-bool ints, `validate_ttl`'s range of a float (a NaN
    fails the comparisons), `validate_secret`'s 48 lowercase hex digits, `validate_real`'s
    finite floats."""
    if type(lease) is not Lease:
        return False
    job_id, owner = lease.job_id, lease.owner
    generation, attempt = lease.generation, lease.attempt
    ttl, secret = lease.ttl, lease.secret
    lease_until, local_deadline = lease.lease_until, lease.local_deadline
    return (
        type(lease.store_id) is str
        and lease.store_id == store_id
        and type(job_id) is str
        and 0 < len(job_id) <= MAX_ID_LENGTH
        and job_id.isascii()
        and job_id.isprintable()
        and type(owner) is str
        and 0 < len(owner) <= MAX_ID_LENGTH
        and owner.isascii()
        and owner.isprintable()
        and type(generation) is int
        and 1 <= generation <= MAX_GENERATION
        and type(ttl) is float
        and MIN_TTL <= ttl <= MAX_TTL
        and type(secret) is str
        and SECRET_TEXT.fullmatch(secret) is not None
        and type(attempt) is int
        and 1 <= attempt <= MAX_ATTEMPTS
        and type(lease_until) is float
        and -_INF < lease_until < _INF
        and type(local_deadline) is float
        and -_INF < local_deadline < _INF
    )


def claim_verdict(outcome: Outcome, job_id: str, owner: str, secret_hash: str) -> ClaimVerdict:
    """Classify a claim answer; raises for missing jobs and exhausted generations."""
    if outcome.status == Status.APPLIED:
        return ClaimVerdict.CLAIMED
    row = outcome.row
    if outcome.status == Status.MISSING or row is None:
        raise JobNotFound(job_id)
    if outcome.status == Status.BURIED:
        return ClaimVerdict.BURIED
    live = (
        row.state == JobState.LEASED
        and row.lease_until is not None
        and row.lease_until > outcome.now
    )
    if live and row.owner == owner and row.secret_hash == secret_hash:
        return ClaimVerdict.ALREADY_YOURS
    if live:
        return ClaimVerdict.HELD
    claimable = row.state in (JobState.READY, JobState.LEASED) and row.available_at <= outcome.now
    if claimable and row.generation >= MAX_GENERATION:
        raise GenerationExhausted(row.job_id, row.generation)
    return ClaimVerdict.NOT_CLAIMABLE


def _same_json(stored: str | None, sent: str | None) -> bool:
    # Compared as values: PostgreSQL or a later reader may store the same JSON differently.
    if stored is None or sent is None:
        return stored is sent
    return bool(decode_json(stored) == decode_json(sent))


def _same_content(operation: str, row: JobRow, sent: str | None) -> bool:
    """Whether what a settle would have written (complete's result, fail's error text) is
    what the store holds: only then is the call a true repeat."""
    if operation == Settle.COMPLETE:
        return _same_json(row.result, sent)
    if operation == Settle.FAIL:
        return row.error == sent
    return True


def ended_by(operation: str, row: JobRow | None, generation: int, receipt: str) -> bool:
    """True when ``operation`` (complete, release or fail) with the lease whose settle
    receipt is ``receipt`` is what ended the job's lease at ``generation``."""
    return (
        row is not None
        and row.state in END_STATES[operation]
        and row.generation == generation
        and row.secret_hash == receipt
    )


def is_repeat(
    operation: str, row: JobRow | None, generation: int, receipt: str, sent: str | None = None
) -> bool:
    """True when the job already left the lease through this very operation with the same
    content (``sent``: complete's result JSON, fail's error text): a retried call."""
    return (
        ended_by(operation, row, generation, receipt)
        and row is not None
        and _same_content(operation, row, sent)
    )


def settle_verdict(
    operation: str, lease: Lease, secret_hash: str, outcome: Outcome, sent: str | None = None
) -> LeaseLost | None:
    """None when the store applied the settle, or when it is a repeat (`is_repeat`); else
    the `LeaseLost` to raise."""
    if outcome.status == Status.APPLIED:
        return None
    receipt = settle_receipt(secret_hash, operation)
    if is_repeat(operation, outcome.row, lease.generation, receipt, sent):
        return None
    return lease_lost(operation, lease, outcome, secret_hash)


# How `_ended_how` names each settle, and what a repeat of it must send again.
_SETTLED = {
    Settle.COMPLETE: ("completed", "the same result"),
    Settle.RELEASE: ("released", ""),
    Settle.FAIL: ("failed", "the same error"),
}


def _ended_how(row: JobRow, lease: Lease, secret_hash: str | None) -> str:
    """Why a lease of the job's current generation is no longer live, in plain words."""
    if secret_hash is not None:
        for settle, (past, same) in _SETTLED.items():
            if row.secret_hash == settle_receipt(secret_hash, settle):
                repeat = f"a repeat of that {settle}" + (f" with {same}" if same else "")
                return (
                    f"this lease already {past} the job (now {row.state}); only {repeat} "
                    "is answered as done"
                )
    if row.state == JobState.DEAD and row.secret_hash is None:
        return "the lease expired during the job's last allowed attempt (job is dead)"
    return f"the lease already ended (job is {row.state})"


def _why_lost(row: JobRow, lease: Lease, now: float, secret_hash: str | None) -> tuple[str, str]:
    """(one-word reason, plain words) for a rejected holder operation on an existing job."""
    if row.generation < lease.generation:
        return "never_granted", (
            f"the store never granted generation {lease.generation} (the job is at "
            f"generation {row.generation}): this lease is not one the store issued"
        )
    if row.state == JobState.CANCELLED:
        # Cancel of a leased job moves the generation on: the holder is told it was
        # cancelled, not that another worker took the job.
        why = f": {row.error}" if row.error else ""
        return "cancelled", (f"the job was cancelled (now at generation {row.generation}){why}")
    if row.generation != lease.generation and row.state == JobState.LEASED:
        return "claimed", (
            f"the job was claimed again: it is now at generation {row.generation}, "
            f"held by {row.owner!r}"
        )
    if row.generation != lease.generation:
        # Claimed and settled since, or cancelled and requeued: no lease is live now.
        return "superseded", (
            f"the job moved on to generation {row.generation} since (it is {row.state} now)"
        )
    if row.state != JobState.LEASED:
        return "ended", _ended_how(row, lease, secret_hash)
    if row.lease_until is not None and row.lease_until <= now:
        return "expired", (
            f"the lease expired {now - row.lease_until:.3f} s ago by the store's clock"
        )
    return "mismatch", "owner or secret does not match the current lease"


def lease_lost(
    operation: str, lease: Lease, outcome: Outcome, secret_hash: str | None = None
) -> LeaseLost:
    """The error for an operation the store rejected, saying why in plain words
    (``secret_hash``, when given, lets it tell which settle already ended the lease)."""
    row = outcome.row
    if outcome.status == Status.MISSING or row is None:
        return LeaseLost(
            f"{operation} rejected for job {lease.job_id!r} generation {lease.generation}: "
            "the job no longer exists. Stop working on it.",
            job_id=lease.job_id,
            generation=lease.generation,
            reason="missing",
        )
    code, reason = _why_lost(row, lease, outcome.now, secret_hash)
    return LeaseLost(
        f"{operation} rejected for job {lease.job_id!r} generation {lease.generation} "
        f"(owner {lease.owner!r}): {reason}. The store changed nothing; stop working on "
        "this job and do not retry with this lease.",
        job_id=lease.job_id,
        generation=lease.generation,
        current_generation=row.generation,
        current_owner=row.owner,
        reason=code,
    )


# -- job control: cancel, requeue, delete ------------------------------------------------

# The states each control operation takes, and what to do instead when refused.
CONTROL_TAKES: dict[str, tuple[tuple[str, ...], str]] = {
    "cancel": (
        (JobState.READY, JobState.LEASED),
        "A finished job stays as it is; requeue it first (store.requeue, tenure jobs "
        "requeue) to run it again.",
    ),
    "requeue": (
        (JobState.DONE, JobState.DEAD, JobState.CANCELLED),
        "Wait until it is finished, or cancel it first (store.cancel, tenure jobs cancel).",
    ),
    "delete": (
        (JobState.DONE, JobState.DEAD, JobState.CANCELLED),
        "Cancel it first (store.cancel, tenure jobs cancel), or wait until it is finished.",
    ),
}


def control_verdict(operation: str, job_id: str, outcome: Outcome) -> JobRow:
    """The row a cancel, requeue or delete answered, or the error it means: `JobNotFound`,
    or `JobStateConflict` naming the state when the job's state refused it. A cancel
    that finds the job cancelled already answers as the first one did (idempotent)."""
    row = outcome.row
    if outcome.status == Status.MISSING or row is None:
        raise JobNotFound(job_id)
    if outcome.status == Status.APPLIED:
        return row
    if operation == "cancel" and row.state == JobState.CANCELLED:
        return row
    allowed, hint = CONTROL_TAKES[operation]
    raise JobStateConflict(job_id, operation, row.state, tuple(allowed), hint)


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


# The options that take an object (the test hooks, the policies): what each must be.
_INSTANCES: dict[str, tuple[type, str]] = {
    "clock": (Clock, "tenure.Clock"),
    "store_clock": (Clock, "tenure.Clock"),
    "timing": (LeaseTiming, "tenure.LeaseTiming"),
    "retry_policy": (RetryPolicy, "tenure.RetryPolicy"),
    "rng": (random.Random, "random.Random"),
}


def check_instances(**options: object) -> None:
    """Each of ``options`` (named as in `_INSTANCES`) None or an instance of its class: a
    store or worker given another object would fail only at its first use, perhaps with a
    job already leased under a secret nobody holds."""
    for name, value in options.items():
        kind, shown = _INSTANCES[name]
        if value is not None and not isinstance(value, kind):
            raise InvalidArgument(name, f"must be a {shown} or None, not {type(value).__name__}")
