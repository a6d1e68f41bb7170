"""The PostgreSQL store: ``postgresql://user@host/db?schema=app``.

The store's clock is the server's (``clock_timestamp()``, read inside each statement), so
client clocks do not matter. Tables live in one schema (``public`` unless ``?schema=``),
created or upgraded on first connect (or with ``tenure migrate``). See docs/postgres.md.
psycopg's async connections run on asyncio only, so under trio the async API runs the sync
driver in worker threads.

Bring your own pool::

    pool = psycopg_pool.ConnectionPool(conninfo, kwargs={"autocommit": True}, open=True)
    store = tenure.Store(PostgresDriver.open(pool=pool, schema="app"))
"""

from __future__ import annotations

import anyio.to_thread

from ..._clock import Clock
from .._driver_async import AsyncDriver
from .._threaded import ThreadedDriver, on_asyncio
from ._common import PostgresOptions, parse_postgres_url, redact, validate_schema
from ._driver import PostgresDriver
from ._driver_async import AsyncPostgresDriver
from ._migrate import migrate, schema_version
from ._migrations import latest_version, migration_script, pending_migrations

__all__ = [
    "AsyncPostgresDriver",
    "PostgresDriver",
    "PostgresOptions",
    "latest_version",
    "migrate",
    "migration_script",
    "open_async",
    "open_sync",
    "parse_postgres_url",
    "pending_migrations",
    "redact",
    "schema_version",
    "validate_schema",
]


def open_sync(url: str, clock: Clock | None) -> PostgresDriver:
    return PostgresDriver.open(url, store_clock=clock)


async def open_async(url: str, clock: Clock | None) -> AsyncDriver:
    if not on_asyncio():  # trio: psycopg's async connections cannot run here
        return ThreadedDriver(await anyio.to_thread.run_sync(open_sync, url, clock))
    return await AsyncPostgresDriver.open(url, store_clock=clock)
