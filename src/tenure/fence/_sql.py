"""The SQL fence: a fence table in the destination database, advanced in the same
transaction as the guarded writes.

The table ``tenure_fence(job_id, generation, updated_at)`` holds, per job, the highest
generation this database has accepted a write for. A guard opens one transaction, advances
that row with a single atomic upsert that only moves the generation forward (or keeps it),
runs the caller's writes and commits; when the presented generation is lower than the
highest seen, the upsert changes nothing, the guard rolls back and raises `StaleToken`
before any of the caller's writes run.

Connections: `sqlite3` (any isolation mode) and DB-API 2 drivers with the ``qmark`` or
``format`` parameter style (``pyformat`` drivers such as psycopg accept ``format``).
The SQL lives in ``sql/*.sql`` (written with ``?`` placeholders), with per-dialect files in
``sql/<dialect>/`` where the dialects differ.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from functools import cache
from importlib.resources import files
from types import TracebackType
from typing import Any

from .._dbapi import DBAPITransaction, close_quietly, transaction_status
from ..errors import InvalidArgument, StaleToken
from ..models import FencingToken
from ._loss import refuse_if_lost
from ._signed import Keyring
from ._token import fencing_token

__all__ = [
    "DIALECTS",
    "FENCE_TABLE",
    "LEDGER_TABLE",
    "PARAMSTYLES",
    "QUERIES",
    "advance",
    "advance_fence",
    "check_connection",
    "create_fence_table",
    "dialect_of",
    "ensure_tables",
    "Executor",
    "fence_generation",
    "fence_statement",
    "joined_executor",
    "paramstyle_of",
    "sql_fence",
    "SQLFenceGuard",
]

log = logging.getLogger("tenure")

FENCE_TABLE = "tenure_fence"
LEDGER_TABLE = "tenure_effects"
DIALECTS = ("sqlite", "postgresql")
PARAMSTYLES = ("qmark", "format")

_PACKAGE = __package__ or "tenure.fence"
# Top-level module of a connection's class -> the SQL dialect it speaks.
_DIALECT_OF_MODULE = {
    "sqlite3": "sqlite",
    "pysqlite3": "sqlite",
    "psycopg": "postgresql",
    "psycopg2": "postgresql",
}
# A driver module's DB-API ``paramstyle`` -> the placeholder style we write.
_PLACEHOLDERS_OF_PARAMSTYLE = {"qmark": "qmark", "format": "format", "pyformat": "format"}


@cache
def fence_statement(dialect: str, name: str, paramstyle: str) -> str:
    """The text of ``sql/<dialect>/<name>.sql`` (else ``sql/<name>.sql``) for a driver."""
    root = files(_PACKAGE).joinpath("sql")
    source = root.joinpath(dialect).joinpath(f"{name}.sql")
    if not source.is_file():
        source = root.joinpath(f"{name}.sql")
    lines = source.read_text(encoding="utf-8").splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()
    if paramstyle == "format":
        # The files use no '%' and '?' only as placeholders (comments are stripped above).
        assert "%" not in text, f"{source}: '%' would need escaping for format-style drivers"
        text = text.replace("?", "%s")
    elif paramstyle == "named":  # SQLAlchemy text(): ?, ?, ... -> :p0, :p1, ...
        parts = text.split("?")
        text = parts[0] + "".join(f":p{n}{part}" for n, part in enumerate(parts[1:]))
    return text


def check_connection(conn: object) -> None:
    for method in ("cursor", "commit", "rollback"):
        if not callable(getattr(conn, method, None)):
            raise InvalidArgument(
                "conn",
                f"must be a DB-API 2 connection (with .cursor(), .commit() and .rollback()), "
                f"not {type(conn).__name__}",
            )


def _driver_module(conn: object) -> str:
    return type(conn).__module__.partition(".")[0]


def dialect_of(conn: object, dialect: object) -> str:
    if dialect is None:
        if isinstance(conn, sqlite3.Connection):
            return "sqlite"
        found = _DIALECT_OF_MODULE.get(_driver_module(conn))
        if found is None:
            raise InvalidArgument(
                "dialect",
                f"cannot tell which SQL a {type(conn).__module__}.{type(conn).__name__} "
                f"connection speaks; pass dialect= one of {', '.join(DIALECTS)}",
            )
        return found
    if dialect not in DIALECTS:
        raise InvalidArgument("dialect", f"must be one of {', '.join(DIALECTS)}, got {dialect!r}")
    return str(dialect)


def paramstyle_of(conn: object, paramstyle: object) -> str:
    if paramstyle is None:
        if isinstance(conn, sqlite3.Connection):
            return "qmark"
        module = sys.modules.get(_driver_module(conn))
        declared = getattr(module, "paramstyle", None)
        found = _PLACEHOLDERS_OF_PARAMSTYLE.get(declared) if isinstance(declared, str) else None
        if found is None:
            raise InvalidArgument(
                "paramstyle",
                f"cannot use the driver's paramstyle ({declared!r}); pass paramstyle= "
                f"one of {', '.join(PARAMSTYLES)} if the driver accepts it",
            )
        return found
    if paramstyle not in PARAMSTYLES:
        raise InvalidArgument(
            "paramstyle", f"must be one of {', '.join(PARAMSTYLES)}, got {paramstyle!r}"
        )
    return str(paramstyle)


# The statements (sql/*.sql) that answer rows; the others only change them.
QUERIES = frozenset({"exists", "read", "ledger_exists", "ledger_read"})


class Executor:
    """Runs the fence's statements on one cursor (DB-API) in the caller's transaction.

    ``run`` answers ``(rowcount, first row or None)``. The SQLAlchemy adapter subclasses it.
    """

    def __init__(self, cur: Any, dialect: str, paramstyle: str) -> None:
        self.cur = cur
        self.dialect = dialect
        self.paramstyle = paramstyle

    def run(self, name: str, params: tuple[Any, ...] = ()) -> tuple[int, Any]:
        cur = self.cur
        cur.execute(fence_statement(self.dialect, name, self.paramstyle), params)
        row = cur.fetchone() if name in QUERIES else None
        return int(cur.rowcount), row

    def close(self) -> None:
        close_quietly(self.cur)


def ensure_tables(ex: Executor, *, ledger: bool = False) -> None:
    """Create the fence table (and with ``ledger`` the effect ledger) if missing."""
    names = ("", "ledger_") if ledger else ("",)
    for prefix in names:
        _, found = ex.run(f"{prefix}exists")
        if found is None:
            ex.run(f"{prefix}create")


def read_generation(ex: Executor, job_id: str) -> int | None:
    _, row = ex.run("read", (job_id,))
    return None if row is None else int(row[0])


def advance(ex: Executor, token: FencingToken, strict: bool) -> None:
    """Advance the job's fence row to the token's generation in the transaction ``ex``
    runs in, or raise `StaleToken` (the caller rolls back). The table must exist."""
    changed, _ = ex.run("advance_strict" if strict else "advance", (token.job_id, token.generation))
    if changed == 1:
        return
    highest = read_generation(ex, token.job_id)
    if changed == -1 and not strict and highest == token.generation:
        return  # a driver that does not count rows: the row now holds our generation
    raise _stale(token, highest, strict)


def _stale(token: FencingToken, highest: int | None, strict: bool) -> StaleToken:
    job_id, generation = token.job_id, token.generation
    if highest is None:
        why = "the fence refused it"
    elif strict and highest == generation:
        why = (
            f"this destination already accepted generation {highest} for that job and the "
            "fence is strict (one transaction per generation)"
        )
    else:
        why = (
            f"this destination already accepted generation {highest} for that job, so "
            "another worker has taken it over since this lease was granted"
        )
    log.warning(
        "fence: stale token refused",
        extra={"job_id": job_id, "generation": generation, "highest_seen": highest},
    )
    return StaleToken(
        f"fenced write for job {job_id!r} refused: its token has generation {generation} but "
        f"{why}. Nothing was written. Stop working on this job and do not retry with this "
        "token; the current lease holder's writes stand.",
        job_id=job_id,
        generation=generation,
        highest_seen=highest,
    )


class SQLFenceGuard:
    """One fenced transaction; create it with `sql_fence` and use it in a ``with`` block.

    ``__enter__`` begins the transaction, creates the fence table if it is missing, advances
    the job's fence row and returns a cursor for the guarded writes; a stale token raises
    `StaleToken` there, after rolling back, so the block never runs. Leaving the block
    normally commits the fence row and the writes together; an exception rolls both back.
    Do not commit or roll back the connection inside the block. A guard is single-use.
    """

    def __init__(
        self,
        conn: Any,
        token: FencingToken,
        *,
        dialect: str,
        paramstyle: str,
        strict: bool,
        check_loss: bool = True,
    ) -> None:
        self.conn = conn
        self.token = token
        self.dialect = dialect
        self.paramstyle = paramstyle
        self.strict = strict
        # False for destinations (a service fencing what it receives): the worker's loss
        # registry is about this process's own leases, not about tokens it receives.
        self._check_loss = check_loss
        self._used = False
        self._cur: Any = None
        self._txn: DBAPITransaction | None = None

    def __repr__(self) -> str:
        return f"<SQLFenceGuard {self.token} {self.dialect}{' strict' if self.strict else ''}>"

    def __enter__(self) -> Any:
        if self._used:
            raise InvalidArgument(
                "guard", "is single-use: call sql_fence() again for another transaction"
            )
        self._used = True
        if self._check_loss:
            refuse_if_lost(self.token)
        cur = self.conn.cursor()
        txn = DBAPITransaction(self.conn, cur, write=True)
        try:
            txn.begin()
        except BaseException:
            close_quietly(cur)
            raise
        try:
            self._advance(cur)
        except BaseException:
            txn.rollback()
            close_quietly(cur)
            raise
        self._cur, self._txn = cur, txn
        return cur

    def _advance(self, cur: Any) -> None:
        ex = Executor(cur, self.dialect, self.paramstyle)
        ensure_tables(ex)
        advance(ex, self.token, self.strict)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        cur, txn = self._cur, self._txn
        assert cur is not None, "__exit__ without a successful __enter__"
        assert txn is not None
        self._cur = self._txn = None
        try:
            if exc_type is None:
                try:
                    if self._check_loss:  # lost while the block ran: do not commit
                        refuse_if_lost(self.token)
                    txn.commit()
                except BaseException:
                    txn.rollback()
                    raise
            else:
                txn.rollback()
        finally:
            close_quietly(cur)


def sql_fence(
    conn: Any,
    token: object,
    *,
    dialect: str | None = None,
    paramstyle: str | None = None,
    strict: bool = False,
    keyring: Keyring | None = None,
) -> SQLFenceGuard:
    """Guard writes to ``conn`` with ``token`` (a `FencingToken`, or a `Lease`)::

        with tenure.fence.sql_fence(conn, lease.token) as cur:
            cur.execute("UPDATE reports SET body = ? WHERE id = ?", (body, report_id))

    In one transaction: the job's row of the fence table is advanced to the token's
    generation, the block's writes run, and everything commits. A token older than the
    highest generation this database accepted for the job raises `StaleToken` (rolled back,
    the block does not run). The same generation again is accepted (several writes of one
    run) unless ``strict=True``.

    ``conn`` must have no transaction in progress. ``dialect`` (``sqlite`` or
    ``postgresql``) and ``paramstyle`` (``qmark`` or ``format``) are found from the
    connection's driver when not given. Errors of the database itself (locked, connection
    lost) propagate unchanged after a rollback.

    ``keyring``: the token must then be a `SignedToken` that verifies (checked before any
    I/O; a forged or unsigned token raises `StaleToken` and nothing is touched). A lease the
    worker runtime marked lost raises `LeaseLost`, at entry and again before the commit.
    """
    check_connection(conn)
    fenced = fencing_token(token, keyring=keyring)
    if not isinstance(strict, bool):
        raise InvalidArgument("strict", f"must be True or False, not {type(strict).__name__}")
    return SQLFenceGuard(
        conn,
        fenced,
        dialect=dialect_of(conn, dialect),
        paramstyle=paramstyle_of(conn, paramstyle),
        strict=strict,
    )


def _is_sqlalchemy(conn: object) -> bool:
    return type(conn).__module__.startswith("sqlalchemy.")


def joined_executor(
    conn: Any, dialect: str | None = None, paramstyle: str | None = None
) -> Executor:
    """An executor for statements inside the transaction ``conn`` has open (or opens
    implicitly with its next statement): a DB-API connection, or a SQLAlchemy ``Session``
    or ``Connection``. A connection in autocommit with no transaction open is refused: the
    fence row and the caller's writes would not commit together."""
    if _is_sqlalchemy(conn):
        from ._alchemy import alchemy_executor

        return alchemy_executor(conn, dialect)
    check_connection(conn)
    dialect_, style = dialect_of(conn, dialect), paramstyle_of(conn, paramstyle)
    idle = transaction_status(conn) == 0
    if isinstance(conn, sqlite3.Connection):
        autocommit = getattr(conn, "autocommit", None)
        if autocommit is True or (autocommit is not False and conn.isolation_level is None):
            autocommits = True
        else:
            autocommits = False
            idle = False  # legacy mode begins before the first write; PEP 249 mode is always in one
    else:
        autocommits = getattr(conn, "autocommit", False) is True
    if autocommits and idle:
        raise InvalidArgument(
            "conn",
            "is in autocommit mode with no transaction open; begin one first (the fence row "
            "and your writes must commit together), or use sql_fence() which runs its own",
        )
    return Executor(conn.cursor(), dialect_, style)


