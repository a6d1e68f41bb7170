"""`SQLiteTransaction`: the store's statements in one transaction with a caller's, on the
store's file (`tenure.stores.abc.Transaction`; the seam under `tenure.fence.complete_with`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ..._dbapi import DBAPITransaction, close_quietly
from ..._protocol import Outcome, Status
from ...errors import InvalidArgument, StoreUnavailable
from ._sql import (
    CLOCK,
    GET,
    STORE_ID,
    read_row,
)

T = TypeVar("T")

if TYPE_CHECKING:
    from ._driver import SQLiteDriver  # the driver makes its transactions

__all__ = ["SQLiteTransaction"]


class SQLiteTransaction:
    """`tenure.stores.abc.Transaction` over the store's file; from
    `SQLiteDriver.transaction`. Single-use."""

    def __init__(
        self,
        driver: SQLiteDriver,
        operation: str,
        conn: sqlite3.Connection | None,
        payload_limit: int,
    ) -> None:
        if driver.path == ":memory:":
            raise InvalidArgument(
                "store", "is an in-memory SQLite store, which no other connection can share"
            )
        if conn is not None and not isinstance(conn, sqlite3.Connection):
            raise InvalidArgument(
                "conn",
                f"must be a sqlite3 connection to the store's file, not {type(conn).__name__}",
            )
        self._driver = driver
        self._operation = operation
        self._own = conn is None
        self.conn: Any = conn
        self.cursor: Any = None
        self.payload_limit = payload_limit
        self._txn: DBAPITransaction | None = None

    def __repr__(self) -> str:
        return f"<SQLiteTransaction {self._operation} {self._driver.path}>"

    def __enter__(self) -> SQLiteTransaction:
        driver = self._driver
        if self._own:
            # check_same_thread=False: an async store runs each step in a worker thread.
            self.conn = sqlite3.connect(
                driver.path,
                timeout=driver.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        try:
            try:
                row = self.conn.execute(STORE_ID).fetchone()
            except sqlite3.Error:
                row = None
            if row is None or row[0] != driver.store_id:
                raise InvalidArgument("conn", "is not connected to this store's SQLite database")
            self.cursor = self.conn.cursor()
            txn = DBAPITransaction(self.conn, self.cursor, write=True)
            try:
                txn.begin()
            except sqlite3.OperationalError as exc:
                raise self._unavailable(exc) from exc
        except BaseException:
            self._release()
            raise
        self._txn = txn
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._txn is not None:
                if exc_type is None:
                    self.commit()
                else:
                    self.rollback()
        finally:
            self._release()

    def _release(self) -> None:
        if self.cursor is not None:
            close_quietly(self.cursor)
        if self._own and self.conn is not None:
            self.conn.close()
        self.cursor = self._txn = None
        self.conn = None

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        return StoreUnavailable(
            f"{self._operation}: SQLite store {self._driver.path!r} is busy or unreadable "
            f"({exc}); nothing was committed, retry later",
            operation=self._operation,
            outcome_unknown=False,
        )

    def _run(self, body: Callable[[sqlite3.Cursor, float], T]) -> T:
        """``body`` with the store time, read as a write of the store reads it."""
        if self._txn is None:
            raise InvalidArgument("transaction", "is not open: enter it first, once")
        cur = self.cursor
        try:
            now = cur.execute(CLOCK, self._driver.clock_params()).fetchone()[0]
            return body(cur, now)
        except sqlite3.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def now(self) -> float:
        return float(self._run(lambda _cur, now: now))

    def get(self, job_id: str) -> Outcome:
        def body(cur: sqlite3.Cursor, now: float) -> Outcome:
            row = read_row(cur, GET, {"job_id": job_id})
            return Outcome(Status.MISSING if row is None else Status.APPLIED, row, now)

        return self._run(body)

    def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        body = self._driver.holder_body(
            "complete", job_id, owner, generation, secret_hash, receipt=receipt, result=result
        )
        return self._run(body)

    def commit(self) -> None:
        txn, self._txn = self._txn, None
        if txn is None:
            return
        try:
            txn.commit()
        except sqlite3.Error as exc:
            txn.rollback()
            raise StoreUnavailable(
                f"{self._operation}: SQLite commit failed ({exc}); nothing was committed",
                operation=self._operation,
                outcome_unknown=False,
            ) from exc

    def rollback(self) -> None:
        txn, self._txn = self._txn, None
        if txn is not None:
            txn.rollback()
