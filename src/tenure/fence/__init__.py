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

HTTP: `tenure.fence.headers` is the token on the wire (any client or server);
`tenure.fence.http.TenureAuth` (``tenure[http]``) stamps httpx requests;
`tenure.fence.asgi.FenceMiddleware` fences an ASGI service with a fence store of its
module; `tenure.fence.sink` is the reference fenced service (``tenure sink serve``).
Signed tokens: `Keyring`.

Every guard that acts for a lease refuses (`LeaseLost`) once the worker runtime has marked
that lease lost.
"""

from __future__ import annotations

import importlib as _importlib
import warnings as _warnings
from typing import Any as _Any

from ._complete import AsyncCompletionGuard, CompletionGuard, complete_with
from ._ledger import EffectResult, apply_once, effect_generation, record_effect
from ._signed import Keyring, SignedToken
from ._sql import (
    FENCE_TABLE,
    LEDGER_TABLE,
    SQLFenceGuard,
    advance_fence,
    create_fence_table,
    fence_generation,
    sql_fence,
)

__all__ = [
    # SQL destinations
    "sql_fence",
    "SQLFenceGuard",
    "advance_fence",
    "create_fence_table",
    "fence_generation",
    "FENCE_TABLE",
    # idempotency keys
    "apply_once",
    "record_effect",
    "effect_generation",
    "EffectResult",
    "LEDGER_TABLE",
    # the effect and the completion in one transaction
    "complete_with",
    "CompletionGuard",
    "AsyncCompletionGuard",
    # signed tokens
    "Keyring",
    "SignedToken",
]

# Names that moved to the module where they are used; still served here, with a warning.
_MOVED = {
    **dict.fromkeys(
        (
            "token_headers",
            "check_headers",
            "Rejection",
            "JOB_HEADER",
            "GENERATION_HEADER",
            "ISSUED_AT_HEADER",
            "KEY_ID_HEADER",
            "SIGNATURE_HEADER",
            "EFFECT_KEY_HEADER",
        ),
        "tenure.fence.headers",
    ),
    **dict.fromkeys(
        ("FenceStore", "FenceVerdict", "MemoryFenceStore", "SQLiteFenceStore"), "tenure.fence.asgi"
    ),
    **dict.fromkeys(("DIALECTS", "PARAMSTYLES"), "tenure.fence._sql"),
}


def __getattr__(name: str) -> _Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    internal = home.rpartition(".")[2].startswith("_")
    moved = "is no longer public" if internal else f"moved to {home}.{name}"
    _warnings.warn(f"tenure.fence.{name} {moved}", DeprecationWarning, stacklevel=2)
    return getattr(_importlib.import_module(home), name)
