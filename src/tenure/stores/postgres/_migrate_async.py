"""The tenure schema of a PostgreSQL store: its version, and the migrations that bring it
up to date (async; ``_migrate.py`` is generated from this file).
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import tuple_row

from ...errors import StoreUnavailable
from ._common import StoreIdentity, render, sql_text, store_lost
from ._migrations import latest_version, migration_steps

__all__ = ["migrate_async", "prepare_schema_async", "schema_version_async"]

log = logging.getLogger("tenure")


async def schema_version_async(conn: AsyncConnection[Any], schema: str) -> int | None:
    """The schema's tenure version: None when tenure was never installed there, 0 when
    only the bookkeeping exists. Raises StoreUnavailable for a schema tenure cannot use."""
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(render(sql_text("migrate_status"), schema).encode())
    found = await cur.fetchone()
    assert found is not None
    _, has_bookkeeping, has_jobs = found
    if not has_bookkeeping:
        if has_jobs:
            raise StoreUnavailable(
                f"schema {schema!r} has a tenure_jobs table but no tenure_migrations: it was "
                "not created by tenure; use another schema",
                operation="connect",
                outcome_unknown=False,
            )
        return None
    await cur.execute(render(sql_text("migrate_version"), schema).encode())
    version = await cur.fetchone()
    assert version is not None
    return int(version[0])


async def migrate_async(
    conn: AsyncConnection[Any], schema: str, *, dry_run: bool = False
) -> list[str]:
    """Bring ``schema`` to the latest version under an advisory lock, in one transaction.
    Returns the names of what was (or, with ``dry_run``, would be) applied."""
    applied: list[str] = []
    async with conn.transaction(force_rollback=dry_run):
        cur = conn.cursor(row_factory=tuple_row)
        await cur.execute(render(sql_text("migrate_lock"), schema).encode())
        await cur.execute(render(sql_text("migrate_status"), schema).encode())
        status = await cur.fetchone()
        assert status is not None
        if not status[0]:
            await cur.execute(render(sql_text("migrate_schema"), schema).encode())
        current = await schema_version_async(conn, schema)
        if current is None:
            await cur.execute(render(sql_text("migrate_bookkeeping"), schema).encode())
            current = 0
        latest = latest_version()
        if current > latest:
            raise StoreUnavailable(
                f"schema {schema!r} is at tenure schema version {current}, newer than this "
                f"tenure understands ({latest}); upgrade tenure",
                operation="migrate",
                outcome_unknown=False,
            )
        for description, statement in migration_steps(schema, current):
            await cur.execute(statement.encode())
            if not description.startswith("record "):
                applied.append(description)
    if applied and not dry_run:
        log.info(
            "tenure schema migrated",
            extra={"schema": schema, "applied": applied, "version": latest_version()},
        )
    return applied


async def prepare_schema_async(
    conn: AsyncConnection[Any], schema: str, auto_migrate: bool
) -> tuple[str, StoreIdentity]:
    """Create or upgrade ``schema`` (``auto_migrate``) or check it is current; the store's
    id and identity (`StoreLost` when it is not the store first opened there)."""
    version = await schema_version_async(conn, schema)
    latest = latest_version()
    if version is None or version < latest:
        if not auto_migrate:
            raise StoreUnavailable(
                f"schema {schema!r} is at tenure schema version {version or 0}, this tenure "
                f"needs {latest}: run `tenure migrate`",
                operation="connect",
                outcome_unknown=False,
            )
        await migrate_async(conn, schema)
    elif version > latest:
        raise StoreUnavailable(
            f"schema {schema!r} is at tenure schema version {version}, newer than this "
            f"tenure understands ({latest}); upgrade tenure",
            operation="connect",
            outcome_unknown=False,
        )
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(render(sql_text("store_open"), schema).encode())
    found = await cur.fetchone()
    assert found is not None
    store_id, identity, recorded = found
    if identity != recorded:
        raise store_lost(
            "connect",
            f"the PostgreSQL store in schema {schema!r} is a copy restored from a dump, not "
            f"the tables its first client opened (that client recorded "
            f"{StoreIdentity.parse(recorded)}; now {StoreIdentity.parse(identity)}), so its "
            "jobs may be older than what the store already issued",
        )
    return str(store_id), StoreIdentity.parse(identity)
