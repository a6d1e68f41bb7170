"""Fenced destinations: places that reject the effects of a stale lease on their own.

A lease store rejects a stale worker's renew and complete, but it cannot stop a request the
stale worker already sent somewhere else. A fenced destination keeps, per job, the highest
generation (fencing token) it has accepted and refuses anything older with `StaleToken`.
See docs/fencing.md.

SQL (SQLite and PostgreSQL destinations: any database the effect lands in)::

    with tenure.fence.sql_fence(conn, lease.token) as cur:   # its own transaction
        cur.execute("INSERT INTO reports (id, body) VALUES (?, ?)", (report_id, body))

    tenure.fence.advance_fence(session, lease.token)          # in your transaction
    tenure.fence.apply_once(conn, lease.token, "invoice:42", effect)   # idempotency key
    with tenure.fence.complete_with(store, lease) as done:    # effect + completion, one txn
        done.cursor.execute(...)                              # (async with: an AsyncStore)

HTTP (``tenure[http]``): `tenure.fence.http.TenureAuth` stamps httpx requests,
`tenure.fence.asgi.FenceMiddleware` fences an ASGI service, `tenure.fence.sink` is the
reference fenced service (``tenure sink serve``). Signed tokens: `Keyring`.

Every guard that acts for a lease refuses (`LeaseLost`) once the worker runtime has marked
that lease lost.
"""

from __future__ import annotations

from ._complete import AsyncCompletionGuard, CompletionGuard, complete_with
from ._headers import (
    EFFECT_KEY_HEADER,
    GENERATION_HEADER,
    ISSUED_AT_HEADER,
    JOB_HEADER,
    KEY_ID_HEADER,
    SIGNATURE_HEADER,
    Rejection,
    check_headers,
    token_headers,
)
from ._ledger import EffectResult, apply_once, effect_generation, record_effect
from ._signed import Keyring, SignedToken
from ._sql import (
    DIALECTS,
    FENCE_TABLE,
    LEDGER_TABLE,
    PARAMSTYLES,
    SQLFenceGuard,
    advance_fence,
    create_fence_table,
    fence_generation,
    sql_fence,
)
from ._stores import FenceStore, FenceVerdict, MemoryFenceStore, SQLiteFenceStore

__all__ = [
    # SQL
    "sql_fence",
    "advance_fence",
    "SQLFenceGuard",
    "create_fence_table",
    "fence_generation",
    "FENCE_TABLE",
    "LEDGER_TABLE",
    "DIALECTS",
    "PARAMSTYLES",
    # idempotency keys
    "apply_once",
    "record_effect",
    "effect_generation",
    "EffectResult",
    # complete with the effect
    "complete_with",
    "CompletionGuard",
    "AsyncCompletionGuard",
    # signed tokens
    "Keyring",
    "SignedToken",
    # HTTP headers and fence stores (the httpx auth and ASGI middleware are in
    # tenure.fence.http and tenure.fence.asgi)
    "token_headers",
    "check_headers",
    "Rejection",
    "JOB_HEADER",
    "GENERATION_HEADER",
    "ISSUED_AT_HEADER",
    "KEY_ID_HEADER",
    "SIGNATURE_HEADER",
    "EFFECT_KEY_HEADER",
    "FenceStore",
    "FenceVerdict",
    "MemoryFenceStore",
    "SQLiteFenceStore",
]
