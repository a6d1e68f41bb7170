"""Fleet-wide queue limits in the SQLite store (issue #18): the room left in a job's limited
queue, for a claim by id, read inside the claim's own ``BEGIN IMMEDIATE`` transaction (a
claim of the next jobs reads it in its pick, ``pick.sql``). SQLite lets one writer at a time
into the file, so the count and the claims that follow it are atomic with respect to every
other process: no interleaving of claims exceeds a limit."""

from __future__ import annotations

import sqlite3

from ..._resources import load_text

__all__ = ["job_room"]

_PACKAGE = __package__ or "tenure.stores.sqlite"
_JOB_ROOM = load_text(_PACKAGE, "sql/job_room.sql")


def job_room(cur: sqlite3.Cursor, job_id: str, now: float) -> int | None:
    """The room of the job's queue at ``now``, or None when it is unlimited (or the job is
    missing)."""
    found = cur.execute(_JOB_ROOM, {"job_id": job_id, "now": now}).fetchone()
    return None if found is None else int(found[0])
