"""The interface every store driver implements (async; the sync twin is generated).

Drivers are thin: each method runs one statement (SQL) or one script (Lua) whose condition
is evaluated by the store against the store's own clock, and reports what happened as an
`Outcome` (``APPLIED``, or ``MISSED`` with the job as it is now, or ``MISSING``). They
never decide what an answer means for the caller; `tenure._protocol` does.

SQL drivers (`AsyncSQLDriver`) also open an `AsyncTransaction`: the store's own statements
run on a caller's connection, in one transaction with the caller's statements, by the
store's clock; what they answer means what it means for the one-statement operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol

from .._protocol import Completion, JobFilter, JobRow, Outcome, Renewal, Submission
from .._schedule import ScheduleRow

__all__ = ["AsyncDriver", "AsyncSQLDriver", "AsyncTransaction"]


class AsyncDriver(Protocol):
    store_id: str
    url: str

    async def now(self) -> float: ...

    async def submit(
        self,
        job_id: str,
        queue: str,
        payload: str | None,
        delay: float,
        max_attempts: int,
        priority: int = 0,
        timeout: float | None = None,
        *,
        unique_key: str | None = None,
        unique_for: float | None = None,
        headers: str | None = None,
    ) -> Outcome:
        """Insert the job if its id is new (``APPLIED``), else ``MISSED`` with the job as it
        is. With ``unique_key``: also ``MISSED``, with the holder's row, while another job
        holds the key (unfinished, or finished less than its own unique_for ago); else the
        new job takes the key over, atomically with respect to other submits. ``headers``
        (issue #20): the job's headers as JSON text, kept as they are (the store checked
        them), answered in the row's ``headers``; passed only when there are some."""
        ...

    async def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome: ...

    async def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        """Up to one claim per secret hash, oldest claimable job first: an ``APPLIED``
        outcome per lease granted, in that order, and a ``BURIED`` one per job met on the
        way whose expired lease was its last allowed attempt (now dead; the pick went on)."""
        ...

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome: ...

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[Outcome]:
        """Every renewal in one atomic store operation (one transaction, statement or
        script) at one store time. Each is checked on its own, as by `renew`; the answer has
        one outcome per renewal, in order: ``APPLIED`` with the job as renewed, ``MISSED``
        with the job as it is now, or ``MISSING``. Job ids are distinct (the store checked)."""
        ...

    # complete, release and fail end the lease: the store keeps ``receipt`` in place of the
    # secret's hash (see tenure._protocol.settle_receipt), so a retry can tell its own
    # settle from another one.
    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome: ...

    async def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        """Every completion in one atomic store operation (one transaction, statement or
        script). Each is checked on its own, as by `complete`; the answer has one outcome
        per completion, in order. Job ids are distinct (the store checked). An ``APPLIED``
        outcome may come without its row (Redis leaves it out: the caller knows the job is
        done with the result it sent); ``MISSED`` ones always carry the job as it is."""
        ...

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        """`complete_many` then `claim_next`, in one atomic store operation at one store
        time: the claim sees the store as the completions left it. Answers (one outcome
        per completion, in order; the claim's outcomes, as `claim_next` answers)."""
        ...

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome: ...

    async def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        error: str,
        retry_in: float,
    ) -> Outcome: ...

    async def find_leases(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        """The running leases (by store time) of ``owner`` on jobs of ``queues`` whose
        secret hash is one of ``secret_hashes``, oldest job first, an ``APPLIED`` outcome
        each; changes nothing. A claim whose reply was lost asks this with its own hashes,
        which no one else knows: the answer is what that claim took (and still holds)."""
        ...

    async def get(self, job_id: str) -> Outcome: ...

    # -- enqueue and wait (issue #17) ------------------------------------------------------

    async def submit_many(self, submissions: Sequence[Submission]) -> list[Outcome]:
        """Every submission in one atomic store operation (one round trip, one commit),
        each as `submit` does it: ``APPLIED`` with the new row, or ``MISSED`` with the
        existing job as it is. One outcome per submission, in order; ids are distinct (the
        store checked)."""
        ...

    async def wait_job(self, job_id: str, timeout: float) -> Outcome:
        """The job (``APPLIED``, or ``MISSING``) once it is finished (in a state other than
        ready and leased), or as it is after ``timeout`` seconds. Notified stores return as
        soon as a write finishes it; others poll. Never raises on timeout."""
        ...

    async def list_jobs(self, selection: JobFilter) -> tuple[float, list[JobRow], int | None]:
        """The store time, the rows ``selection`` selects (by submission order, after its
        cursor, at most its limit) and the cursor of the next page: the submission number
        of the last row when more may follow, else None."""
        ...

    async def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        """Return when jobs may have become claimable in ``queues``, or after ``timeout``
        seconds. Stores that can be notified (PostgreSQL LISTEN/NOTIFY, Redis) return early;
        others simply wait. Never raises on timeout."""
        ...

    # -- job control (the store floor's side: tenure/_store_control_async.py) ------------
    # Each is one atomic operation by the store's clock. ``takes``: the states the
    # operation applies to (tenure._protocol.CONTROL_TAKES); otherwise it changes nothing
    # and answers ``MISSED`` with the job as it is (``MISSING``: no such job).

    async def cancel(self, job_id: str, reason: str, takes: Sequence[str]) -> Outcome:
        """The job becomes ``cancelled`` with ``reason`` as its error; a leased one at the
        next generation (its holder's token is stale, its lease gone)."""
        ...

    async def requeue(
        self, job_id: str, delay: float, reset_attempts: bool, takes: Sequence[str]
    ) -> Outcome:
        """The job becomes ``ready`` at now + ``delay``, generation kept, result cleared;
        attempts kept (a job that used them all gets one more) or reset to 0."""
        ...

    async def delete(self, job_id: str, takes: Sequence[str]) -> Outcome:
        """The job is deleted (``APPLIED`` with its last row) and the store's generation
        floor raised to its generation: every later claim takes a generation above it."""
        ...

    async def purge(
        self, states: Sequence[str], older_than: float, limit: int, cursor: str | None
    ) -> tuple[int, str | None]:
        """One bounded batch: delete up to ``limit`` jobs in ``states`` last changed at
        least ``older_than`` seconds ago, raising the generation floor as `delete` does.
        Answers (jobs deleted, the cursor to go on from, None once there are no more);
        ``cursor`` is None on the first batch."""
        ...

    async def set_paused(self, queue: str, paused: bool) -> None:
        """Set the queue's paused flag (idempotent). claim_next and complete_and_claim take
        no job of a paused queue; claim of a named job, and leases held, are unaffected."""
        ...

    async def paused_queues(self) -> list[str]:
        """The names of the paused queues, sorted."""
        ...

    async def set_queue_limit(self, queue: str, limit: int | None) -> None:
        """Set the queue's limit of running leases (None: no limit; idempotent). Every claim
        (claim, claim_next, complete_and_claim) takes a job of a limited queue only while
        fewer than ``limit`` of its leases run by store time, decided atomically with the
        claim itself."""
        ...

    async def queue_limits(self) -> dict[str, int]:
        """Each limited queue and its limit, sorted by queue."""
        ...

    async def set_queue_rate(self, queue: str, rate: tuple[float, int] | None) -> None:
        """Set the queue's token bucket, (per_second, burst), or remove it (None). A new or
        changed rate starts the bucket full; setting the same one again keeps it
        (idempotent). Every claim takes at most the whole tokens the bucket holds at store
        time and spends one per lease granted, decided atomically with the claim itself."""
        ...

    async def queue_rates(self) -> dict[str, tuple[float, int]]:
        """Each rate-limited queue and its (per_second, burst), sorted by queue."""
        ...

    async def put_schedule(self, row: ScheduleRow) -> ScheduleRow:
        """Add or replace the schedule named ``row.name`` (one atomic upsert): a new one
        takes store time as its ``created_at`` and ``updated_at``, a replaced one keeps its
        ``created_at``. Answers the schedule as stored."""
        ...

    async def delete_schedule(self, name: str) -> bool:
        """Remove the schedule ``name``; False when there was none."""
        ...

    async def schedules(self) -> list[ScheduleRow]:
        """Every schedule, by name."""
        ...

    async def close(self) -> None: ...


class AsyncTransaction(Protocol):
    """One transaction of a SQL store's database on one connection (see
    `AsyncSQLDriver.transaction`): entering it connects (or checks the caller's connection
    against the store) and begins; leaving it ends the transaction if still open (commit,
    or rollback when an exception is on its way out) and gives the connection back.

    ``conn`` and ``cursor`` (a cursor of ``conn``, the driver library's usual kind) are for
    the caller's statements. The store's statements below run in the same transaction and
    judge by the store's clock, as the operations of the same names do; their own database
    errors come out as `StoreUnavailable` (nothing committed, unless ``outcome_unknown``
    from `commit`). ``payload_limit``: the store's limit for JSON written through it.
    """

    @property
    def conn(self) -> Any: ...

    @property
    def cursor(self) -> Any: ...

    @property
    def payload_limit(self) -> int: ...

    async def __aenter__(self) -> AsyncTransaction: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def now(self) -> float:
        """The store's time, read inside the transaction."""
        ...

    async def get(self, job_id: str) -> Outcome:
        """The job as this transaction sees it (``APPLIED``, or ``MISSING``), as `get`."""
        ...

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        """`AsyncDriver.complete`'s statement, in this transaction: it takes effect only
        if the transaction commits."""
        ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None:
        """Roll back; never raises (it runs while another error is on its way out)."""
        ...


class AsyncSQLDriver(AsyncDriver, Protocol):
    """A driver over a SQL database that callers can share a transaction with."""

    async def submit_joined(self, conn: Any, submissions: Sequence[Submission]) -> list[Outcome]:
        """`submit_many` on ``conn``, the caller's connection to the store's database, in
        the transaction it is in: no begin, no commit (the caller's transaction decides).
        Raises `InvalidArgument` for a ``conn`` of the wrong kind or database."""
        ...

    def transaction(self, operation: str, conn: Any, payload_limit: int) -> AsyncTransaction:
        """An `AsyncTransaction` (not begun: no I/O until it is entered) on ``conn``, the
        caller's connection to the store's database, or by default one of the store's
        own. Raises `InvalidArgument` for a ``conn`` of the wrong kind, or when no other
        connection can reach the store (in-memory SQLite). ``operation`` names what the
        transaction is for in errors."""
        ...