def advance_fence(
    conn: Any,
    token: object,
    *,
    strict: bool = False,
    keyring: Keyring | None = None,
    dialect: str | None = None,
    paramstyle: str | None = None,
) -> None:
    """Advance the job's fence row inside the caller's open transaction on ``conn``.

    For code that manages its own transactions: a DB-API connection (sqlite3, psycopg, ...)
    or a SQLAlchemy ``Session``/``Connection``::

        with Session(engine) as session, session.begin():
            tenure.fence.advance_fence(session, lease.token)   # first, before the writes
            session.add(Report(...))

    A stale token raises `StaleToken` and changes nothing itself; the caller must then roll
    back (``session.begin()`` and ``with conn:`` do). Creates the fence table if missing (on
    PostgreSQL prefer `create_fence_table` at deploy time). Call it first in the
    transaction: on SQLite the upsert takes the write lock, on PostgreSQL the job's row
    lock, which orders concurrent writers of one job until the transaction ends.
    """
    fenced = fencing_token(token, keyring=keyring)
    if not isinstance(strict, bool):
        raise InvalidArgument("strict", f"must be True or False, not {type(strict).__name__}")
    ex = joined_executor(conn, dialect, paramstyle)
    refuse_if_lost(fenced)
    try:
        ensure_tables(ex)
        advance(ex, fenced, strict)
    finally:
        ex.close()


