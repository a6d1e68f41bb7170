"""The SQLite driver's enqueue-and-wait operations (issue #17): batch submit (one write
transaction), submit on the caller's connection, waiting by short polling (for a job to
finish, for jobs to claim), and listing in pages. A mixin of `SQLiteDriver`, which provides
the connection, lock and write path."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..._protocol import UNFINISHED_STATES, JobFilter, JobRow, Outcome, Status, Submission
from ..._validate import MAX_GENERATION
from ...errors import InvalidArgument, StoreUnavailable
from ._sql import (
    ATTEMPTS,
    BATCH_ROWS,
    CLOCK,
    EXISTING,
    GET,
    LIST_PAGE,
    NEXT_DUE,
    QUEUE_STATS,
    READ_CLOCK,
    STORE_ID,
    SUBMIT_MANY,
    new_outcome,
    read_row,
)
from ._unique import submit_each_keyed

__all__ = ["SQLiteJobsMixin"]

T = TypeVar("T")

# How often a wait looks at its job (one indexed read of one row).
WAIT_POLL = 0.02
_SAVEPOINT = "tenure_submit"


def submit_each(cur: sqlite3.Cursor, now: float, batch: Sequence[Submission]) -> list[Outcome]:
    """submit.sql for each submission, in order, at store time ``now``, inside a write
    transaction: the new row, or the existing job as it is. Three statements at most
    whatever the batch's size (the inserts in one executemany), not two per job; a batch
    with unique keys goes job by job instead (`submit_each_keyed`).

    A new job's row is built here from its submission, as the insert wrote it (ready,
    generation 0, no attempt, available at ``now`` + delay: the same double SQLite adds),
    rather than read back; only the jobs that existed already are read, as they are. The
    store refuses a batch that names an id twice, so each id is one row."""
    if any(s.unique_key is not None for s in batch):
        return submit_each_keyed(cur, now, batch)
    ids = json.dumps([s.job_id for s in batch], ensure_ascii=False)
    existing = {row[0] for row in cur.execute(EXISTING, {"ids": ids})}
    new = [s for s in batch if s.job_id not in existing] if existing else batch
    cur.executemany(
        SUBMIT_MANY,
        [
            (s.job_id, s.queue, now, s.delay, s.max_attempts, s.payload, now, now, s.priority,
             s.timeout, s.headers)
            for s in new
        ],
    )  # fmt: skip
    found: dict[str, JobRow] = {}
    if existing:
        known = json.dumps(sorted(existing), ensure_ascii=False)
        found = {row[0]: JobRow._make(row) for row in cur.execute(BATCH_ROWS, {"ids": known})}
    outcomes: list[Outcome] = []
    append = outcomes.append
    for s in batch:
        row = found.get(s.job_id)
        if row is not None:
            append(Outcome(Status.MISSED, row, now))
            continue
        row = s.new_row(now)
        append(new_outcome((Status.APPLIED, row, now)))
    return outcomes


class SQLiteJobsMixin:
    """`attempts`, `queue_stats`, `submit_many`, `submit_joined`, `wait_job` and `list_jobs`
    of `SQLiteDriver`."""

    if TYPE_CHECKING:
        path: str
        store_id: str
        _conn: sqlite3.Connection
        _lock: threading.Lock
        _closed: bool
        _commits: int
        poll_interval: float

        def _write(self, operation: str, body: Callable[[sqlite3.Cursor, float], T]) -> T: ...

        def clock_params(self) -> dict[str, Any]: ...

    def attempts(self, job_id: str) -> list[tuple[Any, ...]]:
        """The job's attempts, oldest first (see `tenure.AsyncStore.attempts`)."""
        with self._lock:
            return [tuple(row) for row in self._conn.execute(ATTEMPTS, {"job_id": job_id})]

    def queue_stats(self) -> tuple[float, list[tuple[Any, ...]]]:
        """The live jobs of each queue (see `tenure._queue_stats`): one statement over the
        partial index of claimable jobs, at the store time read just before it."""
        with self._lock:
            now = self._conn.execute(READ_CLOCK, self.clock_params())
            as_of = float(now.fetchone()[0])
            found = self._conn.execute(QUEUE_STATS, {"now": as_of}).fetchall()
        return as_of, [tuple(row) for row in found]

    def submit_many(self, submissions: Sequence[Submission]) -> list[Outcome]:
        # One write transaction for the batch: one lock hand-over and one flush.
        return self._write("submit_many", lambda cur, now: submit_each(cur, now, submissions))

    def submit_joined(self, conn: Any, submissions: Sequence[Submission]) -> list[Outcome]:
        """`submit_many` on the caller's sqlite3 connection, in its transaction. A
        connection in sqlite3's default mode begins one before the first write (as for any
        write of the caller's) and the caller commits; inside the caller's transaction the
        batch is a savepoint of it; an autocommit connection (``isolation_level=None``)
        outside a transaction commits the batch at once, atomically."""
        if not isinstance(conn, sqlite3.Connection):
            raise InvalidArgument(
                "conn",
                f"must be a sqlite3 connection to the store's file, not {type(conn).__name__}",
            )
        try:
            row = conn.execute(STORE_ID).fetchone()
        except sqlite3.Error:
            row = None
        if row is None or row[0] != self.store_id:
            raise InvalidArgument("conn", "is not connected to this store's SQLite database")
        cur = conn.cursor()
        own = conn.isolation_level is None and not conn.in_transaction
        try:
            if own:
                cur.execute(f"SAVEPOINT {_SAVEPOINT}")
            now = cur.execute(CLOCK, self.clock_params()).fetchone()[0]
            outcomes = submit_each(cur, now, submissions)
            if own:
                cur.execute(f"RELEASE {_SAVEPOINT}")
            return outcomes
        except sqlite3.Error as exc:
            if own and conn.in_transaction:
                cur.execute(f"ROLLBACK TO {_SAVEPOINT}")
                cur.execute(f"RELEASE {_SAVEPOINT}")
            raise StoreUnavailable(
                f"submit: SQLite store {self.path!r} refused the submit on your connection "
                f"({exc}); roll back your transaction and try again",
                operation="submit",
                outcome_unknown=False,
            ) from exc
        finally:
            cur.close()

    def _read_job(self, job_id: str) -> Outcome:
        with self._lock:
            if self._closed:
                raise StoreUnavailable(
                    "wait: this store was closed", operation="wait", outcome_unknown=False
                )
            as_of = float(self._conn.execute(READ_CLOCK, self.clock_params()).fetchone()[0])
            row = read_row(self._conn.cursor(), GET, {"job_id": job_id})
        return Outcome(Status.MISSING if row is None else Status.APPLIED, row, as_of)

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        # SQLite cannot notify: watch PRAGMA data_version, which changes when another
        # connection commits, and this connection's own commits; and wake up when the
        # earliest pending job falls due. A commit wakes the waiter only if it moved a
        # queue's next due moment earlier, or ended its pending jobs (`_woken`): idle
        # workers' claims that take nothing, and renewals, write too, and waiters woken by
        # each of those woke each other in turn.
        until = time.monotonic() + timeout
        with self._lock:
            version = self._version()
            now, dues = self._dues(queues)
        ends = _sooner(until, now, dues)
        while (remaining := ends - time.monotonic()) > 0:
            time.sleep(min(self.poll_interval, remaining))
            with self._lock:
                if self._closed:
                    return
                if (seen := self._version()) == version:
                    continue
                version = seen
                now, later = self._dues(queues)
            if _woken(dues, later):
                return
            dues, ends = later, _sooner(until, now, later)

    def _dues(self, queues: Sequence[str]) -> tuple[float, list[float | None]]:
        """The store's time, and when each queue's next job becomes claimable (None: no
        job pending); under self._lock."""
        now = float(self._conn.execute(READ_CLOCK, self.clock_params()).fetchone()[0])
        dues: list[float | None] = []
        for queue in queues:
            due = self._conn.execute(
                NEXT_DUE, {"queue": queue, "max_generation": MAX_GENERATION, "now": now}
            ).fetchone()
            dues.append(None if due is None else float(due[0]))
        return now, dues

    def _version(self) -> tuple[int, int]:
        """What moves with each commit to the file, by any connection; under self._lock."""
        return self._conn.execute("PRAGMA data_version").fetchone()[0], self._commits

    def wait_job(self, job_id: str, timeout: float) -> Outcome:
        # SQLite cannot notify: look every WAIT_POLL seconds (a read of one row by key).
        deadline = time.monotonic() + timeout
        while True:
            outcome = self._read_job(job_id)
            if outcome.row is None or outcome.row.state not in UNFINISHED_STATES:
                return outcome
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return outcome
            time.sleep(min(WAIT_POLL, remaining))

    def list_jobs(self, selection: JobFilter) -> tuple[float, list[JobRow], int | None]:
        with self._lock:
            as_of = float(self._conn.execute(READ_CLOCK, self.clock_params()).fetchone()[0])
            params = {
                "after": -1 if selection.after is None else selection.after,
                "queue": selection.queue,
                "state": selection.state,
                "owner": selection.owner,
                "created_before": (
                    None if selection.older_than is None else as_of - selection.older_than
                ),
                "limit": selection.limit + 1,  # one more: is there a next page?
            }
            found = self._conn.execute(LIST_PAGE, params).fetchall()
        page = found[: selection.limit]
        rows = [JobRow._make(row[:-1]) for row in page]
        return as_of, rows, int(page[-1][-1]) if len(found) > selection.limit else None


def _sooner(until: float, now: float, dues: list[float | None]) -> float:
    """When a wait ends (monotonic time): at ``until``, or when a queue's next job falls
    due (``dues``, store times read at store time ``now``, just now), if sooner."""
    pending = [due for due in dues if due is not None]
    if not pending:
        return until
    return min(until, time.monotonic() + max(0.0, min(pending) - now))


def _woken(before: list[float | None], after: list[float | None]) -> bool:
    """Whether a commit may have made a job claimable sooner than the wait expected: a
    queue's next due moment came earlier, or its pending jobs ended (a cancel: a lock's
    waiter must find out)."""
    for old, new in zip(before, after, strict=True):
        if (new is None) != (old is None):
            return True
        if new is not None and old is not None and new < old:
            return True
    return False
