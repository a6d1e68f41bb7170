"""The embedded SQLite store (the default): ``sqlite:///path.db``.

The store's clock is the host's, read inside each write transaction: its boot clock from an
anchor kept in the file (Linux), so wall-clock steps do not move it, or its wall clock
elsewhere; never below a persisted floor (see docs/how-it-works.md). All processes sharing
the file share the store; the file must be on a local disk of one host (SQLite locking is
unreliable on network filesystems).
"""

from __future__ import annotations

from ..._clock import Clock
from .._threaded import ThreadedDriver
from ._driver import SQLiteDriver, open_sync
from ._url import parse_sqlite_url

__all__ = ["SQLiteDriver", "open_async", "open_sync", "parse_sqlite_url"]


async def open_async(url: str, clock: Clock | None) -> ThreadedDriver:
    return ThreadedDriver(open_sync(url, clock))
