"""Unique jobs on SQLite (issue #18): a submit with a ``unique_key`` and the batches that
hold one. Every write transaction of the store holds SQLite's write lock from its first
statement (clock.sql), so the holder read here is still the holder when the insert runs:
two processes submitting one key at once are serialized, and one of them creates the job.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..._protocol import JobRow, Outcome, Status, Submission
from ._sql import GET, SUBMIT, SUBMIT_UNIQUE, UNIQUE_HOLDER, UNIQUE_RELEASE, read_row

__all__ = ["submit_one", "submit_each_keyed"]


def submit_one(cur: sqlite3.Cursor, now: float, s: Submission) -> Outcome:
    """One submission at store time ``now``, inside a write transaction: ``APPLIED`` with
    the new row, or ``MISSED`` with the job of that id, or with the job holding its key."""
    if s.unique_key is None:
        created = read_row(cur, SUBMIT, _params(s, now))
    else:
        existing = read_row(cur, GET, {"job_id": s.job_id})
        if existing is not None:  # the id first, as for any submit
            return Outcome(Status.MISSED, existing, now)
        found = cur.execute(UNIQUE_HOLDER, {"unique_key": s.unique_key, "now": now}).fetchone()
        if found is not None:
            if found[-1]:  # still holds it: answered instead of a new job
                return Outcome(Status.MISSED, JobRow._make(found[:-1]), now)
            cur.execute(UNIQUE_RELEASE, {"job_id": found[0]})
        created = read_row(cur, SUBMIT_UNIQUE, _params(s, now))
    if created is not None:
        return Outcome(Status.APPLIED, created, now)
    return Outcome(Status.MISSED, read_row(cur, GET, {"job_id": s.job_id}), now)


def submit_each_keyed(
    cur: sqlite3.Cursor, now: float, batch: Sequence[Submission]
) -> list[Outcome]:
    """A batch of which some jobs have keys: one by one, in input order (so that of two
    jobs with one key, the first takes it), in the caller's write transaction."""
    return [submit_one(cur, now, s) for s in batch]


def _params(s: Submission, now: float) -> dict[str, object]:
    return {
        "job_id": s.job_id,
        "queue": s.queue,
        "payload": s.payload,
        "delay": s.delay,
        "max_attempts": s.max_attempts,
        "priority": s.priority,
        "timeout": s.timeout,
        "now": now,
        "unique_key": s.unique_key,
        "unique_for": s.unique_for,
        "headers": s.headers,
    }
