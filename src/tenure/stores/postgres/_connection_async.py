"""A driver's connections and raw cursors, and the retry of statements that raced another
writer (async; ``_connection.py`` is generated from this file).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import AsyncConnection, AsyncRawCursor
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from ..._concurrency import close_at_exit_async
from ..._protocol import Outcome, Submission
from ...errors import StoreUnavailable
from ._bound import watch_replication
from ._common import (
    Answer,
    PostgresOptions,
    SqlSet,
    answer_row,
    binary_lists,
    connection_is_stale,
    describe_pool,
    parse_postgres_url,
    reconnect_attempt,
    socket_poller,
    store_unavailable,
)

__all__ = [
    "RACE_RETRIES",
    "AsyncReconnectingPool",
    "Hot",
    "holder_params",
    "lost_race",
    "submission_params",
    "hot_cursor_async",
    "new_hot_async",
    "pool_for_async",
    "raw_cursor_async",
    "submit_each_async",
    "unraced_async",
    "usable_connection_async",
]

# A job changed by someone else between a statement's snapshot and its update: run again.
# Each run takes a new snapshot, so this only repeats while the job keeps changing.
RACE_RETRIES = 5


class AsyncReconnectingPool(AsyncConnectionPool[Any]):
    """The pool of a store opened by URL: psycopg_pool's, retrying a lost server sooner
    (`reconnect_attempt`), so that an outage shorter than a lease costs no lease."""

    _adopted: AsyncConnection[Any] | None = None

    async def adopt(self, conn: AsyncConnection[Any]) -> None:
        """Make ``conn`` (open, idle, in autocommit, to this pool's server) the first
        connection the pool adds instead of connecting: the store's schema check has just
        paid for a connection (a backend's start, 4 ms here, and a worker opens two stores)
        and warmed that backend's catalog caches. A pool that keeps no connection
        (``min_size`` 0) would hold it idle: it is closed."""
        if self.min_size > 0:
            self._adopted = conn
        else:
            await conn.close()

    async def _connect(self, timeout: float | None = None) -> AsyncConnection[Any]:
        conn, self._adopted = self._adopted, None
        if conn is None or connection_is_stale(conn):
            if conn is not None:
                await conn.close()
            made: AsyncConnection[Any] = await super()._connect(timeout)
            return made
        # What psycopg_pool does to a connection it made, after connecting
        # (tests/postgres/test_pool_adopt.py fails if that stops being enough).
        conn._pool = self
        if self._configure is not None:
            await self._configure(conn)
        self._set_connection_expiry_date(conn)
        return conn

    async def close(self, timeout: float = 5.0) -> None:
        conn, self._adopted = self._adopted, None
        if conn is not None:
            await conn.close()
        await super().close(timeout)

    async def _add_connection(self, attempt: Any = None, growing: bool = False) -> None:
        await super()._add_connection(reconnect_attempt(attempt, self.reconnect_timeout), growing)


def pool_for_async(
    url: str | None,
    pool: AsyncConnectionPool[Any] | None,
    configure: Callable[[AsyncConnection[Any]], Awaitable[None]],
) -> tuple[PostgresOptions, AsyncConnectionPool[Any], bool]:
    """A driver's options, its pool (not opened yet) and whether tenure owns it: one built
    from ``url`` (its connections set up by ``configure``), or the caller's ``pool``."""
    if url is not None:
        options = parse_postgres_url(url)
        own = AsyncReconnectingPool(
            options.conninfo,
            kwargs={"autocommit": True, **options.kwargs},
            min_size=options.pool_min,
            max_size=options.pool_max,
            timeout=options.pool_timeout,
            name=f"tenure:{options.schema}",
            configure=configure,
            open=False,
        )
        close_at_exit_async(own)  # its threads (sync) must stop before the interpreter's end
        return options, own, True
    assert pool is not None
    conninfo = pool.conninfo if isinstance(pool.conninfo, str) else ""
    return PostgresOptions(conninfo=conninfo, display_url=describe_pool(conninfo)), pool, False


async def usable_connection_async(
    pool: AsyncConnectionPool[Any], operation: str
) -> AsyncConnection[Any]:
    """A connection from the pool, checked: one the server closed meanwhile (restart,
    terminated backend) is recognised before anything is sent on it, and replaced."""
    for _ in range((pool.max_size or 1) + 1):
        try:
            conn: AsyncConnection[Any] = await pool.getconn()
        except psycopg.Error as exc:
            error = store_unavailable(operation, exc, sent=False)
            if error is None:
                raise
            raise error from exc
        if not connection_is_stale(conn):
            return conn
        await conn.close()
        await pool.putconn(conn)
    raise StoreUnavailable(
        f"{operation}: every pooled PostgreSQL connection was found closed; retry later",
        operation=operation,
        outcome_unknown=False,
    )


def raw_cursor_async(conn: AsyncConnection[Any]) -> AsyncRawCursor[Answer]:
    cursor = AsyncRawCursor(conn, row_factory=answer_row)
    binary_lists(cursor)
    return cursor


def hot_cursor_async(conn: AsyncConnection[Any]) -> AsyncRawCursor[tuple[Any, ...]]:
    """The cursor of a hot connection: plain tuples, read by `answers_of` (a row factory
    finds the columns by name on every execution, 2 µs a statement; `answers_of` once per
    statement text)."""
    cursor = AsyncRawCursor(conn, row_factory=tuple_row)
    binary_lists(cursor)
    return cursor


async def unraced_async(run: Callable[[], Awaitable[Answer]]) -> Outcome:
    """What a single-job statement did: ``run`` it again while it reports ``raced``."""
    for _ in range(RACE_RETRIES):
        answer = await run()
        if not answer.raced:
            break
    return answer.outcome


class Hot(NamedTuple):
    conn: AsyncConnection[Any]
    cursor: AsyncRawCursor[tuple[Any, ...]]
    since: float  # when it was taken from the pool (time.monotonic())
    poller: Any  # watches conn's socket (see connection_is_stale)
    unreplicated: list[str]  # see watch_replication


def new_hot_async(conn: AsyncConnection[Any]) -> Hot:
    """A connection just taken from the pool, ready for `AsyncPostgresDriver`'s use."""
    return Hot(
        conn, hot_cursor_async(conn), time.monotonic(), socket_poller(conn), watch_replication(conn)
    )


def holder_params(
    job_id: str, owner: str, generation: int, secret_hash: str, **more: Any
) -> dict[str, Any]:
    """The parameters naming a lease holder, for the statements a holder runs."""
    return {
        "job_id": job_id,
        "owner": owner,
        "generation": generation,
        "secret_hash": secret_hash,
        **more,
    }


def submission_params(s: Submission, now: float | None) -> dict[str, Any]:
    """The parameters of submit.sql and submit_unique.sql for one submission."""
    return {
        "job_id": s.job_id,
        "queue": s.queue,
        "payload": s.payload,
        "delay": float(s.delay),
        "max_attempts": s.max_attempts,
        "priority": s.priority,
        "timeout": s.timeout,
        "unique_key": s.unique_key,
        "unique_for": s.unique_for,
        "headers": s.headers,
        "now": now,
    }


async def submit_each_async(
    cur: AsyncRawCursor[Answer],
    sql: SqlSet,
    hook_now: Callable[[], float | None],
    batch: Sequence[Submission],
) -> list[Outcome]:
    """A batch of which some jobs have unique keys (issue #18): one statement per job, in
    input order (so that of two jobs with one key the first takes it), on ``cur``, in the
    transaction it is in. A statement that answered nothing lost a race with a concurrent
    submit of its id or key after its snapshot: it runs again, and (READ COMMITTED) its new
    snapshot sees the winner, which it then answers."""
    outcomes = []
    for s in batch:
        statement = sql["submit" if s.unique_key is None else "submit_unique"]
        for _ in range(RACE_RETRIES):
            await cur.execute(statement.text, statement.args(submission_params(s, hook_now())))
            found = await cur.fetchall()
            if found:
                outcomes.append(found[0].outcome)
                break
        else:
            raise lost_race("submit")
    return outcomes


def lost_race(operation: str) -> StoreUnavailable:
    """A submit that lost RACE_RETRIES races in a row: the job is unknown to it."""
    return StoreUnavailable(
        f"{operation}: a concurrent submit of the same job id or unique key kept winning and "
        "then giving it up; try again",
        operation=operation,
        outcome_unknown=False,
    )
