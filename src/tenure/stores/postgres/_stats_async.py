"""`queue_stats` of the PostgreSQL driver (async; the sync twin is generated): one
statement, ``sql/queue_stats.sql``, on a connection of the store's pool. Apart from the
driver's hot path, which it never needs (a dashboard or a scrape asks, not a worker)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from ._common import Statement, store_unavailable

__all__ = ["attempts_async", "queue_stats_async", "read_rows_async"]


async def queue_stats_async(
    pool: AsyncConnectionPool[Any], statement: Statement, now: float | None
) -> tuple[float, list[tuple[Any, ...]]]:
    """``(store time, [(queue, ready, scheduled, leased, expired, oldest_ready_at)...])``;
    ``now``: the test hook's store time, None for the server's clock."""
    try:
        async with pool.connection() as conn:
            cursor = psycopg.AsyncRawCursor(conn)
            await cursor.execute(statement.text, statement.args({"now": now}))
            found = await cursor.fetchall()
    except psycopg.Error as exc:
        error = store_unavailable("queue_stats", exc, sent=True)
        if error is None:
            raise
        raise error from exc
    return float(found[0][0]), [tuple(row[1:]) for row in found if row[1] is not None]


async def attempts_async(
    pool: AsyncConnectionPool[Any], statement: Statement, job_id: str
) -> list[tuple[Any, ...]]:
    """The job's attempts, oldest first: ``[(generation, owner, started_at, ended_at,
    ending, error)...]`` (sql/attempts.sql), on a connection of the store's pool."""
    try:
        async with pool.connection() as conn:
            cursor = psycopg.AsyncRawCursor(conn)
            await cursor.execute(statement.text, statement.args({"job_id": job_id}))
            found = await cursor.fetchall()
    except psycopg.Error as exc:
        error = store_unavailable("attempts", exc, sent=True)
        if error is None:
            raise
        raise error from exc
    return [tuple(row) for row in found]


async def read_rows_async(
    pool: AsyncConnectionPool[Any], operation: str, statement: Statement, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """The rows of one statement apart from the hot path (pause_queue, paused_queues), on a
    connection of the store's pool, committed."""
    try:
        async with pool.connection() as conn:
            cursor = psycopg.AsyncRawCursor(conn)
            await cursor.execute(statement.text, statement.args(params))
            found = await cursor.fetchall()
    except psycopg.Error as exc:
        error = store_unavailable(operation, exc, sent=True)
        if error is None:
            raise
        raise error from exc
    return [tuple(row) for row in found]
