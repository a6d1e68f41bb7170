"""The SQLite store's statements (``sql/*.sql``, read once) and the small helpers that run
them: shared by the driver and its transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, NamedTuple

from ..._protocol import JobRow, Outcome
from ..._resources import load_text

__all__ = [
    "ATTEMPTS",
    "BATCH_ROWS",
    "BURY",
    "CLAIM",
    "CLOCK",
    "COMPLETE",
    "EXISTING",
    "FIND_LEASES",
    "GET",
    "HOLDER_UPDATES",
    "LIST_PAGE",
    "NEXT_DUE",
    "PACKAGE",
    "PICK",
    "QUEUE_STATS",
    "READ_CLOCK",
    "STORE_ID",
    "SUBMIT",
    "SUBMIT_MANY",
    "SUBMIT_UNIQUE",
    "UNIQUE_HOLDER",
    "UNIQUE_RELEASE",
    "Pick",
    "new_outcome",
    "new_pick",
    "new_row",
    "pick_ahead",
    "read_row",
    "statements",
]

PACKAGE = __package__ or "tenure.stores.sqlite"


def _load(name: str) -> str:
    return load_text(PACKAGE, f"sql/{name}.sql")


# Read once: the hot path only passes these strings to sqlite3, whose per-connection
# statement cache then skips parsing.
ATTEMPTS = _load("attempts")
BATCH_ROWS = _load("batch_rows")
BURY = _load("bury")
CLAIM = _load("claim")
CLOCK = _load("clock")
EXISTING = _load("existing")
FIND_LEASES = _load("find_leases")
GET = _load("get")
LIST_PAGE = _load("list_page")
NEXT_DUE = _load("next_due")
PICK = _load("pick")
QUEUE_STATS = _load("queue_stats")
READ_CLOCK = _load("read_clock")
STORE_ID = _load("store_id")
SUBMIT = _load("submit")
# Unique jobs (issue #18).
SUBMIT_UNIQUE = _load("submit_unique")
UNIQUE_HOLDER = _load("unique_holder")
UNIQUE_RELEASE = _load("unique_release")
SUBMIT_MANY = _load("submit_many")
HOLDER_UPDATES = {name: _load(name) for name in ("renew", "complete", "release", "fail")}
COMPLETE = HOLDER_UPDATES["complete"]


class Pick(NamedTuple):
    """A row of pick.sql, by the names of its columns (a test holds the two together)."""

    job_id: str
    state: str
    attempts: int
    max_attempts: int
    available_at: float
    seq: int
    priority: int
    rated: int | None  # the queue is rate-limited: a lease granted spends a token


def pick_ahead(pick: Pick, best: Pick) -> bool:
    """Whether ``pick`` is claimed before ``best``: higher priority, then older."""
    ahead = (-pick.priority, pick.available_at, pick.seq)
    return ahead < (-best.priority, best.available_at, best.seq)


# A fetched row as a JobRow (a Pick) on the hot path (a claim's pick and claim, a complete):
# what ``JobRow._make`` does, without its Python frame and its length check. The statements
# fix the rows' length: pick.sql answers Pick's fields, claim.sql's and complete.sql's
# RETURNING lists JOB_COLUMNS (tests/sqlite/test_rows.py holds them together).
new_row: Callable[[Sequence[Any]], JobRow] = partial(tuple.__new__, JobRow)
new_pick: Callable[[Sequence[Any]], Pick] = partial(tuple.__new__, Pick)
# ``Outcome(status, row, now)`` of the tuple ``(status, row, now)``, likewise.
new_outcome: Callable[[tuple[str, JobRow | None, float]], Outcome] = partial(tuple.__new__, Outcome)


def read_row(cur: sqlite3.Cursor, statement: str, params: dict[str, Any]) -> JobRow | None:
    """The one job row a statement answers (in JOB_COLUMNS order), or None."""
    found = cur.execute(statement, params).fetchone()
    return None if found is None else JobRow._make(found)


def statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements (triggers included)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if _has_sql(pending):
                yield pending
            pending = ""
    if _has_sql(pending):
        raise ValueError(f"incomplete SQL statement at the end of a migration: {pending!r}")


def _has_sql(text: str) -> bool:
    """False for text made only of blank lines and ``--`` comments."""
    return any(line.strip() and not line.strip().startswith("--") for line in text.splitlines())
