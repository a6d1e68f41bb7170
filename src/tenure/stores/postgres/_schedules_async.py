"""The PostgreSQL driver's store schedules (add, remove, list), async (``_schedules.py`` is
generated from this file): a mixin of `AsyncPostgresDriver`, one statement each
(``sql/schedule_put.sql``, ``schedule_delete.sql``, ``schedule_list.sql``), apart from the
hot path on a connection of the store's pool."""

from __future__ import annotations

from typing import Any, Protocol

from psycopg_pool import AsyncConnectionPool

from ..._schedule import ScheduleRow
from ._common import SqlSet
from ._stats_async import read_rows_async

__all__ = ["AsyncPostgresSchedules"]


class _Runner(Protocol):
    """What the mixin uses of the driver."""

    @property
    def _sql(self) -> SqlSet: ...

    @property
    def _pool(self) -> AsyncConnectionPool[Any]: ...

    def _now(self) -> float | None: ...


def _row(found: tuple[Any, ...]) -> ScheduleRow:
    name, cron, queue, payload, zone, catch_up, attempts, created, updated = found
    return ScheduleRow(
        name, cron, queue, payload, zone, catch_up, int(attempts), float(created), float(updated)
    )


class AsyncPostgresSchedules:
    """Store schedules for `AsyncPostgresDriver` (see `tenure.stores.abc.AsyncDriver`)."""

    async def put_schedule(self: _Runner, row: ScheduleRow) -> ScheduleRow:
        params = {**row._asdict(), "now": self._now()}
        rows = await read_rows_async(self._pool, "add_schedule", self._sql["schedule_put"], params)
        return _row(rows[0])

    async def delete_schedule(self: _Runner, name: str) -> bool:
        statement = self._sql["schedule_delete"]
        rows = await read_rows_async(self._pool, "remove_schedule", statement, {"name": name})
        return bool(rows)

    async def schedules(self: _Runner) -> list[ScheduleRow]:
        rows = await read_rows_async(self._pool, "schedules", self._sql["schedule_list"], {})
        return [_row(found) for found in rows]
