"""What every store driver implements: one atomic store operation per method.

Drivers are thin: each method runs one statement (SQL) or one script (Lua) whose condition
is evaluated by the store against the store's own clock, and reports what happened as an
`Outcome` (``APPLIED``, or ``MISSED`` with the job as it is now, or ``MISSING``). They
never decide what an answer means for the caller; `tenure._protocol` does.

`AsyncDriver` is the source of truth. `SyncDriver` has the same methods without ``await``;
drivers written async are turned into their sync twin by ``tools/async_to_sync.py``, and a
driver that is naturally blocking (SQLite) is offered to async code through `ThreadedDriver`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Protocol

import anyio.to_thread

from .._protocol import JobRow, Outcome

__all__ = ["AsyncDriver", "SyncDriver", "ThreadedDriver"]


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
    ) -> list[Outcome]: ...

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome: ...

    async def complete(
        self, job_id: str, owner: str, generation: int, secret_hash: str, result: str | None
    ) -> Outcome: ...

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str
    ) -> Outcome: ...

    async def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        error: str,
        retry_in: float,
    ) -> Outcome: ...

    async def get(self, job_id: str) -> Outcome: ...

    async def list_jobs(
        self, queue: str | None, state: str | None, limit: int
    ) -> tuple[float, list[JobRow]]: ...

    async def close(self) -> None: ...


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
    ) -> list[Outcome]: ...

    def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome: ...

    def complete(
        self, job_id: str, owner: str, generation: int, secret_hash: str, result: str | None
    ) -> Outcome: ...

    def release(self, job_id: str, owner: str, generation: int, secret_hash: str) -> Outcome: ...

    def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        error: str,
        retry_in: float,
    ) -> Outcome: ...

    def get(self, job_id: str) -> Outcome: ...

    def list_jobs(
        self, queue: str | None, state: str | None, limit: int
    ) -> tuple[float, list[JobRow]]: ...

    def close(self) -> None: ...


class ThreadedDriver:
    """Offers a blocking driver to async code by running each call in a worker thread."""

    def __init__(self, sync: SyncDriver) -> None:
        self.sync = sync
        self.store_id = sync.store_id
        self.url = sync.url

    async def now(self) -> float:
        return await anyio.to_thread.run_sync(self.sync.now)

    async def submit(
        self, job_id: str, queue: str, payload: str | None, delay: float, max_attempts: int
    ) -> Outcome:
        call = partial(self.sync.submit, job_id, queue, payload, delay, max_attempts)
        return await anyio.to_thread.run_sync(call)

    async def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome:
        call = partial(self.sync.claim, job_id, owner, ttl, secret_hash)
        return await anyio.to_thread.run_sync(call)

    async def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        call = partial(self.sync.claim_next, owner, ttl, queues, secret_hashes)
        return await anyio.to_thread.run_sync(call)

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome:
        call = partial(self.sync.renew, job_id, owner, generation, secret_hash, ttl)
        return await anyio.to_thread.run_sync(call)

    async def complete(
        self, job_id: str, owner: str, generation: int, secret_hash: str, result: str | None
    ) -> Outcome:
        call = partial(self.sync.complete, job_id, owner, generation, secret_hash, result)
        return await anyio.to_thread.run_sync(call)

    async def release(self, job_id: str, owner: str, generation: int, secret_hash: str) -> Outcome:
        call = partial(self.sync.release, job_id, owner, generation, secret_hash)
        return await anyio.to_thread.run_sync(call)

    async def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        error: str,
        retry_in: float,
    ) -> Outcome:
        call = partial(self.sync.fail, job_id, owner, generation, secret_hash, error, retry_in)
        return await anyio.to_thread.run_sync(call)

    async def get(self, job_id: str) -> Outcome:
        return await anyio.to_thread.run_sync(self.sync.get, job_id)

    async def list_jobs(
        self, queue: str | None, state: str | None, limit: int
    ) -> tuple[float, list[JobRow]]:
        call = partial(self.sync.list_jobs, queue, state, limit)
        return await anyio.to_thread.run_sync(call)

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.sync.close)
