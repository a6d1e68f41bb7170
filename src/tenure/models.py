"""Frozen values handed to users: `Lease`, `Job` (and its `JobHeaders`), `FencingToken`,
`Claim`, `Attempt`, `StoredSchedule`, `QueueRate`, and the values users hand in or page through:
`JobSpec`, `JobPage`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

from ._clock import Clock, SystemClock

__all__ = [
    "Attempt",
    "AttemptEnding",
    "Claim",
    "FencingToken",
    "Job",
    "JobHeaders",
    "JobPage",
    "JobSpec",
    "JobState",
    "Lease",
    "QueueRate",
    "StoredSchedule",
]


class StrEnum(str, Enum):
    """`enum.StrEnum` for Python 3.10: members are their words, in f-strings and JSON too."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(str.__str__(self), format_spec)


class JobState(StrEnum):
    """The state of a job, the one spelling used everywhere (a `str`: ``"ready"`` compares
    equal to `JobState.READY`, and JSON shows the plain word).

    ``ready``: claimable from ``available_at``. ``leased``: held until ``lease_until`` (then
    claimable again). ``done``, ``dead`` and ``cancelled`` are final: completed, out of
    attempts, or cancelled by `Store.cancel` (`Store.requeue` makes a final job ready
    again)."""

    READY = "ready"
    LEASED = "leased"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


class AttemptEnding(StrEnum):
    """How an attempt (one lease of a job) ended, as `Attempt.ending` says.

    ``completed``, ``failed`` (its error in `Attempt.error`; the job may be dead after it),
    ``released``, ``cancelled`` (the reason in `Attempt.error`), ``lost`` (the lease
    expired and a claim took the job at a newer generation) and ``dead`` (the lease expired
    on the job's last allowed attempt, and the store buried the job)."""

    COMPLETED = "completed"
    FAILED = "failed"
    RELEASED = "released"
    CANCELLED = "cancelled"
    LOST = "lost"
    DEAD = "dead"


_SYSTEM_CLOCK = SystemClock()


@dataclass(frozen=True, slots=True)
class FencingToken:
    """What a destination needs to fence an effect: the job and its generation.

    Never contains the lease secret, so it can be shown to any destination.
    ``str(token)`` is ``"<generation>:<percent-encoded job id>"``, the form used in HTTP
    headers and logs; `FencingToken.parse` reads it back.

    ``store_id`` is the store whose lease made the token (`Lease.token`): it lets this
    process's worker registry tell apart two stores' jobs with the same id and generation.
    It is no part of the token's value: not in ``str()`` (the wire), not compared, not in
    ``repr``; a token parsed from the wire or built by hand has None.
    """

    job_id: str
    generation: int
    store_id: str | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.generation}:{quote(self.job_id, safe='')}"

    @classmethod
    def parse(cls, text: str) -> FencingToken:
        from ._validate import validate_generation, validate_id
        from .errors import InvalidArgument

        if not isinstance(text, str):
            raise InvalidArgument("token", f"must be a str, not {type(text).__name__}")
        generation_text, sep, job_text = text.partition(":")
        # ASCII digits only: str.isdigit() also accepts '²' and Arabic-Indic digits.
        if not sep or not (generation_text.isascii() and generation_text.isdigit()):
            raise InvalidArgument("token", "must look like '<generation>:<job id>'")
        if len(generation_text) > 19:
            raise InvalidArgument("token generation", "must be from 1 to 2**63-1")
        try:
            job_id = unquote(job_text, errors="strict")
        except UnicodeDecodeError:
            raise InvalidArgument("token job id", "must percent-encode valid UTF-8") from None
        return cls(
            validate_id("token job id", job_id),
            validate_generation("token generation", int(generation_text)),
        )


@dataclass(frozen=True, slots=True)
class Lease:
    """Temporary ownership of one job, as granted by a store.

    ``lease_until`` is in *store* time and is informative only; decisions on the client use
    ``local_deadline``, a value on the client's monotonic clock (see `tenure._clock`).
    ``secret`` proves authority to renew/complete/release/fail; it never leaves the holder
    except to go back to the store, and it is hidden from ``repr``.

    Every field is checked again when the lease comes back to a store (docs/design.md,
    "Decisions"): an edited lease acts as the genuine one would with those values, or is
    refused (`InvalidArgument` for a broken rule, `LeaseLost` from the store's own check).
    """

    job_id: str
    owner: str
    generation: int
    lease_until: float
    ttl: float
    attempt: int
    local_deadline: float
    secret: str = field(repr=False)
    store_id: str = field(repr=False)

    @property
    def token(self) -> FencingToken:
        return FencingToken(self.job_id, self.generation, self.store_id)

    def remaining(self, clock: Clock | None = None) -> float:
        """Seconds left before the local deadline (negative once past it)."""
        return self.local_deadline - (clock or _SYSTEM_CLOCK).monotonic()

    def expired_locally(self, clock: Clock | None = None) -> bool:
        """True once the holder must assume the lease is gone."""
        return self.remaining(clock) <= 0.0


