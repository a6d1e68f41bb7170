"""Store driver interfaces, and `ThreadedDriver` for drivers that are naturally blocking.

`AsyncDriver` (``_async_driver.py``) is the source of truth; `SyncDriver` is generated from
it by ``tools/async_to_sync.py``, as are the sync twins of drivers written async. A blocking
driver (SQLite) is offered to async code through `ThreadedDriver`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import anyio.to_thread

from .._protocol import Completion, JobRow, Outcome
from ._async_driver import AsyncDriver
from ._sync_driver import SyncDriver

__all__ = ["AsyncDriver", "SyncDriver", "ThreadedDriver"]


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
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        call = partial(self.sync.complete, job_id, owner, generation, secret_hash, receipt, result)
        return await anyio.to_thread.run_sync(call)

    async def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        return await anyio.to_thread.run_sync(self.sync.complete_many, completions)

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        call = partial(self.sync.complete_and_claim, completions, owner, ttl, queues, secret_hashes)
        return await anyio.to_thread.run_sync(call)

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome:
        call = partial(self.sync.release, job_id, owner, generation, secret_hash, receipt)
        return await anyio.to_thread.run_sync(call)

    async def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        error: str,
        retry_in: float,
    ) -> Outcome:
        call = partial(
            self.sync.fail, job_id, owner, generation, secret_hash, receipt, error, retry_in
        )
        return await anyio.to_thread.run_sync(call)

    async def get(self, job_id: str) -> Outcome:
        return await anyio.to_thread.run_sync(self.sync.get, job_id)

    async def list_jobs(
        self, queue: str | None, state: str | None, limit: int
    ) -> tuple[float, list[JobRow]]:
        call = partial(self.sync.list_jobs, queue, state, limit)
        return await anyio.to_thread.run_sync(call)

    async def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        call = partial(self.sync.wait_for_jobs, queues, timeout)
        await anyio.to_thread.run_sync(call, abandon_on_cancel=True)

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.sync.close)
