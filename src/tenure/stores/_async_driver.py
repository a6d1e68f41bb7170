"""The interface every store driver implements (async; the sync twin is generated).

Drivers are thin: each method runs one statement (SQL) or one script (Lua) whose condition
is evaluated by the store against the store's own clock, and reports what happened as an
`Outcome` (``APPLIED``, or ``MISSED`` with the job as it is now, or ``MISSING``). They
never decide what an answer means for the caller; `tenure._protocol` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .._protocol import Completion, JobRow, Outcome

__all__ = ["AsyncDriver"]


class AsyncDriver(Protocol):
    store_id: str
    url: str

    async def now(self) -> float: ...

    async def submit(
        self, job_id: str, queue: str, payload: str | None, delay: float, max_attempts: int
    ) -> Outcome: ...

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
        per completion, in order. Job ids are distinct (the store checked)."""
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

    async def get(self, job_id: str) -> Outcome: ...

    async def list_jobs(
        self, queue: str | None, state: str | None, limit: int
    ) -> tuple[float, list[JobRow]]: ...

    async def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        """Return when jobs may have become claimable in ``queues``, or after ``timeout``
        seconds. Stores that can be notified (PostgreSQL LISTEN/NOTIFY, Redis) return early;
        others simply wait. Never raises on timeout."""
        ...

    async def close(self) -> None: ...
