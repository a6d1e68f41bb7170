"""`AsyncPostgresTransaction`: the store's statements in a caller's transaction (async;
``_transaction.py`` is generated from this file).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncRawCursor
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from ..._protocol import Outcome, Submission
from ...errors import InvalidArgument
from ._common import (
    Answer,
    SqlSet,
    store_unavailable,
)
from ._connection_async import (
    holder_params,
    raw_cursor_async,
    submit_each_async,
    unraced_async,
    usable_connection_async,
)

__all__ = ["AsyncPostgresTransaction"]


class AsyncPostgresTransaction:
    """`tenure.stores.abc.AsyncTransaction` over PostgreSQL; from
    `AsyncPostgresDriver.transaction`. Single-use.

    The store's statements run on a raw cursor of the same connection, with the store
    clock hook's time as the driver's own statements have it; the caller's ``cursor`` is a
    plain one (``%s`` placeholders)."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        sql: SqlSet,
        hook_now: Callable[[], float | None],
        store_id: str,
        operation: str,
        conn: AsyncConnection[Any] | None,
        payload_limit: int,
    ) -> None:
        if conn is not None and not isinstance(conn, AsyncConnection):
            raise InvalidArgument(
                "conn",
                f"must be a psycopg AsyncConnection to the store's database, "
                f"not {type(conn).__name__}",
            )
        self._pool = pool
        self._sql = sql
        self._hook_now = hook_now
        self._store_id = store_id
        self._operation = operation
        self._pooled = conn is None
        self.conn: Any = conn
        self.cursor: Any = None
        self.payload_limit = payload_limit
        self._raw: AsyncRawCursor[Answer] | None = None
        self._txn: Any = None  # psycopg's transaction block, while one is open

    def __repr__(self) -> str:
        return f"<AsyncPostgresTransaction {self._operation} {self._sql.schema}>"

    async def __aenter__(self) -> AsyncPostgresTransaction:
        if self._pooled:
            self.conn = await usable_connection_async(self._pool, self._operation)
        try:
            await self._check_store()
            self._raw = raw_cursor_async(self.conn)
            self.cursor = self.conn.cursor()
            # psycopg's own transaction block, which begins and ends the same way whether
            # the connection is in autocommit or not (and forbids commit() inside it).
            txn = self.conn.transaction()
            try:
                await txn.__aenter__()
            except psycopg.Error as exc:
                raise self._unavailable(exc, sent=False) from exc
            self._txn = txn
        except BaseException:
            await self._release()
            raise
        return self

    async def _check_store(self) -> None:
        conn = self.conn
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise InvalidArgument(
                "conn",
                f"has a transaction in progress; commit or roll back before {self._operation}, "
                "which runs (and commits) its own transaction",
            )
        try:
            async with conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(self._sql["store_id"].text)
                row = await cur.fetchone()
        except psycopg.Error:
            row = None
        finally:
            if not conn.autocommit:
                await conn.rollback()
        if row is None or row[0] != self._store_id:
            raise InvalidArgument("conn", "is not connected to this store's PostgreSQL database")

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._txn is not None:
                if exc_type is None:
                    await self.commit()
                else:
                    await self.rollback()
        finally:
            await self._release()

    async def _release(self) -> None:
        if self._raw is not None:
            await self._raw.close()
        if self.cursor is not None:
            await self.cursor.close()
        if self._pooled and self.conn is not None:
            await self._pool.putconn(self.conn)
        self.conn = self.cursor = self._raw = self._txn = None

    def _unavailable(self, exc: psycopg.Error, *, sent: bool) -> BaseException:
        error = store_unavailable(self._operation, exc, sent=sent)
        return exc if error is None else error

    async def _answer(self, name: str, params: dict[str, Any]) -> Answer:
        if self._txn is None or self._raw is None:
            raise InvalidArgument("transaction", "is not open: enter it first, once")
        statement = self._sql[name]
        params["now"] = self._hook_now()
        try:
            await self._raw.execute(statement.text, statement.args(params))
            found = await self._raw.fetchone()
        except psycopg.Error as exc:
            # Nothing of the transaction can have committed: it is still open.
            raise self._unavailable(exc, sent=False) from exc
        assert found is not None
        return found

    async def now(self) -> float:
        return (await self._answer("clock", {})).outcome.now

    async def get(self, job_id: str) -> Outcome:
        return (await self._answer("get", {"job_id": job_id})).outcome

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        params = holder_params(
            job_id, owner, generation, secret_hash, receipt=receipt, result=result
        )
        # Each statement of a READ COMMITTED transaction takes a new snapshot, so one that
        # raced a concurrent change of the job runs again, as the driver's `_one` does.
        return await unraced_async(lambda: self._answer("complete", params))

    async def submit_each(self, batch: Sequence[Submission]) -> list[Outcome]:
        """A batch with unique keys, in this transaction (see `submit_each_async`)."""
        if self._txn is None or self._raw is None:
            raise InvalidArgument("transaction", "is not open: enter it first, once")
        try:
            return await submit_each_async(self._raw, self._sql, self._hook_now, batch)
        except psycopg.Error as exc:
            raise self._unavailable(exc, sent=False) from exc

    async def commit(self) -> None:
        txn, self._txn = self._txn, None
        if txn is None:
            return
        try:
            await txn.__aexit__(None, None, None)
        except psycopg.Error as exc:
            raise self._unavailable(exc, sent=True) from exc

    async def rollback(self) -> None:
        txn, self._txn = self._txn, None
        if txn is None:
            return
        # A broken connection cannot roll back, nor has anything to: the server ends the
        # transaction with the session, and the pool replaces the connection.
        with contextlib.suppress(psycopg.Error):
            await txn.__aexit__(psycopg.Rollback, psycopg.Rollback(), None)
