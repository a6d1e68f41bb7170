"""The PostgreSQL driver's job-control operations (cancel, requeue, delete, purge, a
queue's paused flag, its limit and its rate), async (``_control.py`` is generated from
this file): a mixin of `AsyncPostgresDriver`, one statement each (``sql/cancel.sql``,
``requeue.sql``, ``delete.sql``, ``purge.sql``, ``pause_queue.sql``, ``paused_queues.sql``,
``set_queue_limit.sql``, ``queue_limits.sql``, ``set_queue_rate.sql``,
``queue_rates.sql``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from psycopg_pool import AsyncConnectionPool

from ..._protocol import Outcome
from ..._validate import MAX_GENERATION
from ._common import Answer, SqlSet, Statement
from ._stats_async import read_rows_async

__all__ = ["AsyncPostgresControl"]


class _Runner(Protocol):
    """What the mixin uses of the driver."""

    @property
    def _sql(self) -> SqlSet: ...

    @property
    def _pool(self) -> AsyncConnectionPool[Any]: ...

    def _now(self) -> float | None: ...

    async def _one(self, operation: str, params: dict[str, Any]) -> Outcome: ...

    async def _rows(
        self, operation: str, statement: Statement, params: dict[str, Any]
    ) -> list[Answer]: ...


class AsyncPostgresControl:
    """Job control for `AsyncPostgresDriver` (see `tenure.stores.abc.AsyncDriver`)."""

    async def cancel(self: _Runner, job_id: str, reason: str, takes: Sequence[str]) -> Outcome:
        params = {
            "job_id": job_id,
            "reason": reason,
            "takes": list(takes),
            "max_generation": MAX_GENERATION,
        }
        return await self._one("cancel", params)

    async def requeue(
        self: _Runner, job_id: str, delay: float, reset_attempts: bool, takes: Sequence[str]
    ) -> Outcome:
        params = {
            "job_id": job_id,
            "delay": delay,
            "reset_attempts": reset_attempts,
            "takes": list(takes),
        }
        return await self._one("requeue", params)

    async def delete(self: _Runner, job_id: str, takes: Sequence[str]) -> Outcome:
        return await self._one("delete", {"job_id": job_id, "takes": list(takes)})

    async def purge(
        self: _Runner, states: Sequence[str], older_than: float, limit: int, cursor: str | None
    ) -> tuple[int, str | None]:
        # Each batch is its own short transaction (autocommit); oldest first, so the next
        # batch starts where this one ended without a cursor of its own.
        params = {
            "states": list(states),
            "older_than": older_than,
            "limit": limit,
            "now": self._now(),
        }
        rows = await self._rows("purge", self._sql["purge"], params)
        deleted = int(rows[0].due or 0)
        return deleted, ("" if deleted >= limit else None)

    async def set_paused(self: _Runner, queue: str, paused: bool) -> None:
        params = {"queue": queue, "paused": paused}
        await read_rows_async(self._pool, "pause_queue", self._sql["pause_queue"], params)

    async def paused_queues(self: _Runner) -> list[str]:
        rows = await read_rows_async(self._pool, "paused_queues", self._sql["paused_queues"], {})
        return [str(row[0]) for row in rows]

    async def set_queue_limit(self: _Runner, queue: str, limit: int | None) -> None:
        params = {"queue": queue, "max_leased": limit}
        await read_rows_async(self._pool, "set_queue_limit", self._sql["set_queue_limit"], params)

    async def queue_limits(self: _Runner) -> dict[str, int]:
        rows = await read_rows_async(self._pool, "queue_limits", self._sql["queue_limits"], {})
        return {str(row[0]): int(row[1]) for row in rows}

    async def set_queue_rate(self: _Runner, queue: str, rate: tuple[float, int] | None) -> None:
        per_second, burst = (None, None) if rate is None else rate
        params = {"queue": queue, "per_second": per_second, "burst": burst}
        await read_rows_async(self._pool, "set_queue_rate", self._sql["set_queue_rate"], params)

    async def queue_rates(self: _Runner) -> dict[str, tuple[float, int]]:
        rows = await read_rows_async(self._pool, "queue_rates", self._sql["queue_rates"], {})
        return {str(row[0]): (float(row[1]), int(row[2])) for row in rows}
