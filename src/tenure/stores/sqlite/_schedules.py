"""The SQLite driver's store schedules (add, remove, list): a mixin of `SQLiteDriver`, each
operation one ``BEGIN IMMEDIATE`` transaction (``sql/schedule_put.sql``,
``schedule_delete.sql``, ``schedule_list.sql``), by store time."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..._resources import load_text
from ..._schedule import ScheduleRow
from ._sql import PACKAGE

__all__ = ["SQLiteSchedules"]

T = TypeVar("T")

_PUT, _DELETE, _LIST = (
    load_text(PACKAGE, f"sql/schedule_{name}.sql") for name in ("put", "delete", "list")
)


class _Writer(Protocol):
    """What the mixin uses of the driver."""

    def _write(self, operation: str, body: Callable[[sqlite3.Cursor, float], T]) -> T: ...


def _row(found: Any) -> ScheduleRow:
    name, cron, queue, payload, zone, catch_up, attempts, created, updated = found
    return ScheduleRow(
        name, cron, queue, payload, zone, catch_up, int(attempts), float(created), float(updated)
    )


class SQLiteSchedules:
    """Store schedules for `SQLiteDriver` (see `tenure.stores.abc.Driver`)."""

    def put_schedule(self: _Writer, row: ScheduleRow) -> ScheduleRow:
        params = row._asdict()

        def body(cur: sqlite3.Cursor, now: float) -> ScheduleRow:
            params["now"] = now
            return _row(cur.execute(_PUT, params).fetchone())

        return self._write("add_schedule", body)

    def delete_schedule(self: _Writer, name: str) -> bool:
        def body(cur: sqlite3.Cursor, now: float) -> bool:
            return cur.execute(_DELETE, {"name": name}).fetchone() is not None

        return self._write("remove_schedule", body)

    def schedules(self: _Writer) -> list[ScheduleRow]:
        def body(cur: sqlite3.Cursor, now: float) -> list[ScheduleRow]:
            return [_row(found) for found in cur.execute(_LIST).fetchall()]

        return self._write("schedules", body)
