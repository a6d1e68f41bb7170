"""What `Store.queue_stats` answers: the jobs waiting and running in each queue, counted by
the store in one bounded operation (no I/O here).

Only the live jobs are counted (``ready`` and ``leased``: the backlog and the work in
hand), because the stores index them apart from finished ones: the count costs as much as
the backlog, not the whole history. ``done`` and ``dead`` jobs are not counted here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["QueueStats", "StoreStats", "store_stats"]


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's live jobs at store time ``as_of``.

    ``ready``: ready and due (claimable now); ``scheduled``: ready but not due yet (a delay
    or a retry's backoff); ``leased``: held under a lease that has not expired; ``expired``:
    leased, the lease expired, not claimed again yet (claimable: the next claim takes it,
    or buries it if that was its last attempt). ``oldest_ready_at``: the ``available_at``
    of the oldest due ready job (None when none is due).
    """

    queue: str
    ready: int
    scheduled: int
    leased: int
    expired: int
    oldest_ready_at: float | None
    as_of: float

    @property
    def oldest_ready_age(self) -> float:
        """Seconds the oldest due ready job has waited (0 when none is due)."""
        if self.oldest_ready_at is None:
            return 0.0
        return max(0.0, self.as_of - self.oldest_ready_at)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Every queue with live jobs, by name, read at store time ``as_of``."""

    as_of: float
    queues: tuple[QueueStats, ...]

    def queue(self, name: str) -> QueueStats | None:
        return next((found for found in self.queues if found.queue == name), None)


def store_stats(now: float, rows: Iterable[tuple[Any, ...]]) -> StoreStats:
    """A driver's answer, ``(queue, ready, scheduled, leased, expired, oldest_ready_at)``
    per queue, as a `StoreStats`."""
    queues = tuple(
        QueueStats(
            queue=str(queue),
            ready=int(ready),
            scheduled=int(scheduled),
            leased=int(leased),
            expired=int(expired),
            oldest_ready_at=None if oldest is None else float(oldest),
            as_of=now,
        )
        for queue, ready, scheduled, leased, expired, oldest in rows
    )
    return StoreStats(now, tuple(sorted(queues, key=lambda found: found.queue)))
