"""Complete a job and commit its effect in one transaction, when the effect lands in the
lease store's own SQLite or PostgreSQL database.

::

    with tenure.fence.complete_with(store, lease) as done:
        done.cursor.execute("INSERT INTO reports (id, body) VALUES (?, ?)", (n, body))
        done.result = {"report": n}

One transaction on the store's database: it checks that ``lease`` still holds the job
(`LeaseLost` otherwise, before the block runs), runs the block's writes, then runs the
store's own conditional completion statement (the same SQL as `Store.complete`, judged by
the store's clock) and commits both, or neither: if the lease was lost meanwhile, the
writes are rolled back and `LeaseLost` is raised.

Retry-safe like `Store.complete`: when the job was already completed by this very lease
(a retry after an ambiguous failure), the block's writes are rolled back (the first
attempt's writes committed with that completion) and the guard succeeds;
``already_completed`` tells the block so, if it wants to skip work.

How it reaches the database: SQLite, a connection of its own to the store's file (or
``conn=``, yours, checked to be that store); PostgreSQL, a connection borrowed from the
store's pool (or ``conn=``, a psycopg connection to the same database). Your tables are
wherever that connection sees them (SQLite: the same file; PostgreSQL: the connection's
``search_path``, tenure's own tables are in the store's schema).
"""

from __future__ import annotations

import logging
import sqlite3
from types import TracebackType
from typing import Any

from .._protocol import (
    JobRow,
    Outcome,
    Status,
    check_lease,
    ended_by,
    hash_secret,
    is_repeat,
    lease_lost,
    settle_receipt,
)
from .._validate import DEFAULT_PAYLOAD_LIMIT, encode_json
from ..errors import InvalidArgument, StoreUnavailable
from ..models import Lease
from ..stores._resources import load_text
from ._loss import refuse_if_lost
from ._sql import _close, _Transaction, _transaction_status

__all__ = ["CompletionGuard", "complete_with"]

log = logging.getLogger("tenure")

_SQLITE = "tenure.stores.sqlite"
_RACE_RETRIES = 5


class _Database:
    """The store's database as seen by one guard: a connection and the store's SQL."""

    kind = ""
    conn: Any = None

    def open(self, conn: Any) -> None:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def job(self, cur: Any, job_id: str) -> Outcome:
        raise NotImplementedError

    def complete(
        self, cur: Any, lease: Lease, secret_hash: str, receipt: str, result: str | None
    ) -> Outcome:
        raise NotImplementedError

    def store_error(self, exc: BaseException, sent: bool) -> StoreUnavailable | None:
        return None


class _SQLiteDatabase(_Database):
    kind = "sqlite"

    def __init__(self, driver: Any, store_id: str) -> None:
        self._path = str(driver.path)
        self._driver = driver  # for the store's clock readings (host clocks, or a test hook's)
        self._store_id = store_id
        self._own = False
        if self._path == ":memory:":
            raise InvalidArgument(
                "store", "is an in-memory SQLite store, which no other connection can share"
            )

    def open(self, conn: Any) -> None:
        if conn is None:
            conn = sqlite3.connect(self._path, timeout=30.0, isolation_level=None)
            self._own = True
        elif not isinstance(conn, sqlite3.Connection):
            raise InvalidArgument(
                "conn",
                f"must be a sqlite3 connection to the store's file, not {type(conn).__name__}",
            )
        self.conn = conn
        try:
            row = conn.execute("SELECT value FROM tenure_meta WHERE key = 'store_id'").fetchone()
        except sqlite3.Error:
            row = None
        if row is None or row[0] != self._store_id:
            self.release()
            raise InvalidArgument("conn", "is not connected to this store's SQLite database")

    def release(self) -> None:
        if self._own and self.conn is not None:
            self.conn.close()
        self.conn = None

    def _now(self, cur: Any) -> float:
        clock_sql = load_text(_SQLITE, "sql/clock.sql")
        found = cur.execute(clock_sql, self._driver._clock_params())
        return float(found.fetchone()[0])

    def job(self, cur: Any, job_id: str) -> Outcome:
        now = self._now(cur)
        row = cur.execute(load_text(_SQLITE, "sql/get.sql"), {"job_id": job_id}).fetchone()
        if row is None:
            return Outcome(Status.MISSING, None, now)
        return Outcome(Status.MISSED, JobRow._make(row), now)

    def complete(
        self, cur: Any, lease: Lease, secret_hash: str, receipt: str, result: str | None
    ) -> Outcome:
        now = self._now(cur)
        params = {
            "job_id": lease.job_id,
            "owner": lease.owner,
            "generation": lease.generation,
            "secret_hash": secret_hash,
            "receipt": receipt,
            "result": result,
            "now": now,
        }
        row = cur.execute(load_text(_SQLITE, "sql/complete.sql"), params).fetchone()
        if row is not None:
            return Outcome(Status.APPLIED, JobRow._make(row), now)
        return self.job(cur, lease.job_id)

    def store_error(self, exc: BaseException, sent: bool) -> StoreUnavailable | None:
        if isinstance(exc, sqlite3.OperationalError):
            return StoreUnavailable(
                f"complete_with: SQLite store {self._path!r} is busy or unreadable ({exc}); "
                "nothing was committed, retry later",
                operation="complete",
                outcome_unknown=False,
            )
        return None


