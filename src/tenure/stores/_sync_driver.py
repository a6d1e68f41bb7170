"""Generated from tenure/stores/_async_driver.py by tools/async_to_sync.py: do not edit.

Edit the async source and run ``python tools/async_to_sync.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol

from .._protocol import Completion, JobRow, Outcome

__all__ = ["SyncDriver", "SQLDriver", "Transaction"]


class SyncDriver(Protocol):
    store_id: str
    url: str

    def now(self) -> float: ...

    def submit(
        self, job_id: str, queue: str, payload: str | None, delay: float, max_attempts: int
    ) -> Outcome: ...

    def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome: ...

    def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        """Up to one claim per secret hash, oldest claimable job first: an ``APPLIED``
        outcome per lease granted, in that order, and a ``BURIED`` one per job met on the
        way whose expired lease was its last allowed attempt (now dead; the pick went on)."""
        ...

    def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome: ...

    # complete, release and fail end the lease: the store keeps ``receipt`` in place of the
    # secret's hash (see tenure._protocol.settle_receipt), so a retry can tell its own
    # settle from another one.
    def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome: ...

    def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        """Every completion in one atomic store operation (one transaction, statement or
        script). Each is checked on its own, as by `complete`; the answer has one outcome
        per completion, in order. Job ids are distinct (the store checked)."""
        ...

    def complete_and_claim(
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

    def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome: ...

    def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        error: str,
        retry_in: float,
    ) -> Outcome: ...

    def get(self, job_id: str) -> Outcome: ...

    def list_jobs(
        self, queue: str | None, state: str | None, limit: int
    ) -> tuple[float, list[JobRow]]: ...

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        """Return when jobs may have become claimable in ``queues``, or after ``timeout``
        seconds. Stores that can be notified (PostgreSQL LISTEN/NOTIFY, Redis) return early;
        others simply wait. Never raises on timeout."""
        ...

    def close(self) -> None: ...


class Transaction(Protocol):
    """One transaction of a SQL store's database on one connection (see
    `SQLDriver.transaction`): entering it connects (or checks the caller's connection
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

    def __enter__(self) -> Transaction: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def now(self) -> float:
        """The store's time, read inside the transaction."""
        ...

    def get(self, job_id: str) -> Outcome:
        """The job as this transaction sees it (``APPLIED``, or ``MISSING``), as `get`."""
        ...

    def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        """`SyncDriver.complete`'s statement, in this transaction: it takes effect only
        if the transaction commits."""
        ...

    def commit(self) -> None: ...

    def rollback(self) -> None:
        """Roll back; never raises (it runs while another error is on its way out)."""
        ...


class SQLDriver(SyncDriver, Protocol):
    """A driver over a SQL database that callers can share a transaction with."""

    def transaction(self, operation: str, conn: Any, payload_limit: int) -> Transaction:
        """A `Transaction` (not begun: no I/O until it is entered) on ``conn``, the
        caller's connection to the store's database, or by default one of the store's
        own. Raises `InvalidArgument` for a ``conn`` of the wrong kind, or when no other
        connection can reach the store (in-memory SQLite). ``operation`` names what the
        transaction is for in errors."""
        ...
