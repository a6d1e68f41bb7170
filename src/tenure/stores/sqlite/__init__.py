"""The embedded SQLite store (the default): ``sqlite:///path.db``.

The store's clock is the host's clock, read inside each write transaction and kept from
running backwards by a persisted floor. All processes sharing the file share the store;
the file must be on a local disk (SQLite locking is unreliable on network filesystems).
"""

from __future__ import annotations

from ..._clock import Clock
from .._driver import ThreadedDriver
from ._driver import SQLiteDriver, open_sync, parse_sqlite_url

__all__ = ["SQLiteDriver", "open_async", "open_sync", "parse_sqlite_url"]


async def open_async(url: str, clock: Clock | None) -> ThreadedDriver:
    return ThreadedDriver(open_sync(url, clock))