class _PostgresDatabase(_Database):
    kind = "postgresql"

    def __init__(self, driver: Any, store_id: str) -> None:
        from ..stores.postgres._common import render, sql_text

        self._driver = driver
        self._store_id = store_id
        self._schema = driver.schema
        self._sql = {
            name: render(sql_text(name), driver.schema).encode()
            for name in ("get", "complete", "store_id")
        }
        self._pooled = False

    def open(self, conn: Any) -> None:
        import psycopg

        from ..stores.postgres._common import connection_is_stale, store_unavailable

        if conn is None:
            pool = self._driver._pool
            for _ in range((pool.max_size or 1) + 1):
                try:
                    conn = pool.getconn()
                except psycopg.Error as exc:
                    error = store_unavailable("complete", exc, sent=False)
                    if error is None:
                        raise
                    raise error from exc
                if not connection_is_stale(conn):
                    break
                conn.close()
                pool.putconn(conn)
                conn = None
            if conn is None:
                raise StoreUnavailable(
                    "complete: every pooled PostgreSQL connection was found closed",
                    operation="complete",
                    outcome_unknown=False,
                )
            self._pooled = True
        elif not isinstance(conn, psycopg.Connection):
            raise InvalidArgument(
                "conn",
                f"must be a psycopg Connection to the store's database, not {type(conn).__name__}",
            )
        self.conn = conn
        if _transaction_status(conn) != 0:
            return  # _Transaction refuses it with a clear message
        try:
            with conn.cursor() as cur:
                cur.execute(self._sql["store_id"])
                row = cur.fetchone()
        except psycopg.Error:
            row = None
        finally:
            if not conn.autocommit:
                conn.rollback()
        if row is None or row[0] != self._store_id:
            self.release()
            raise InvalidArgument("conn", "is not connected to this store's PostgreSQL database")

    def release(self) -> None:
        if self._pooled and self.conn is not None:
            self._driver._pool.putconn(self.conn)
        self.conn = None

    def _params(self) -> dict[str, Any]:
        return {"now": self._driver._now()}

    def job(self, cur: Any, job_id: str) -> Outcome:
        from ..stores.postgres._common import answer_row

        cur.execute(self._sql["get"], {"job_id": job_id, **self._params()})
        found = answer_row(cur)(cur.fetchone()).outcome
        if found.row is None:
            return found
        return found._replace(status=Status.MISSED)

    def complete(
        self, cur: Any, lease: Lease, secret_hash: str, receipt: str, result: str | None
    ) -> Outcome:
        from ..stores.postgres._common import answer_row

        params = {
            "job_id": lease.job_id,
            "owner": lease.owner,
            "generation": lease.generation,
            "secret_hash": secret_hash,
            "receipt": receipt,
            "result": result,
        }
        for _ in range(_RACE_RETRIES):
            # Each statement of a READ COMMITTED transaction sees a new snapshot: a run that
            # raced a concurrent change of the job is repeated, as the driver does.
            cur.execute(self._sql["complete"], {**params, **self._params()})
            answer = answer_row(cur)(cur.fetchone())
            if not answer.raced:
                break
        return answer.outcome

    def store_error(self, exc: BaseException, sent: bool) -> StoreUnavailable | None:
        import psycopg

        from ..stores.postgres._common import store_unavailable

        if isinstance(exc, psycopg.Error):
            return store_unavailable("complete", exc, sent=sent)
        return None


def _database(store: object) -> tuple[_Database, str, int]:
    from .._store import Store

    if not isinstance(store, Store):
        raise InvalidArgument(
            "store",
            "must be a tenure.Store (from tenure.connect) of a SQLite or PostgreSQL store, "
            f"not {type(store).__name__}",
        )
    driver = store._driver
    limit = int(getattr(store, "_payload_limit", DEFAULT_PAYLOAD_LIMIT))
    module = type(driver).__module__
    if module.startswith("tenure.stores.sqlite"):
        return _SQLiteDatabase(driver, store.store_id), store.store_id, limit
    if module.startswith("tenure.stores.postgres"):
        return _PostgresDatabase(driver, store.store_id), store.store_id, limit
    raise InvalidArgument(
        "store",
        f"is a {store.url.partition(':')[0]} store; complete_with needs the effect and the job "
        "in one SQL database (SQLite or PostgreSQL). Elsewhere, fence the effect "
        "(sql_fence/apply_once) and then call store.complete",
    )


def _holds(row: JobRow | None, lease: Lease, secret_hash: str, now: float) -> bool:
    return (
        row is not None
        and row.state == "leased"
        and row.owner == lease.owner
        and row.generation == lease.generation
        and row.secret_hash == secret_hash
        and row.lease_until is not None
        and row.lease_until > now
    )


