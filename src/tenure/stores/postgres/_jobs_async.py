"""The PostgreSQL driver's enqueue-and-wait operations (issue #17), async (``_jobs.py`` is
generated from this file): batch submit in one statement, submit on the caller's own
connection (in its transaction), waiting by LISTEN/NOTIFY, and listing in pages. A mixin
of `AsyncPostgresDriver`, which provides the connections and statements."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import AsyncConnection, AsyncRawCursor

from ..._concurrency import pause_async
from ..._protocol import UNFINISHED_STATES, JobFilter, JobRow, Outcome, Status, Submission
from ...errors import InvalidArgument
from ._common import SqlSet, Statement, connection_is_stale, store_unavailable
from ._connection_async import (
    RACE_RETRIES,
    Hot,
    lost_race,
    raw_cursor_async,
    submission_params,
    submit_each_async,
)

if TYPE_CHECKING:
    from ._common import Answer
    from ._transaction_async import AsyncPostgresTransaction

__all__ = ["AsyncJobsMixin"]

# How soon a wait first looks again at a job whose writer was in flight (wait_get.sql).
_LOCKED_RETRY = 0.005
# How often a wait without LISTEN (behind PgBouncer in transaction mode) looks at its job.
_POLL = 0.05


def submit_params(batch: Sequence[Submission], now: float | None) -> dict[str, Any]:
    return {
        "job_ids": [s.job_id for s in batch],
        "queues": [s.queue for s in batch],
        "payloads": [s.payload for s in batch],
        "delays": [float(s.delay) for s in batch],
        "max_attempts": [s.max_attempts for s in batch],
        "now": now,
        "priorities": [s.priority for s in batch],
        "timeouts": [s.timeout for s in batch],
        "headers": [s.headers for s in batch],
    }


def psycopg_connection(conn: Any) -> Any:
    """The psycopg connection under a SQLAlchemy ``Session`` or ``Connection`` (in the
    transaction SQLAlchemy has begun on it, or begins now), or ``conn`` itself."""
    if callable(getattr(conn, "get_bind", None)) and callable(getattr(conn, "connection", None)):
        conn = conn.connection()  # a Session: its Connection, in the session's transaction
    fairy = getattr(conn, "connection", None)  # a SQLAlchemy Connection's DB-API connection
    driver_connection = getattr(fairy, "driver_connection", None)
    return conn if driver_connection is None else driver_connection


async def joined_connection_async(conn: Any) -> Any:
    """The psycopg connection of ``conn``: under a session or connection of SQLAlchemy's
    asyncio extension (in the transaction SQLAlchemy has begun on it, or begins now), or
    what `psycopg_connection` finds (a plain session or connection, or psycopg's own)."""
    if hasattr(conn, "sync_session"):  # the asyncio extension's session
        conn = await conn.connection()
    raw = getattr(conn, "get_raw_connection", None)
    if callable(raw) and hasattr(conn, "sync_connection"):  # ... and its connection
        fairy = await raw()
        return getattr(fairy, "driver_connection", fairy)
    return psycopg_connection(conn)


class AsyncJobsMixin:
    """`submit`, `submit_many`, `submit_joined`, `wait_job` and `list_jobs` of
    `AsyncPostgresDriver`."""

    if TYPE_CHECKING:
        store_id: str
        _sql: SqlSet
        _listen: bool
        _closed: bool
        _listeners: list[AsyncConnection[Any]]
        _waiters: set[AsyncConnection[Any]]

        def _now(self) -> float | None: ...

        async def _rows(
            self, operation: str, statement: Statement, params: dict[str, Any]
        ) -> list[Answer]: ...

        async def _checkout(self, operation: str) -> Hot: ...

        async def _checkin(self, hot: Hot) -> None: ...

        async def _listener(self) -> AsyncConnection[Any]: ...

        async def get(self, job_id: str) -> Outcome: ...

        def transaction(
            self, operation: str, conn: AsyncConnection[Any] | None, payload_limit: int
        ) -> AsyncPostgresTransaction: ...

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
        if unique_key is not None:
            keyed = Submission(
                job_id,
                queue,
                payload,
                delay,
                max_attempts,
                priority,
                timeout,
                unique_key,
                unique_for,
                headers,
            )
            return await self._submit_unique(keyed)
        params = {
            "job_id": job_id,
            "queue": queue,
            "payload": payload,
            "delay": delay,
            "max_attempts": max_attempts,
            "now": self._now(),
            "priority": priority,
            "timeout": timeout,
            "headers": headers,
        }
        for _ in range(RACE_RETRIES):
            rows = await self._rows("submit", self._sql["submit"], params)
            if rows:
                return rows[0].outcome
            # A concurrent submit of the same id won after this statement's snapshot was
            # taken: answer with its job, unless a purge or delete took that job meanwhile
            # (then there is none, and the submit runs again to create it).
            existing = await self.get(job_id)
            if existing.row is not None:
                return Outcome(Status.MISSED, existing.row, existing.now)
        raise lost_race("submit")

    async def _submit_unique(self, keyed: Submission) -> Outcome:
        # submit_unique.sql answers nothing when it lost a race with a concurrent submit of
        # its id or key: run again, its new snapshot sees the winner (see that file).
        for _ in range(RACE_RETRIES):
            params = submission_params(keyed, self._now())
            rows = await self._rows("submit", self._sql["submit_unique"], params)
            if rows:
                return rows[0].outcome
        raise lost_race("submit")

    async def submit_many(self, submissions: Sequence[Submission]) -> list[Outcome]:
        """One statement (``submit_many.sql``), answers in input order. A batch with unique
        keys: one statement per job, in one transaction (`submit_each_async`)."""
        if any(s.unique_key is not None for s in submissions):
            async with self.transaction("submit_many", None, 0) as txn:
                return await txn.submit_each(submissions)
        params = submit_params(submissions, self._now())
        rows = await self._rows("submit_many", self._sql["submit_many"], params)
        return await self._in_order(submissions, [row.outcome for row in rows])

    async def _in_order(
        self, submissions: Sequence[Submission], outcomes: list[Outcome]
    ) -> list[Outcome]:
        found = {o.row.job_id: o for o in outcomes if o.row is not None}
        answers = []
        for submission in submissions:
            outcome = found.get(submission.job_id)
            if outcome is None:
                # A concurrent submit of this id won after the statement's snapshot: its
                # job, or (purged or deleted meanwhile) this job submitted again alone.
                existing = await self.get(submission.job_id)
                outcome = Outcome(Status.MISSED, existing.row, existing.now)
                if existing.row is None:
                    outcome = await self._submit_alone(submission)
            answers.append(outcome)
        return answers

    async def _submit_alone(self, s: Submission) -> Outcome:
        args, options = s.driver_args()
        return await self.submit(*args, **options)

    async def submit_joined(self, conn: Any, submissions: Sequence[Submission]) -> list[Outcome]:
        """``submit_many.sql`` on the caller's psycopg connection (or SQLAlchemy session),
        in the transaction it is in; nothing is committed here."""
        target = await joined_connection_async(conn)
        if not isinstance(target, AsyncConnection):
            raise InvalidArgument(
                "conn",
                f"must be a psycopg.{AsyncConnection.__name__} to the store's database (a sync "
                "store takes a sync connection, an async store an async one) or a SQLAlchemy "
                f"Session (AsyncSession for an async store), not {type(conn).__name__}",
            )
        cur = raw_cursor_async(target)
        try:
            checked = await target.execute(self._sql["store_id"].text)
            found = await checked.fetchone()
            if found is None or found[0] != self.store_id:
                raise InvalidArgument("conn", "is not connected to this store's database")
            if any(s.unique_key is not None for s in submissions):
                return await submit_each_async(cur, self._sql, self._now, submissions)
            statement = self._sql["submit_many"]
            params = submit_params(submissions, self._now())
            await cur.execute(statement.text, statement.args(params))
            rows = await cur.fetchall()
        except psycopg.Error as exc:
            error = store_unavailable("submit", exc, sent=True)
            if error is None:
                raise InvalidArgument(
                    "conn",
                    f"the submit failed on your connection ({exc}); is it connected to the "
                    "store's database, and its transaction not aborted? Roll back and retry",
                ) from exc
            raise error from exc
        finally:
            await cur.close()
        return await self._in_order(submissions, [row.outcome for row in rows])

    async def wait_job(self, job_id: str, timeout: float) -> Outcome:
        deadline = time.monotonic() + timeout
        if not self._listen:
            while True:
                outcome = await self.get(job_id)
                remaining = deadline - time.monotonic()
                if _finished(outcome) or remaining <= 0 or self._closed:
                    return outcome
                await pause_async(min(_POLL, remaining))
        conn = await self._listener()
        reusable = False
        params = {"waiter": uuid.uuid4().hex, "job_id": job_id, "ttl": timeout + 60.0}
        self._waiters.add(conn)
        try:
            cur = raw_cursor_async(conn)
            # LISTEN and register first, then look: a completion in between is seen by one
            # or the other (wait_get.sql waits for one already past the trigger).
            await cur.execute(self._sql["listen_ended"].text)
            register = self._sql["wait_register"]
            await cur.execute(register.text, register.args(params))
            outcome = await self._waited(cur, job_id, deadline)
            while not (_finished(outcome) or self._closed):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                woken = False
                async for notify in conn.notifies(timeout=remaining, stop_after=1):
                    woken = notify.payload == job_id
                if woken:
                    outcome = await self._waited(cur, job_id, deadline)
            unregister = self._sql["wait_unregister"]
            await cur.execute(unregister.text, unregister.args(params))
            await cur.execute(self._sql["unlisten"].text)
            reusable = True
            return outcome
        except psycopg.Error as exc:
            error = store_unavailable("wait", exc, sent=False)
            if error is None:
                raise
            raise error from exc
        finally:
            self._waiters.discard(conn)
            if reusable and not self._closed and not connection_is_stale(conn):
                self._listeners.append(conn)
            else:
                # A registration left behind (an error, a cancelled wait) expires by itself.
                await conn.close()

    async def _waited(self, cur: AsyncRawCursor[Answer], job_id: str, deadline: float) -> Outcome:
        statement = self._sql["wait_get"]
        backoff = _LOCKED_RETRY
        while True:
            try:
                await cur.execute(
                    statement.text, statement.args({"job_id": job_id, "now": self._now()})
                )
            except psycopg.errors.LockNotAvailable:
                # A writer of the job is in flight: look again when it has committed, or,
                # at the deadline, answer the job as last committed.
                if time.monotonic() >= deadline:
                    return await self.get(job_id)
                await pause_async(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, 0.1)  # a long transaction: look less often
                continue
            answer = await cur.fetchone()
            assert answer is not None
            return answer.outcome

    async def list_jobs(self, selection: JobFilter) -> tuple[float, list[JobRow], int | None]:
        statement = self._sql["list_page"]
        params = {
            "after": -1 if selection.after is None else selection.after,
            "queue": selection.queue,
            "state": selection.state,
            "owner": selection.owner,
            "older_than": selection.older_than,
            "limit": selection.limit + 1,  # one more: is there a next page?
            "now": self._now(),
        }
        hot = await self._checkout("jobs")
        try:
            await hot.cursor.execute(statement.text, statement.args(params))
            found = await hot.cursor.fetchall()
            if not hot.conn.autocommit:
                await hot.conn.commit()
        except psycopg.Error as exc:
            await hot.conn.close()
            error = store_unavailable("jobs", exc, sent=True)
            if error is None:
                raise
            raise error from exc
        finally:
            await self._checkin(hot)
        now = float(found[0][0])
        page = [values for values in found if values[1] is not None][: selection.limit]
        rows = [JobRow._make(values[1:-1]) for values in page]
        more = sum(1 for values in found if values[1] is not None) > selection.limit
        return now, rows, int(page[-1][-1]) if more else None


def _finished(outcome: Outcome) -> bool:
    return outcome.row is None or outcome.row.state not in UNFINISHED_STATES
