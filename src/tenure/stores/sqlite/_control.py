"""The SQLite driver's job-control operations (cancel, requeue, delete, purge, a queue's
paused flag, its limit and its rate): a mixin of `SQLiteDriver`, each operation one
``BEGIN IMMEDIATE`` transaction (``sql/cancel.sql``, ``requeue.sql``, ``delete.sql`` and
``purge.sql``, the last two with ``raise_floor.sql``; ``pause_queue.sql``,
``paused_queues.sql``, ``set_queue_limit.sql``, ``set_queue_rate.sql`` and the readers)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from ..._protocol import JobRow, Outcome
from ..._resources import load_text
from ..._validate import MAX_GENERATION
from ._sql import PACKAGE, read_row

__all__ = ["SQLiteControl"]

T = TypeVar("T")

(
    _CANCEL,
    _REQUEUE,
    _DELETE,
    _PURGE,
    _RAISE_FLOOR,
    _PAUSE_QUEUE,
    _PAUSED_QUEUES,
    _SET_QUEUE_LIMIT,
    _QUEUE_LIMITS,
    _SET_QUEUE_RATE,
    _QUEUE_RATES,
) = (
    load_text(PACKAGE, f"sql/{name}.sql")
    for name in (
        "cancel",
        "requeue",
        "delete",
        "purge",
        "raise_floor",
        "pause_queue",
        "paused_queues",
        "set_queue_limit",
        "queue_limits",
        "set_queue_rate",
        "queue_rates",
    )
)


class _Writer(Protocol):
    """What the mixin uses of the driver."""

    def _write(self, operation: str, body: Callable[[sqlite3.Cursor, float], T]) -> T: ...

    def _answer(
        self, cur: sqlite3.Cursor, now: float, job_id: str, applied: JobRow | None
    ) -> Outcome: ...

    def _control(self, operation: str, statement: str, params: dict[str, Any]) -> Outcome: ...


class SQLiteControl:
    """Job control for `SQLiteDriver` (see `tenure.stores.abc.Driver`)."""

    def _control(self: _Writer, operation: str, statement: str, params: dict[str, Any]) -> Outcome:
        job_id = params["job_id"]

        def body(cur: sqlite3.Cursor, now: float) -> Outcome:
            params["now"] = now
            applied = read_row(cur, statement, params)
            if applied is not None and operation == "delete":
                cur.execute(_RAISE_FLOOR, {"generation": applied.generation})
            return self._answer(cur, now, job_id, applied)

        return self._write(operation, body)

    def cancel(self: _Writer, job_id: str, reason: str, takes: Sequence[str]) -> Outcome:
        params = {
            "job_id": job_id,
            "reason": reason,
            "takes": json.dumps(list(takes)),
            "max_generation": MAX_GENERATION,
        }
        return self._control("cancel", _CANCEL, params)

    def requeue(
        self: _Writer, job_id: str, delay: float, reset_attempts: bool, takes: Sequence[str]
    ) -> Outcome:
        params = {
            "job_id": job_id,
            "delay": delay,
            "reset_attempts": reset_attempts,
            "takes": json.dumps(list(takes)),
        }
        return self._control("requeue", _REQUEUE, params)

    def delete(self: _Writer, job_id: str, takes: Sequence[str]) -> Outcome:
        return self._control(
            "delete", _DELETE, {"job_id": job_id, "takes": json.dumps(list(takes))}
        )

    def purge(
        self: _Writer, states: Sequence[str], older_than: float, limit: int, cursor: str | None
    ) -> tuple[int, str | None]:
        # One short write transaction per batch, oldest first: the next batch starts where
        # this one ended, with no cursor of its own.
        def body(cur: sqlite3.Cursor, now: float) -> int:
            params = {
                "states": json.dumps(list(states)),
                "cutoff": now - older_than,
                "limit": limit,
            }
            generations = [row[0] for row in cur.execute(_PURGE, params).fetchall()]
            if generations:
                cur.execute(_RAISE_FLOOR, {"generation": max(generations)})
            return len(generations)

        deleted = self._write("purge", body)
        return deleted, ("" if deleted >= limit else None)

    def set_paused(self: _Writer, queue: str, paused: bool) -> None:
        def body(cur: sqlite3.Cursor, now: float) -> None:
            cur.execute(_PAUSE_QUEUE, {"queue": queue, "paused": int(paused)})

        self._write("pause_queue", body)

    def paused_queues(self: _Writer) -> list[str]:
        def body(cur: sqlite3.Cursor, now: float) -> list[str]:
            return [str(row[0]) for row in cur.execute(_PAUSED_QUEUES).fetchall()]

        return self._write("paused_queues", body)

    def set_queue_limit(self: _Writer, queue: str, limit: int | None) -> None:
        def body(cur: sqlite3.Cursor, now: float) -> None:
            cur.execute(_SET_QUEUE_LIMIT, {"queue": queue, "max_leased": limit})

        self._write("set_queue_limit", body)

    def queue_limits(self: _Writer) -> dict[str, int]:
        def body(cur: sqlite3.Cursor, now: float) -> dict[str, int]:
            return {str(q): int(n) for q, n in cur.execute(_QUEUE_LIMITS).fetchall()}

        return self._write("queue_limits", body)

    def set_queue_rate(self: _Writer, queue: str, rate: tuple[float, int] | None) -> None:
        per_second, burst = (None, None) if rate is None else rate

        def body(cur: sqlite3.Cursor, now: float) -> None:
            params = {"queue": queue, "per_second": per_second, "burst": burst, "now": now}
            cur.execute(_SET_QUEUE_RATE, params)

        self._write("set_queue_rate", body)

    def queue_rates(self: _Writer) -> dict[str, tuple[float, int]]:
        def body(cur: sqlite3.Cursor, now: float) -> dict[str, tuple[float, int]]:
            rows = cur.execute(_QUEUE_RATES).fetchall()
            return {str(q): (float(r), int(b)) for q, r, b in rows}

        return self._write("queue_rates", body)