class CompletionGuard:
    """One complete-with-effect transaction; create it with `complete_with`.

    In the block: ``cursor`` (a cursor of the store database's transaction) for your
    writes, ``result`` (settable) for the job's result, ``already_completed`` (True when a
    retry finds the job completed by this very lease: your writes will be rolled back).
    Do not commit or roll back the connection in the block. Single-use.
    """

    def __init__(self, db: _Database, lease: Lease, result: Any, limit: int, conn: Any) -> None:
        self.lease = lease
        self.result = result
        self.already_completed = False
        self.cursor: Any = None
        self._db = db
        self._limit = limit
        self._conn = conn
        self._secret_hash = hash_secret(lease.secret)
        self._receipt = settle_receipt(self._secret_hash, "complete")
        self._txn: _Transaction | None = None
        self._used = False

    def __repr__(self) -> str:
        return f"<CompletionGuard {self.lease.token} {self._db.kind}>"

    @property
    def conn(self) -> Any:
        """The connection the transaction runs on."""
        return self._db.conn

    def __enter__(self) -> CompletionGuard:
        if self._used:
            raise InvalidArgument("guard", "is single-use: call complete_with() again")
        self._used = True
        lease = self.lease
        encode_json("result", self.result, self._limit)  # bad results fail before any I/O
        refuse_if_lost(lease.token)
        db = self._db
        db.open(self._conn)
        cur = db.conn.cursor()
        txn = _Transaction(db.conn, cur, write=True)
        try:
            try:
                txn.begin()
            except BaseException:
                _close(cur)
                raise
            try:
                found = db.job(cur, lease.job_id)
            except BaseException as exc:
                txn.rollback()
                _close(cur)
                raise self._translate(exc, sent=False) from exc
        except BaseException:
            db.release()
            raise
        if not _holds(found.row, lease, self._secret_hash, found.now):
            # A repeat of a completion that took effect, whatever result it recorded: the
            # block's writes will be rolled back (the first attempt's committed with it).
            if ended_by("complete", found.row, lease.generation, self._receipt):
                self.already_completed = True
            else:
                txn.rollback()
                _close(cur)
                db.release()
                raise lease_lost("complete", lease, found, self._secret_hash)
        self.cursor, self._txn = cur, txn
        return self

    def _translate(self, exc: BaseException, *, sent: bool) -> BaseException:
        error = self._db.store_error(exc, sent)
        return exc if error is None else error

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        cur, txn = self.cursor, self._txn
        assert cur is not None, "__exit__ without a successful __enter__"
        assert txn is not None
        self.cursor = self._txn = None
        try:
            if exc_type is not None or self.already_completed:
                txn.rollback()
                return
            self._finish(cur, txn)
        finally:
            _close(cur)
            self._db.release()

    def _finish(self, cur: Any, txn: _Transaction) -> None:
        lease = self.lease
        try:
            result = encode_json("result", self.result, self._limit)
            refuse_if_lost(lease.token)  # lost while the block ran: do not commit
            try:
                done = self._db.complete(cur, lease, self._secret_hash, self._receipt, result)
            except BaseException as exc:
                raise self._translate(exc, sent=False) from exc
        except BaseException:
            txn.rollback()
            raise
        if done.status != Status.APPLIED:
            txn.rollback()
            if is_repeat("complete", done.row, lease.generation, self._receipt, result):
                self.already_completed = True  # a concurrent retry of ours committed first
                return
            raise lease_lost("complete", lease, done, self._secret_hash)
        try:
            txn.commit()
        except BaseException as exc:
            txn.rollback()
            error = self._translate(exc, sent=True)
            if isinstance(error, StoreUnavailable):
                raise StoreUnavailable(
                    f"complete_with: the commit of job {lease.job_id!r} failed ({exc}); "
                    + (
                        "it may or may not have taken effect: retry complete_with with the "
                        "same lease (a completion that took effect is recognised)"
                        if error.outcome_unknown
                        else "nothing was committed"
                    ),
                    operation="complete",
                    outcome_unknown=error.outcome_unknown,
                ) from exc
            raise
        log.info(
            "job completed with its effect",
            extra={"job_id": lease.job_id, "generation": lease.generation, "owner": lease.owner},
        )


def complete_with(
    store: Any, lease: Lease, result: Any = None, *, conn: Any = None
) -> CompletionGuard:
    """Run the block's writes and complete ``lease``'s job in one transaction of the store's
    own database (SQLite or PostgreSQL stores; a sync `tenure.Store`)::

        with tenure.fence.complete_with(store, lease, result) as done:
            done.cursor.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?", ...)

    Both commit, or neither: `LeaseLost` (before the block, or after it with the writes
    rolled back) when the lease no longer holds the job by the store's clock, or when the
    worker runtime marked it lost. Repeating a completion that took effect succeeds and
    changes nothing (``already_completed``). ``conn``: your own connection to the store's
    database (idle; sqlite3 or psycopg); by default the guard opens or borrows one.
    """
    db, store_id, limit = _database(store)
    return CompletionGuard(db, check_lease(lease, store_id), result, limit, conn)
