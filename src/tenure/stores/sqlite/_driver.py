"""SQLite driver: each operation is one ``BEGIN IMMEDIATE`` transaction.

``BEGIN IMMEDIATE`` takes the database's write lock before anything is read, so the store
time read at the start and the conditional update that uses it are atomic with respect to
every other process using the file.

Store time (clock.sql): within one boot of the host, the boot clock (`SystemClock.boot`,
Linux's ``CLOCK_BOOTTIME``) from an anchor kept in the file, so a process whose wall clock
is stepped neither expires live leases nor freezes store time for the others; across
reboots, and for a clock without a boot clock (macOS, Windows, a user's clock), the host's
wall clock. Never below a persisted floor.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..._clock import Clock, SystemClock, boot_clock, checked_store_time
from ..._protocol import Completion, JobRow, Outcome, Renewal, Status, Submission
from ..._resources import migrations
from ..._sqlite import enter_wal
from ..._validate import MAX_GENERATION
from ...errors import StoreLost, StoreUnavailable
from ._control import SQLiteControl
from ._jobs import SQLiteJobsMixin
from ._limits import job_room, spend_token
from ._schedules import SQLiteSchedules
from ._sql import (
    BURY,
    CLAIM,
    CLOCK,
    COMPLETE,
    FIND_LEASES,
    GET,
    HOLDER_UPDATES,
    PACKAGE,
    PICK,
    READ_CLOCK,
    STORE_ID,
    SUBMIT,
    Pick,
    new_outcome,
    new_pick,
    new_row,
    pick_ahead,
    read_row,
    statements,
)
from ._transaction import SQLiteTransaction
from ._unique import submit_one
from ._url import parse_sqlite_url

__all__ = ["SQLiteDriver", "open_sync"]

T = TypeVar("T")


class SQLiteDriver(SQLiteControl, SQLiteJobsMixin, SQLiteSchedules):
    """The store operations of `tenure.stores.abc.Driver` over one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        busy_timeout: float = 30.0,
        synchronous: str = "full",
    ) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.busy_timeout = busy_timeout
        self._clock = clock or SystemClock()
        self._boot = boot_clock(self._clock)
        # The host's wall clock, read twice a claim -> complete cycle: time.time itself for
        # the system clock (whose `time` only calls it), a call fewer each. Another clock's
        # readings are checked (`checked_store_time`): a NaN or an infinity would be
        # written as lease ends that never pass.
        self._checked = type(self._clock) is not SystemClock
        self._wall: Callable[[], float] = self._checked_wall if self._checked else time.time
        self._lock = threading.Lock()
        self._closed = False
        self.poll_interval = 0.02
        # Write transactions this connection committed: `wait_for_jobs` watches them beside
        # PRAGMA data_version, which moves only for other connections' commits (a submit or
        # a lock's release through this same store must wake its waiters too).
        self._commits = 0
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            # One cursor for every write transaction (all under self._lock): a new one per
            # transaction was an allocation and a garbage-collector track on the hot path.
            self._cur = self._conn.cursor()
            # The file this connection writes to: checked by the writes (see _begin).
            self._file = _identity(self.path)
            self._file_checked = time.monotonic()
            if self.path != ":memory:":
                enter_wal(self._conn, busy_timeout)
            # FULL: a committed generation survives power loss. With NORMAL a crash can
            # roll back the last commits and hand out a generation a second time.
            self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self.store_id = self._migrate()
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open SQLite store {self.path!r}: {exc}",
                operation="connect",
                outcome_unknown=False,
            ) from exc

    # -- plumbing ----------------------------------------------------------------------

    def _migrate(self) -> str:
        known = migrations(PACKAGE)
        latest = known[-1][0] if known else 0
        with self._transaction("migrate") as cur:
            version = cur.execute("PRAGMA user_version").fetchone()[0]
            if version > latest:
                raise StoreUnavailable(
                    f"SQLite store {self.path!r} has schema version {version}, newer than this "
                    f"tenure understands ({latest}); upgrade tenure",
                    operation="connect",
                    outcome_unknown=False,
                )
            for number, _name, text in known:
                if number > version:
                    for statement in statements(text):
                        cur.execute(statement)
                    cur.execute(f"PRAGMA user_version = {number:d}")
            row = cur.execute(STORE_ID).fetchone()
            if row is None:
                store_id = uuid.uuid4().hex
                cur.execute(
                    "INSERT INTO tenure_meta (key, value) VALUES ('store_id', ?)", (store_id,)
                )
                return store_id
            return str(row[0])

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _begin(self, operation: str) -> sqlite3.Cursor:
        """Start a write transaction; the caller holds ``self._lock``."""
        if self._closed:
            raise StoreUnavailable(
                f"{operation}: this store was closed", operation=operation, outcome_unknown=False
            )
        cur = self._cur
        try:
            cur.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(
                f"{operation}: SQLite store {self.path!r} is busy or unreadable ({exc}); "
                "nothing was changed, retry later",
                operation=operation,
                outcome_unknown=False,
            ) from exc
        # A stat per write cost 7 % of a claim -> complete cycle (sqlite_cycle.py), so a
        # write checks only when the last check is FILE_CHECK_EVERY old: at most that long
        # of this client's writes can land in a file that was replaced meanwhile. (The age
        # test is here rather than in _replaced: one call fewer per write.)
        if (
            self._file is not None
            and time.monotonic() - self._file_checked >= FILE_CHECK_EVERY
            and self._replaced()
        ):
            self._conn.rollback()
            raise self._lost(operation)
        return cur

    def _replaced(self) -> bool:
        self._file_checked = time.monotonic()
        return _identity(self.path) != self._file

    def _lost(self, operation: str) -> StoreLost:
        # The file at the path is not the one this connection writes to: it was replaced
        # (an older copy moved into place, say) or removed. Other processes opening the path
        # now see other generations, so this one must not hand out more.
        return StoreLost(
            f"{operation}: the SQLite store {self.path!r} is no longer the file this client "
            "opened (it was replaced, for instance by an older copy, or removed), so "
            "generations could be issued twice. This client refuses to go on: stop the "
            "workers and read 'A store that lost its memory' in docs/how-it-works.md before "
            "starting them again; nothing changed",
            operation=operation,
            outcome_unknown=False,
        )

    def _commit(self, cur: sqlite3.Cursor, operation: str) -> None:
        try:
            cur.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._commit_failed(operation, exc) from exc
        self._commits += 1  # (under self._lock)

    def _commit_failed(self, operation: str, exc: sqlite3.Error) -> StoreUnavailable:
        self._conn.rollback()
        return StoreUnavailable(
            f"{operation}: SQLite commit failed ({exc}); the operation did not take effect",
            operation=operation,
            outcome_unknown=False,
        )

    @contextmanager
    def _transaction(self, operation: str) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cur = self._begin(operation)
            try:
                yield cur
            except BaseException:
                self._conn.rollback()
                raise
            self._commit(cur, operation)

    def _checked_wall(self) -> float:
        return checked_store_time(self._clock.time())

    def clock_params(self) -> dict[str, Any]:
        """The host's clocks for clock.sql and read_clock.sql. A write reads them once it
        holds the write lock, so a writer that waited reads them after its predecessor."""
        boot = None if self._boot is None else self._boot()
        boot_id, boot_now = (None, None) if boot is None else boot
        if boot_now is not None and self._checked:
            boot_now = checked_store_time(boot_now)
        return {"host_now": self._wall(), "boot_id": boot_id, "boot_now": boot_now}

    def _write(self, operation: str, body: Callable[..., T], *args: Any) -> T:
        """``body(cur, now, *args)`` in a write transaction, at the store time ``now``.

        `_transaction` spelled out (and `_commit` in it): this is the hot path, and a
        generator-based context manager costs more than the statements' Python side. The
        ``args`` spare the hot operations a closure each."""
        with self._lock:
            cur = self._begin(operation)
            try:
                now = cur.execute(CLOCK, self.clock_params()).fetchone()[0]
                result = body(cur, now, *args)
            except BaseException:
                self._conn.rollback()
                raise
            try:
                cur.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._commit_failed(operation, exc) from exc
            self._commits += 1  # (`_commit`, spelled out)
            return result

    def _answer(
        self, cur: sqlite3.Cursor, now: float, job_id: str, applied: JobRow | None
    ) -> Outcome:
        if applied is not None:
            return Outcome(Status.APPLIED, applied, now)
        current = read_row(cur, GET, {"job_id": job_id})
        return Outcome(Status.MISSING if current is None else Status.MISSED, current, now)

    # -- operations --------------------------------------------------------------------

    def now(self) -> float:
        # Raises the persisted floor: a time once reported must not be undercut later, even
        # if the host clock is stepped back before the next write.
        return float(self._write("now", lambda _cur, now: now))

    def submit(
        self,
        job_id: str,
        queue: str,
        payload: str | None,
        delay: float,
        max_attempts: int,
        priority: int = 0,
        timeout: float | None = None,
        *,
        unique_key: str | None = None,
        unique_for: float | None = None,
        headers: str | None = None,
    ) -> Outcome:
        if unique_key is not None:
            keyed = Submission(
                job_id,
                queue,
                payload,
                delay,
                max_attempts,
                priority,
                timeout,
                unique_key,
                unique_for,
                headers,
            )
            return self._write("submit", lambda cur, now: submit_one(cur, now, keyed))
        params: dict[str, Any] = {
            "job_id": job_id,
            "queue": queue,
            "payload": payload,
            "delay": delay,
            "max_attempts": max_attempts,
            "priority": priority,
            "timeout": timeout,
            "headers": headers,
        }

        def body(cur: sqlite3.Cursor, now: float) -> Outcome:
            params["now"] = now
            created = read_row(cur, SUBMIT, params)
            return self._answer(cur, now, job_id, created)

        return self._write("submit", body)

    def _claim_one(
        self, cur: sqlite3.Cursor, now: float, job_id: str, owner: str, ttl: float, secret_hash: str
    ) -> JobRow | None:
        params = {
            "job_id": job_id,
            "owner": owner,
            "ttl": ttl,
            "secret_hash": secret_hash,
            "now": now,
            "max_generation": MAX_GENERATION,
        }
        return read_row(cur, CLAIM, params)

    def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome:
        def body(cur: sqlite3.Cursor, now: float) -> Outcome:
            # Queue limits and rates: a claim by id respects its queue's as claim_next does.
            room, rated = job_room(cur, job_id, now)
            claimed = None
            if room:
                claimed = self._claim_one(cur, now, job_id, owner, ttl, secret_hash)
                if claimed is not None and rated:
                    spend_token(cur, claimed.queue, now)
            if claimed is None:
                buried = read_row(cur, BURY, {"job_id": job_id, "now": now})
                if buried is not None:
                    return Outcome(Status.BURIED, buried, now)
            return self._answer(cur, now, job_id, claimed)

        return self._write("claim", body)

    def _claim_each(
        self,
        cur: sqlite3.Cursor,
        now: float,
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> list[Outcome]:
        """claim_next's body: one claim per secret hash, highest priority then oldest job
        first, and each job buried on the way (see `Driver.claim_next`).

        The statements' Python side is most of what a claim costs here beyond SQLite's own
        work (issue #19), so this runs them without helper calls: the parameters of each
        statement are built once and updated, the rows and answers made by `new_pick`,
        `new_row` and `new_outcome`."""
        claimed: list[Outcome] = []
        execute = cur.execute
        pick_params: dict[str, Any] = {"queue": None, "now": now, "max_generation": MAX_GENERATION}
        claim_params: dict[str, Any] = {
            "job_id": None,
            "owner": owner,
            "ttl": ttl,
            "secret_hash": None,
            "now": now,
            "max_generation": MAX_GENERATION,
        }
        # Queue limits: PICK finds nothing in a full queue (pick.sql says how).
        for secret_hash in secret_hashes:
            while True:
                # The best head of the given queues: the highest priority, then the oldest
                # by (available_at, seq), the first queue winning a tie.
                best: Pick | None = None
                for queue in queues:
                    pick_params["queue"] = queue
                    for found in execute(PICK, pick_params):  # up to two rows (pick.sql)
                        pick = new_pick(found)
                        if best is None or pick_ahead(pick, best):
                            best = pick
                if best is None:
                    return claimed
                if best.state == "leased" and best.attempts >= best.max_attempts:
                    buried = read_row(cur, BURY, {"job_id": best.job_id, "now": now})
                    if buried is not None:
                        claimed.append(Outcome(Status.BURIED, buried, now))
                    continue
                claim_params["job_id"] = best.job_id
                claim_params["secret_hash"] = secret_hash
                row = execute(CLAIM, claim_params).fetchone()
                if row is not None:
                    claimed.append(new_outcome((Status.APPLIED, new_row(row), now)))
                    if best.rated:  # queue rates: the lease takes a token (pick.sql)
                        spend_token(cur, row[1], now)
                break
        return claimed

    def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        return self._write("claim_next", self._claim_each, owner, ttl, queues, secret_hashes)

    def _holder_update(
        self,
        operation: str,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        **extra: Any,
    ) -> Outcome:
        body = self.holder_body(operation, job_id, owner, generation, secret_hash, **extra)
        return self._write(operation, body)

    def holder_body(
        self,
        operation: str,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        **extra: Any,
    ) -> Callable[[sqlite3.Cursor, float], Outcome]:
        """A holder operation's statement, to run in a write transaction (`_write`, or a
        caller's `SQLiteTransaction`)."""
        statement = HOLDER_UPDATES[operation]
        params = {
            "job_id": job_id,
            "owner": owner,
            "generation": generation,
            "secret_hash": secret_hash,
            **extra,
        }

        def body(cur: sqlite3.Cursor, now: float) -> Outcome:
            params["now"] = now
            applied = read_row(cur, statement, params)
            return self._answer(cur, now, job_id, applied)

        return body

    def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome:
        return self._holder_update("renew", job_id, owner, generation, secret_hash, ttl=ttl)

    def renew_many(self, renewals: Sequence[Renewal]) -> list[Outcome]:
        # One write transaction for the lot, at one store time: one lock hand-over and one
        # flush, where separate renewals pay one each.
        def body(cur: sqlite3.Cursor, now: float) -> list[Outcome]:
            return self._each(cur, now, HOLDER_UPDATES["renew"], renewals)

        return self._write("renew", body) if renewals else []

    def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        # The hot half of a claim -> complete cycle: `holder_body` spelled out.
        params = {
            "job_id": job_id,
            "owner": owner,
            "generation": generation,
            "secret_hash": secret_hash,
            "receipt": receipt,
            "result": result,
        }
        return self._write("complete", self._complete_one, params)

    def _complete_one(self, cur: sqlite3.Cursor, now: float, params: dict[str, Any]) -> Outcome:
        params["now"] = now
        found = cur.execute(COMPLETE, params).fetchone()
        if found is not None:
            return new_outcome((Status.APPLIED, new_row(found), now))
        return self._answer(cur, now, params["job_id"], None)

    def _each(
        self,
        cur: sqlite3.Cursor,
        now: float,
        statement: str,
        items: Sequence[Completion | Renewal],
    ) -> list[Outcome]:
        """A batch's body (complete_many, renew_many): ``statement`` for each item (its
        fields its parameters), each checked on its own, answered in order."""
        outcomes = []
        for item in items:
            params = item._asdict()
            params["now"] = now
            applied = read_row(cur, statement, params)
            outcomes.append(self._answer(cur, now, item.job_id, applied))
        return outcomes

    def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        # One write transaction for the lot: one lock hand-over and one flush, where
        # separate completes pay one each.
        def body(cur: sqlite3.Cursor, now: float) -> list[Outcome]:
            return self._each(cur, now, COMPLETE, completions)

        return self._write("complete", body)

    def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        # complete_many then claim_next in one write transaction, at one store time: the
        # claim's picks see the jobs the completions just finished.
        def body(cur: sqlite3.Cursor, now: float) -> tuple[list[Outcome], list[Outcome]]:
            completed = self._each(cur, now, COMPLETE, completions)
            return completed, self._claim_each(cur, now, owner, ttl, queues, secret_hashes)

        return self._write("complete_and_claim", body)

    def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome:
        return self._holder_update(
            "release", job_id, owner, generation, secret_hash, receipt=receipt
        )

    def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        error: str,
        retry_in: float,
    ) -> Outcome:
        return self._holder_update(
            "fail",
            job_id,
            owner,
            generation,
            secret_hash,
            receipt=receipt,
            error=error,
            retry_in=retry_in,
        )

    def get(self, job_id: str) -> Outcome:
        with self._lock:
            now = self._conn.execute(READ_CLOCK, self.clock_params())
            as_of = float(now.fetchone()[0])
            row = read_row(self._conn.cursor(), GET, {"job_id": job_id})
        return Outcome(Status.MISSING if row is None else Status.APPLIED, row, as_of)

    def find_leases(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        params = {
            "owner": owner,
            "ttl": ttl,
            "queues": json.dumps(list(queues)),
            "secret_hashes": json.dumps(list(secret_hashes)),
        }
        with self._lock:
            now = self._conn.execute(READ_CLOCK, self.clock_params())
            params["now"] = as_of = float(now.fetchone()[0])
            found = self._conn.execute(FIND_LEASES, params).fetchall()
        return [Outcome(Status.APPLIED, JobRow._make(row), as_of) for row in found]

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def transaction(
        self, operation: str, conn: sqlite3.Connection | None, payload_limit: int
    ) -> SQLiteTransaction:
        """See `tenure.stores.abc.SQLDriver.transaction`: a connection of its own
        to the store's file (``BEGIN IMMEDIATE``), or ``conn``, a sqlite3 connection the
        caller opened to that file (in any of sqlite3's transaction modes)."""
        return SQLiteTransaction(self, operation, conn, payload_limit)


FILE_CHECK_EVERY = 0.05  # seconds


def _identity(path: str) -> tuple[int, int] | None:
    """The file at ``path`` (device and inode), None for an in-memory store or no file."""
    if path == ":memory:":
        return None
    try:
        found = os.stat(path)
    except OSError:
        return (-1, -1)  # removed: not the file that was opened
    return (found.st_dev, found.st_ino)


def open_sync(url: str, clock: Clock | None) -> SQLiteDriver:
    return SQLiteDriver(clock=clock, **parse_sqlite_url(url))
