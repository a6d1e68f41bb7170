"""The effect ledger: idempotency keys for fenced effects.

A table ``tenure_effects(job_id, effect_key, generation, applied_at)`` next to the fence
table records which effects of a job this database has applied. In one transaction a
guard advances the job's fence row (a stale generation is refused with `StaleToken`),
looks the effect up, and either applies it and records it, or does nothing because it was
applied before (by this generation or an earlier one). A retried or duplicated effect is
therefore applied exactly once per database, and never by a stale holder.

Effect keys are chosen by the caller and must name the effect, not the attempt: the same
logical write gets the same key in every attempt (e.g. ``"invoice:42:send"``), so the
attempt that takes over after a crash finds it done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._dbapi import DBAPITransaction, close_quietly
from .._validate import validate_id
from ..errors import InvalidArgument
from ..models import FencingToken
from ._loss import refuse_if_lost
from ._signed import Keyring
from ._sql import (
    Executor,
    advance,
    check_connection,
    dialect_of,
    ensure_tables,
    joined_executor,
    paramstyle_of,
)
from ._token import fencing_token

__all__ = [
    "apply_once",
    "apply_once_checked",
    "effect_generation",
    "EffectResult",
    "record_effect",
]


@dataclass(frozen=True, slots=True)
class EffectResult:
    """What `apply_once` did. ``applied``: the effect ran and committed now (``value`` is
    what it returned); False: it had been applied before, by ``generation``, and nothing
    ran now."""

    job_id: str
    effect_key: str
    applied: bool
    generation: int
    value: Any = None


def record(ex: Executor, token: FencingToken, effect_key: str) -> int | None:
    """Record the effect for the token's generation; None if new, else the generation that
    recorded it before. Call after `advance` in the same transaction (the fence row lock
    orders the effects of one job, so the read below is not racy)."""
    _, row = ex.run("ledger_read", (token.job_id, effect_key))
    if row is not None:
        return int(row[0])
    changed, _ = ex.run("ledger_insert", (token.job_id, effect_key, token.generation))
    if changed == 0:  # recorded meanwhile (a transaction isolation the lock did not cover)
        _, row = ex.run("ledger_read", (token.job_id, effect_key))
        return token.generation if row is None else int(row[0])
    return None


def _effect_key(value: object) -> str:
    return validate_id("effect_key", value)


def apply_once(
    conn: Any,
    token: object,
    effect_key: str,
    effect: Callable[[Any], Any],
    *,
    strict: bool = False,
    keyring: Keyring | None = None,
    dialect: str | None = None,
    paramstyle: str | None = None,
) -> EffectResult:
    """Apply ``effect(cursor)`` at most once per (job, ``effect_key``), fenced by ``token``::

        done = tenure.fence.apply_once(
            conn, lease.token, f"invoice:{n}",
            lambda cur: cur.execute("INSERT INTO invoices ...", (...)),
        )

    One transaction of its own on ``conn`` (which must be idle, as for `sql_fence`):
    advance the fence (`StaleToken` when stale: nothing runs), look the key up, run the
    effect and record the key, commit. When the key was applied before, nothing runs and
    the result says ``applied=False`` with the generation that applied it. An exception in
    ``effect`` rolls everything back (the key stays unrecorded).
    """
    return apply_once_checked(
        conn, token, effect_key, effect, strict, keyring, dialect, paramstyle, check_loss=True
    )


def apply_once_checked(
    conn: Any,
    token: object,
    effect_key: str,
    effect: Callable[[Any], Any],
    strict: bool,
    keyring: Keyring | None,
    dialect: str | None,
    paramstyle: str | None,
    *,
    check_loss: bool,
) -> EffectResult:
    check_connection(conn)
    fenced = fencing_token(token, keyring=keyring)
    key = _effect_key(effect_key)
    if not callable(effect):
        raise InvalidArgument("effect", f"must be callable, not {type(effect).__name__}")
    if not isinstance(strict, bool):
        raise InvalidArgument("strict", f"must be True or False, not {type(strict).__name__}")
    dialect_, style = dialect_of(conn, dialect), paramstyle_of(conn, paramstyle)
    if check_loss:
        refuse_if_lost(fenced)
    cur = conn.cursor()
    try:
        txn = DBAPITransaction(conn, cur, write=True)
        txn.begin()  # outside the try: a refused begin must not roll back the caller's work
        try:
            ex = Executor(cur, dialect_, style)
            ensure_tables(ex, ledger=True)
            advance(ex, fenced, strict)
            earlier = record(ex, fenced, key)
            if earlier is not None:
                txn.rollback()
                return EffectResult(fenced.job_id, key, False, earlier)
            value = effect(cur)
            if check_loss:  # lost while the effect ran: do not commit
                refuse_if_lost(fenced)
            txn.commit()
        except BaseException:
            txn.rollback()
            raise
    finally:
        close_quietly(cur)
    return EffectResult(fenced.job_id, key, True, fenced.generation, value)


def record_effect(
    conn: Any,
    token: object,
    effect_key: str,
    *,
    strict: bool = False,
    keyring: Keyring | None = None,
    dialect: str | None = None,
    paramstyle: str | None = None,
) -> bool:
    """Inside the caller's open transaction (DB-API connection or SQLAlchemy session):
    advance the fence and record the effect key. True: first time, apply the effect now in
    this transaction; False: applied before, skip it. `StaleToken` when stale (roll back).

    ::

        with Session(engine) as session, session.begin():
            if tenure.fence.record_effect(session, lease.token, "invoice:42"):
                session.add(Invoice(...))
    """
    fenced = fencing_token(token, keyring=keyring)
    key = _effect_key(effect_key)
    if not isinstance(strict, bool):
        raise InvalidArgument("strict", f"must be True or False, not {type(strict).__name__}")
    ex = joined_executor(conn, dialect, paramstyle)
    refuse_if_lost(fenced)
    try:
        ensure_tables(ex, ledger=True)
        advance(ex, fenced, strict)
        return record(ex, fenced, key) is None
    finally:
        ex.close()


def effect_generation(
    conn: Any,
    job_id: str,
    effect_key: str,
    *,
    dialect: str | None = None,
    paramstyle: str | None = None,
) -> int | None:
    """The generation that applied (job, ``effect_key``) on ``conn``'s database, or None.
    Reads in its own transaction, which it ends."""
    check_connection(conn)
    job_id = validate_id("job_id", job_id)
    key = _effect_key(effect_key)
    dialect_, style = dialect_of(conn, dialect), paramstyle_of(conn, paramstyle)
    cur = conn.cursor()
    txn = DBAPITransaction(conn, cur, write=False)
    try:
        txn.begin()
        try:
            ex = Executor(cur, dialect_, style)
            _, exists = ex.run("ledger_exists")
            if exists is None:
                return None
            _, row = ex.run("ledger_read", (job_id, key))
            return None if row is None else int(row[0])
        finally:
            txn.rollback()
    finally:
        close_quietly(cur)
