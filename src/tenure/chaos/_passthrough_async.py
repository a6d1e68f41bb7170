"""The pass-through store driver the chaos drivers build on (`tenure.chaos._drivers`): it
hands every call to the driver it wraps, so that a wrapper overrides only what it watches
(the history recorder) or breaks (the unsafe driver).

This file is the async source; ``tools/async_to_sync.py`` generates ``_passthrough.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._protocol import Completion, JobFilter, JobRow, Outcome, Submission
from .._schedule import ScheduleRow
from ..stores.abc import AsyncDriver

__all__ = ["AsyncPassThroughDriver"]


class AsyncPassThroughDriver:
    """Hands every call to ``inner``; the drivers below override what they watch or break."""

    def __init__(self, inner: AsyncDriver) -> None:
        self._inner = inner
        self.store_id = inner.store_id
        self.url = inner.url

    async def now(self) -> float:
        return await self._inner.now()

    async def submit(
        self,
        job_id: str,
        queue: str,
        payload: str | None,
        delay: float,
        max_attempts: int,
        priority: int = 0,
        timeout: float | None = None,
        **unique: Any,  # unique_key, unique_for (issue #18), headers (#20): passed through
    ) -> Outcome:
        return await self._inner.submit(
            job_id, queue, payload, delay, max_attempts, priority, timeout, **unique
        )

    async def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome:
        return await self._inner.claim(job_id, owner, ttl, secret_hash)

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        return await self._inner.complete_and_claim(completions, owner, ttl, queues, secret_hashes)

    async def find_leases(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        return await self._inner.find_leases(owner, ttl, queues, secret_hashes)

    async def get(self, job_id: str) -> Outcome:
        return await self._inner.get(job_id)

    async def list_jobs(self, selection: JobFilter) -> tuple[float, list[JobRow], int | None]:
        return await self._inner.list_jobs(selection)

    # Not recorded: the chaos workload neither submits in batches nor waits.
    async def submit_many(self, submissions: Sequence[Submission]) -> list[Outcome]:
        return await self._inner.submit_many(submissions)

    async def wait_job(self, job_id: str, timeout: float) -> Outcome:
        return await self._inner.wait_job(job_id, timeout)

    async def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        await self._inner.wait_for_jobs(queues, timeout)

    # Job control (the recording driver records cancel, requeue and delete).
    async def cancel(self, job_id: str, reason: str, takes: Sequence[str]) -> Outcome:
        return await self._inner.cancel(job_id, reason, takes)

    async def requeue(
        self, job_id: str, delay: float, reset_attempts: bool, takes: Sequence[str]
    ) -> Outcome:
        return await self._inner.requeue(job_id, delay, reset_attempts, takes)

    async def delete(self, job_id: str, takes: Sequence[str]) -> Outcome:
        return await self._inner.delete(job_id, takes)

    async def purge(
        self, states: Sequence[str], older_than: float, limit: int, cursor: str | None
    ) -> tuple[int, str | None]:
        return await self._inner.purge(states, older_than, limit, cursor)

    async def set_paused(self, queue: str, paused: bool) -> None:
        await self._inner.set_paused(queue, paused)

    async def paused_queues(self) -> list[str]:
        return await self._inner.paused_queues()

    async def set_queue_limit(self, queue: str, limit: int | None) -> None:
        await self._inner.set_queue_limit(queue, limit)

    async def queue_limits(self) -> dict[str, int]:
        return await self._inner.queue_limits()

    async def set_queue_rate(self, queue: str, rate: tuple[float, int] | None) -> None:
        await self._inner.set_queue_rate(queue, rate)

    async def queue_rates(self) -> dict[str, tuple[float, int]]:
        return await self._inner.queue_rates()

    async def put_schedule(self, row: ScheduleRow) -> ScheduleRow:
        return await self._inner.put_schedule(row)

    async def delete_schedule(self, name: str) -> bool:
        return await self._inner.delete_schedule(name)

    async def schedules(self) -> list[ScheduleRow]:
        return await self._inner.schedules()

    async def close(self) -> None:
        await self._inner.close()

    # The optional readers (a driver may have none): the store asks for them by name, so a
    # wrapper forwards what its inner driver has, and a chaos run's store shows its attempt
    # history and queue counts like any other.
    @property
    def attempts(self) -> Any:
        return getattr(self._inner, "attempts", None)

    @property
    def queue_stats(self) -> Any:
        return getattr(self._inner, "queue_stats", None)
