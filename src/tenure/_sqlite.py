"""SQLite file settings shared by the SQLite store and the SQLite fence."""

from __future__ import annotations

import sqlite3
import time


def enter_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Put the file in WAL mode, waiting up to ``busy_timeout`` for other openers.

    Switching a new file to WAL needs it to itself for a moment, and SQLite answers a second
    process or thread opening the same new file at that moment with "database is locked" at
    once instead of through the busy handler (two threads opening a new file together: 70
    of 300 files, seen here). So the switch is retried within the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
