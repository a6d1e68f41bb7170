"""The Redis driver's store schedules (add, remove, list), async (``_schedules.py`` is
generated from this file): a mixin of `AsyncRedisDriver` on the hash ``{prefix}:schedules``
(name to ``"<created_at> <updated_at> <spec JSON>"``): ``lua/schedule_put.lua`` upserts by
store time, remove is one HDEL, the list one HGETALL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..._schedule import ScheduleRow
from ._common import Keys, decode_text

__all__ = ["AsyncRedisSchedules"]


class _Runner(Protocol):
    """What the mixin uses of the driver."""

    @property
    def keys(self) -> Keys: ...

    def _now_arg(self) -> str: ...

    async def _eval(
        self, operation: str, script_name: str, keys: Sequence[str], args: Sequence[str]
    ) -> Any: ...

    async def _send(self, operation: str, command: Sequence[Any]) -> Any: ...


def _row(name: str, value: str) -> ScheduleRow:
    created, updated, spec = value.split(" ", 2)
    fields = json.loads(spec)
    return ScheduleRow(
        name,
        fields["cron"],
        fields["queue"],
        fields["payload"],
        fields["timezone"],
        fields["catch_up"],
        int(fields["max_attempts"]),
        float(created),
        float(updated),
    )


class AsyncRedisSchedules:
    """Store schedules for `AsyncRedisDriver` (see `tenure.stores.abc.AsyncDriver`)."""

    async def put_schedule(self: _Runner, row: ScheduleRow) -> ScheduleRow:
        spec = {
            name: value
            for name, value in row._asdict().items()
            if name not in ("name", "created_at", "updated_at")
        }
        text = json.dumps(spec, ensure_ascii=False, separators=(",", ":"))
        keys = [self.keys.clock, self.keys.schedules]
        args = [self._now_arg(), row.name, text]
        value = await self._eval("add_schedule", "schedule_put", keys, args)
        return _row(row.name, str(decode_text(value)))

    async def delete_schedule(self: _Runner, name: str) -> bool:
        removed = await self._send("remove_schedule", ("HDEL", self.keys.schedules, name))
        return bool(removed)

    async def schedules(self: _Runner) -> list[ScheduleRow]:
        flat = await self._send("schedules", ("HGETALL", self.keys.schedules))
        pairs = zip(flat[::2], flat[1::2], strict=True) if isinstance(flat, list) else flat.items()
        found = [_row(str(decode_text(name)), str(decode_text(value))) for name, value in pairs]
        return sorted(found, key=lambda row: row.name)
