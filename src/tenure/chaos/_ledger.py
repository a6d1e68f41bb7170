"""After a run: the fenced sink's ledger (what it accepted, what it refused) into the
history, read page by page."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ._history import Recorder

__all__ = ["record_sink"]

Row = dict[str, Any]

# The history's name for each column of the sink's rows, in the events' field order.
RECORD_FIELDS = {
    "record": "id",
    "job": "job_id",
    "gen": "generation",
    "key": "effect_key",
    "accepted_at": "accepted_at",
}
REJECTION_FIELDS = {
    "rejection": "id",
    "kind": "kind",
    "status": "status",
    "job": "job_id",
    "presented": "presented_generation",
    "current": "current_generation",
    "key": "effect_key",
    "rejected_at": "rejected_at",
}


def record_sink(db: Path, rec: Recorder) -> None:
    """One ``sink-record`` event per accepted write and one ``sink-rejection`` per refusal,
    each in the sink's own order."""
    from ..fence.sink import MAX_PAGE, Sink

    sink = Sink(db)
    try:
        ledgers = (
            ("sink-record", sink.records, RECORD_FIELDS),
            ("sink-rejection", sink.rejections, REJECTION_FIELDS),
        )
        for name, read, fields in ledgers:
            for row in _pages(read, MAX_PAGE):
                rec.event(name, **{field: row[column] for field, column in fields.items()})
    finally:
        sink.close()


def _pages(read: Callable[[str | None, int, int], list[Row]], size: int) -> Iterator[Row]:
    """Every row of a ledger, read ``size`` at a time: ``read(job, after, limit)`` gives
    the rows whose id is above ``after`` (every job's: None)."""
    after = 0
    while True:
        page = read(None, after, size)
        yield from page
        if len(page) < size:
            return
        after = page[-1]["id"]
