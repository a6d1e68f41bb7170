"""Fenced destinations: places that reject the effects of a stale lease on their own.

A lease store rejects a stale worker's renew and complete, but it cannot stop a request the
stale worker already sent somewhere else. A fenced destination keeps, per job, the highest
generation (fencing token) it has accepted and refuses anything older with `StaleToken`.

Today: the SQL fence, for SQLite and PostgreSQL destinations (any database the effect lands
in, not only the lease store)::

    import tenure, tenure.fence

    with tenure.fence.sql_fence(conn, lease.token) as cur:   # or sql_fence(conn, lease)
        cur.execute("INSERT INTO reports (id, body) VALUES (?, ?)", (report_id, body))

Planned next to it: idempotency keys, HTTP stamping and an ASGI middleware, signed tokens.
"""

from __future__ import annotations

from ._sql import (
    DIALECTS,
    FENCE_TABLE,
    PARAMSTYLES,
    SQLFenceGuard,
    create_fence_table,
    fence_generation,
    sql_fence,
)

__all__ = [
    "DIALECTS",
    "FENCE_TABLE",
    "PARAMSTYLES",
    "SQLFenceGuard",
    "create_fence_table",
    "fence_generation",
    "sql_fence",
]