class JobHeaders(Mapping[str, str]):
    """A job's headers (issue #20): an immutable mapping of str to str, stored with the job
    when it was submitted (`Store.submit`'s ``headers``), such as the W3C trace context
    (``traceparent``, ``tracestate``) that `submit` adds while an OpenTelemetry span is
    current. Compares equal to a dict of the same items; pickles (a job goes to a handler's
    own process)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, str] = {} if items is None else dict(items)

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return f"JobHeaders({self._items!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (JobHeaders, (self._items,))


# The headers of a job submitted without any (shared: a JobHeaders never changes).
NO_HEADERS = JobHeaders()


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of one job, read at store time ``as_of``.

    ``owner`` is the holder of the current or most recent lease (None if never claimed).
    A ``leased`` job whose ``lease_until`` is not after ``as_of`` has an expired lease and is
    claimable (`lease_expired`). ``available_at`` is the store time from which the job can be
    claimed: its run time when ``ready``, the end of its lease when ``leased``.

    ``created`` answers for the snapshot that `Store.submit` returns: True when that submit
    created the job, False when the id existed already (submit is idempotent and left it
    unchanged). It is None on every other snapshot.

    ``priority``: claims take the highest first, oldest first within one priority (issue
    #18; 0 by default). ``timeout``: the job's own per-attempt timeout in seconds, which a
    worker uses instead of its handler's (None: the handler's applies).

    ``unique_key`` is the key the job was submitted with (None: none; see `Store.submit`'s
    ``unique_key``). A job with a key keeps it on its snapshots after it stops holding it.

    ``headers``: the job's `JobHeaders` (issue #20), as submitted (empty: none); the trace
    context a worker's handler span continues (docs/worker.md, "Tracing").
    """

    job_id: str
    queue: str
    state: JobState
    owner: str | None
    generation: int
    lease_until: float | None
    attempts: int
    max_attempts: int
    payload: Any
    result: Any
    error: str | None
    available_at: float
    created_at: float
    updated_at: float
    as_of: float
    created: bool | None = None
    priority: int = 0
    timeout: float | None = None
    unique_key: str | None = None
    headers: JobHeaders = NO_HEADERS

    @property
    def lease_expired(self) -> bool:
        return (
            self.state == JobState.LEASED
            and self.lease_until is not None
            and self.lease_until <= self.as_of
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "queue": self.queue,
            "state": self.state,
            "owner": self.owner,
            "generation": self.generation,
            "lease_until": self.lease_until,
            "lease_expired": self.lease_expired,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "payload": self.payload,
            "result": self.result,
            "error": self.error,
            "available_at": self.available_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "as_of": self.as_of,
            "created": self.created,
            "priority": self.priority,
            "timeout": self.timeout,
            "unique_key": self.unique_key,
            "headers": dict(self.headers),
        }


class Claim(NamedTuple):
    """A lease and the snapshot of its job as that claim left it (``leased``, this owner,
    this generation), read in the same store operation: what `Store.claim_jobs` and
    `Store.complete_and_claim_jobs` return. A tuple, so ``for lease, job in claims`` works."""

    lease: Lease
    job: Job


# -- submitting and listing many (issue #17) ------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of `Store.submit_many`: the arguments of `Store.submit`, by the same names
    and defaults. A mapping with these keys (``job_id`` required) is accepted too."""

    job_id: str
    payload: Any = None
    queue: str = "default"
    delay: float | timedelta = 0
    max_attempts: int = 5  # submit's default (tenure.DEFAULT_MAX_ATTEMPTS)
    priority: int = 0
    timeout: float | timedelta | None = None
    unique_key: str | None = None
    unique_for: float | timedelta | None = None
    headers: Mapping[str, str] | None = None


class JobPage(list[Job]):  # a list: callers of the one-page `jobs()` index and len it
    """One page of `Store.jobs`: a list of `Job` snapshots, oldest first, and
    ``next_cursor``, to pass as ``cursor=`` for the next page (None: this was the last)."""

    __slots__ = ("next_cursor",)

    def __init__(self, jobs: list[Job] | tuple[Job, ...] = (), next_cursor: str | None = None):
        super().__init__(jobs)
        self.next_cursor = next_cursor

    def __repr__(self) -> str:
        return f"JobPage({list.__repr__(self)}, next_cursor={self.next_cursor!r})"


# How many attempts a store keeps per job: the newest ones. A job retried forever keeps a
# bounded history (a claim drops the oldest beyond it, in the same operation).
ATTEMPTS_KEPT = 100


@dataclass(frozen=True, slots=True)
class Attempt:
    """One lease of a job as the store recorded it (`Store.attempts`): the claim that
    started it and, once over, how it ended. Times are store time (seconds since the epoch
    by the store's clock); ``ended_at`` and ``ending`` are None while the lease is current
    (or expired and not yet taken over). Never carries the lease secret."""

    job_id: str
    generation: int
    owner: str
    started_at: float
    ended_at: float | None = None
    ending: AttemptEnding | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The attempt as JSON-ready values (the CLI's and the dashboard's form)."""
        return {
            "job_id": self.job_id,
            "generation": self.generation,
            "owner": self.owner,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "ending": None if self.ending is None else str(self.ending),
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A periodic job kept in the store (`Store.add_schedule`, ``tenure schedules``): every
    `Worker` serving ``queue`` submits one job per tick of ``cron`` in ``timezone``, as it
    does for its own ``@worker.periodic`` schedules (docs/worker.md, "Periodic jobs").
    ``created_at`` and ``updated_at`` are store time (``updated_at``: the latest
    `add_schedule` of this name)."""

    name: str
    cron: str
    queue: str
    payload: Any
    timezone: str
    catch_up: str
    max_attempts: int
    created_at: float
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        """The schedule as JSON-ready values (the CLI's and the dashboard's form)."""
        return {
            "name": self.name,
            "cron": self.cron,
            "queue": self.queue,
            "payload": self.payload,
            "timezone": self.timezone,
            "catch_up": self.catch_up,
            "max_attempts": self.max_attempts,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


class QueueRate(NamedTuple):
    """A queue's fleet-wide rate limit (`Store.set_queue_rate`, `Store.queue_rates`): a
    token bucket by the store's clock holding at most ``burst`` tokens, refilled at
    ``per_second`` tokens a second; each lease granted in the queue takes one."""

    per_second: float
    burst: int
