"""Fleet-wide queue limits in the SQLite store (issue #18): the room left in limited queues,
read inside a claim's own ``BEGIN IMMEDIATE`` transaction. SQLite lets one writer at a time
into the file, so the count and the claims that follow it are atomic with respect to every
other process: no interleaving of claims exceeds a limit."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ..._resources import load_text

__all__ = ["job_room", "queue_room"]

_PACKAGE = __package__ or "tenure.stores.sqlite"
_QUEUE_ROOM, _JOB_ROOM = (load_text(_PACKAGE, f"sql/{n}.sql") for n in ("queue_room", "job_room"))


def queue_room(cur: sqlite3.Cursor, queues: Sequence[str], now: float) -> dict[str, int]:
    """How many more jobs each limited queue of ``queues`` may lease at ``now``; an
    unlimited queue is absent. One statement, a primary-key probe per queue when none is
    limited."""
    params = {"queues": json.dumps(list(queues)), "now": now}
    return {str(queue): int(room) for queue, room in cur.execute(_QUEUE_ROOM, params)}


def job_room(cur: sqlite3.Cursor, job_id: str, now: float) -> int | None:
    """The room of the job's queue at ``now``, or None when it is unlimited (or the job is
    missing)."""
    found = cur.execute(_JOB_ROOM, {"job_id": job_id, "now": now}).fetchone()
    return None if found is None else int(found[0])