def create_fence_table(
    conn: Any, *, dialect: str | None = None, paramstyle: str | None = None
) -> None:
    """Create the fence table and the effect ledger now if they are missing (guards also
    create them on first use; doing it at deploy time spares a busy PostgreSQL database a
    race on first use)."""
    check_connection(conn)
    dialect_, style = dialect_of(conn, dialect), paramstyle_of(conn, paramstyle)
    cur = conn.cursor()
    txn = DBAPITransaction(conn, cur, write=True)
    try:
        txn.begin()
        try:
            ensure_tables(Executor(cur, dialect_, style), ledger=True)
            txn.commit()
        except BaseException:
            txn.rollback()
            raise
    finally:
        close_quietly(cur)


def fence_generation(
    conn: Any, job_id: str, *, dialect: str | None = None, paramstyle: str | None = None
) -> int | None:
    """The highest generation ``conn``'s fence table accepted for ``job_id`` (None: none,
    or no fence table yet). Reads in its own transaction, which it ends."""
    from .._validate import validate_id

    check_connection(conn)
    job_id = validate_id("job_id", job_id)
    dialect_, style = dialect_of(conn, dialect), paramstyle_of(conn, paramstyle)
    cur = conn.cursor()
    txn = DBAPITransaction(conn, cur, write=False)
    try:
        txn.begin()
        try:
            cur.execute(fence_statement(dialect_, "exists", style))
            if cur.fetchone() is None:
                return None
            return read_generation(Executor(cur, dialect_, style), job_id)
        finally:
            txn.rollback()
    finally:
        close_quietly(cur)
