"""Store schedules on the store API, async: `add_schedule`, `remove_schedule` and
`schedules` (a mixin of `AsyncStore`; ``_store_schedules.py`` is generated from this file).

A store schedule is a periodic job kept in the store instead of in code: every `Worker`
serving its queue reads the list (at start, then every `tenure.worker.SCHEDULES_EVERY`
seconds) and submits its ticks as it does those of its ``@worker.periodic`` schedules, one
job per tick across the fleet (the tick's job id is derived from the schedule's name; see
`tenure._schedule`). The rules are `make_schedule`'s, checked here before the store is
touched, so a schedule in the store is one every worker can run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ._schedule import ScheduleRow, make_schedule
from ._validate import (
    DEFAULT_MAX_ATTEMPTS,
    decode_json,
    encode_json,
    validate_attempts,
    validate_id,
)
from .errors import InvalidArgument
from .models import StoredSchedule
from .stores.abc import AsyncDriver

__all__ = ["AsyncStoreSchedules", "stored_schedule"]

T = TypeVar("T")

log = logging.getLogger("tenure")


class _Host(Protocol):
    """What the mixin uses of `AsyncStore`."""

    @property
    def _driver(self) -> AsyncDriver: ...

    @property
    def _payload_limit(self) -> int: ...

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T: ...


def stored_schedule(row: ScheduleRow) -> StoredSchedule:
    """The user's view of a driver's row (the payload decoded)."""
    return StoredSchedule(
        name=row.name,
        cron=row.cron,
        queue=row.queue,
        payload=decode_json(row.payload),
        timezone=row.timezone,
        catch_up=row.catch_up,
        max_attempts=row.max_attempts,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class AsyncStoreSchedules:
    """`AsyncStore`'s store-schedule methods."""

    async def add_schedule(
        self: _Host,
        name: str,
        cron: str,
        *,
        queue: str,
        payload: Any = None,
        timezone: str = "UTC",
        catch_up: str = "skip",
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> StoredSchedule:
        """Add the schedule ``name``, or replace the one of that name (its ``created_at``
        is kept): every `Worker` serving ``queue`` submits a job with ``payload`` (and
        ``max_attempts``) for each tick of ``cron`` in ``timezone``, one job per tick
        across the fleet, its id ``cron:<name>:<tick UTC>``, as for ``@worker.periodic``
        (``catch_up``: ``"skip"`` or ``"once"``, the same policy). Workers see a change
        within `tenure.worker.SCHEDULES_EVERY` seconds. Bad input raises `InvalidArgument`
        naming the argument and changes nothing. Needs ``tenure[cron]``."""
        try:
            schedule = make_schedule(
                name, cron, queue=queue, payload=payload, tz=timezone, catch_up=catch_up
            )
        except InvalidArgument as exc:
            if exc.argument != "tz":
                raise
            raise InvalidArgument("timezone", exc.rule) from None
        row = ScheduleRow(
            schedule.name,
            schedule.cron,
            schedule.queue,
            encode_json("payload", payload, self._payload_limit),
            schedule.tz,
            schedule.catch_up,
            validate_attempts(max_attempts),
        )

        async def call() -> ScheduleRow:
            return await self._driver.put_schedule(row)

        stored = stored_schedule(await self._call("add_schedule", call))
        log.info(
            "schedule %s set: %r in %s to queue %s",
            stored.name,
            stored.cron,
            stored.timezone,
            stored.queue,
            extra={"schedule": stored.name, "cron": stored.cron, "queue": stored.queue},
        )
        return stored

    async def remove_schedule(self: _Host, name: str) -> bool:
        """Remove the schedule ``name``: workers stop submitting its ticks within
        `tenure.worker.SCHEDULES_EVERY` seconds (jobs already submitted stay). False when
        there was no such schedule (nothing changed)."""
        name = validate_id("name", name)

        async def call() -> bool:
            return await self._driver.delete_schedule(name)

        removed = await self._call("remove_schedule", call)
        if removed:
            log.info("schedule %s removed", name, extra={"schedule": name})
        return removed

    async def schedules(self: _Host) -> list[StoredSchedule]:
        """Every store schedule, by name."""
        rows = await self._call("schedules", self._driver.schedules)
        return [stored_schedule(row) for row in rows]
