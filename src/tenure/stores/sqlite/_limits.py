"""Fleet-wide queue limits and rates in the SQLite store (issue #18): the room left in a
job's limited or rate-limited queue, for a claim by id, and the token a lease of a
rate-limited queue spends, read inside the claim's own ``BEGIN IMMEDIATE`` transaction (a
claim of the next jobs reads it in its pick, ``pick.sql``). SQLite lets one writer at a time
into the file, so the count and the claims that follow it are atomic with respect to every
other process: no interleaving of claims exceeds a limit."""

from __future__ import annotations

import sqlite3

from ..._resources import load_text

__all__ = ["job_room", "spend_token"]

_PACKAGE = __package__ or "tenure.stores.sqlite"
_JOB_ROOM = load_text(_PACKAGE, "sql/job_room.sql")
_SPEND_TOKEN = load_text(_PACKAGE, "sql/spend_token.sql")


def job_room(cur: sqlite3.Cursor, job_id: str, now: float) -> tuple[bool, bool]:
    """Whether the job's queue may lease one more job at ``now`` (its limit and its rate
    allow it; so does a queue with neither, or a missing job), and whether it is
    rate-limited (a lease granted must then `spend_token`)."""
    found = cur.execute(_JOB_ROOM, {"job_id": job_id, "now": now}).fetchone()
    return (True, False) if found is None else (bool(found[0]), bool(found[1]))


def spend_token(cur: sqlite3.Cursor, queue: str, now: float) -> None:
    """Take one token of the rate-limited ``queue``'s bucket for a lease just granted, in
    the claim's own transaction."""
    cur.execute(_SPEND_TOKEN, {"queue": queue, "now": now})
