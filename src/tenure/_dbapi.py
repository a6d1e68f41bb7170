"""Transactions on a caller's DB-API connection (sqlite3, psycopg, psycopg2, ...), begun,
committed and rolled back the same way whatever mode the connection is in. Shared by the
fence guards (``tenure.fence``) and the SQLite store's transaction seam, which both run a
transaction of their own on a connection they may not have opened."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from typing import Any

from .errors import InvalidArgument

__all__ = ["DBAPITransaction", "close_quietly", "transaction_status"]

log = logging.getLogger("tenure")


def transaction_status(conn: object) -> int | None:
    """0 when the connection is idle (no transaction), non-zero when one is open, None when
    the driver cannot tell (psycopg and psycopg2 expose ``conn.info.transaction_status``)."""
    if isinstance(conn, sqlite3.Connection):
        return 1 if conn.in_transaction else 0
    status = getattr(getattr(conn, "info", None), "transaction_status", None)
    return int(status) if isinstance(status, int) else None


class DBAPITransaction:
    """Begins, commits and rolls back the one transaction of a guard (or of a store's
    transaction seam) on one connection.

    sqlite3: ``BEGIN IMMEDIATE`` (the write lock is taken before the fence row is read), then
    ``COMMIT``/``ROLLBACK`` as statements, which works in every isolation mode; on Python
    3.12+ with ``autocommit=False`` a transaction is always open and the connection's own
    commit/rollback are used. Other drivers: the transaction DB-API opens implicitly, ended
    with ``conn.commit()``/``conn.rollback()``; with ``autocommit=True`` an explicit ``BEGIN``.
    """

    def __init__(self, conn: Any, cur: Any, *, write: bool) -> None:
        self._conn = conn
        self._cur = cur
        self._write = write
        self._explicit = False
        self._joined = False

    def begin(self) -> None:
        conn = self._conn
        if isinstance(conn, sqlite3.Connection) and getattr(conn, "autocommit", None) is False:
            # PEP 249 mode (Python 3.12+): sqlite3 always keeps a transaction open, so a
            # read joins it and a guard commits or rolls back the connection's transaction.
            self._joined = not self._write
            return
        if transaction_status(conn):
            if not self._write:
                self._joined = True  # a read can run inside the caller's transaction
                return
            raise InvalidArgument(
                "conn",
                "has a transaction in progress; commit or roll back before a fenced write, "
                "which runs (and commits) its own transaction",
            )
        if isinstance(conn, sqlite3.Connection):
            self._cur.execute("BEGIN IMMEDIATE" if self._write else "BEGIN")
            self._explicit = True
        elif getattr(conn, "autocommit", False) is True:
            self._cur.execute("BEGIN")
            self._explicit = True

    def commit(self) -> None:
        if self._explicit:
            self._cur.execute("COMMIT")
        else:
            self._conn.commit()

    def rollback(self) -> None:
        """Roll back; never raises (it runs while another error is on its way out)."""
        if self._joined:
            return
        try:
            if not self._explicit:
                self._conn.rollback()
            elif transaction_status(self._conn) != 0:
                self._cur.execute("ROLLBACK")
        except Exception as exc:
            log.warning(
                "fence: rollback failed: %s", exc, extra={"error": f"{type(exc).__name__}: {exc}"}
            )


def close_quietly(cur: Any) -> None:
    with contextlib.suppress(Exception):  # a broken connection's cursor: nothing to free
        cur.close()
