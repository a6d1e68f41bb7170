"""submit_many is one round trip (docs/design.md §7; docs/reference.md's submit_many row).

``store.submit_many(jobs)`` of 1000 jobs (the most a batch may hold) is one call of the
driver and, on the wire, one store operation that commits once, as each store's
documentation says: PostgreSQL one statement (``submit_many.sql``) in one round trip,
committed once; SQLite one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``, nothing outside
it); Redis one script run (``submit_many.lua``), atomic by itself.

What goes out is read at the client library, under the driver, from before the store is
opened (every connection it makes is seen): SQLite's statements through its connections'
trace callbacks; PostgreSQL's protocol messages through libpq's own trace of each
connection; Redis's requests as the bytes handed to redis-py's connections (and their
replies). Both batches of new jobs and batches half of jobs that exist already are checked:
the existing ones must be answered in the same operation, not read one by one.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tenure
from tests.backends import Backend, postgres_admin
from tests.conformance._support import CountingCalls

BATCH = 1000


# -- the taps: what the client library sends, per store ------------------------------------
# Each is installed before the store is opened (so it sees every connection the store
# makes) and records only inside its ``recording()`` block.


class _Tap:
    """What every tap shares: it records only inside `recording`."""

    _on = False

    @contextmanager
    def recording(self) -> Iterator[None]:
        self._on = True
        try:
            yield
        finally:
            self._on = False


class SQLiteTap(_Tap):
    """Every statement SQLite runs on the store's connections (their trace callbacks)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.statements: list[str] = []
        original = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = original(*args, **kwargs)
            conn.set_trace_callback(self._record)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    def _record(self, statement: str) -> None:
        if self._on:  # the statement's words, without its comments
            code = (line.partition("--")[0] for line in statement.splitlines())
            self.statements.append(" ".join(" ".join(code).split()))

    def assert_one_operation(self, store: tenure.Store, url: str, new_ids: list[str]) -> None:
        """One transaction: it begins first and commits last, once; nothing runs outside
        it, nothing is rolled back, no savepoint splits it."""
        statements = self.statements
        assert statements, "no statement was seen: the tap is not under the store"
        assert statements[0] == "BEGIN IMMEDIATE", statements[:3]
        assert statements[-1] == "COMMIT", statements[-3:]
        kinds = Counter(statement.split()[0].upper() for statement in statements)
        assert (kinds["BEGIN"], kinds["COMMIT"], kinds["END"]) == (1, 1, 0), kinds
        assert not {"ROLLBACK", "SAVEPOINT", "RELEASE"} & set(kinds), kinds


_TRACED_MESSAGE = re.compile(
    r"^(?P<direction>[FB])\t\d+\t(?P<kind>[A-Za-z]+)(?:\t(?P<text>.*))?$", re.MULTILINE
)


class PostgresTap(_Tap):
    """Every protocol message between the store's connections and the server: libpq's own
    trace of each connection (``PQtrace``), one file per connection."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        import psycopg

        self._psycopg = psycopg
        self._dir = tmp_path / "pq-trace"
        self._dir.mkdir()
        self._conns: list[Any] = []
        self._traced: list[Any] = []
        original = psycopg.Connection.connect

        def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
            conn = original.__func__(cls, *args, **kwargs)  # type: ignore[attr-defined]
            self._conns.append(conn)
            if self._on:
                self._trace(conn)
            return conn

        monkeypatch.setattr(psycopg.Connection, "connect", classmethod(connect))

    def _trace(self, conn: Any) -> None:
        # libpq takes the descriptor (fdopen) and closes it when the trace ends.
        fd = os.open(self._dir / f"{len(self._traced)}.trace", os.O_WRONLY | os.O_CREAT)
        conn.pgconn.trace(fd)
        trace = self._psycopg.pq.Trace
        conn.pgconn.set_trace_flags(trace.SUPPRESS_TIMESTAMPS | trace.REGRESS_MODE)
        self._traced.append(conn)

    @contextmanager
    def recording(self) -> Iterator[None]:
        for conn in self._conns:
            if not conn.closed:
                self._trace(conn)
        try:
            with super().recording():
                yield
        finally:
            for conn in self._traced:
                conn.pgconn.untrace()  # flushes the trace

    def messages(self) -> list[tuple[str, str, str]]:
        """(F or B, message type, its text) of every message, connection by connection."""
        found = []
        for file in sorted(self._dir.iterdir()):
            # A message is a line of its own; a statement's text goes on over more lines.
            for match in _TRACED_MESSAGE.finditer(file.read_text(errors="replace")):
                found.append((match["direction"], match["kind"], (match["text"] or "").strip()))
        return found

    def assert_one_operation(self, store: tenure.Store, url: str, new_ids: list[str]) -> None:
        """One statement (one Execute, no simple Query: no BEGIN, no COMMIT statement), in
        one round trip (one Sync), run once (one CommandComplete) and committed once: the
        server is idle again after it, never inside an open transaction."""
        messages = self.messages()
        kinds = Counter(f"{direction} {kind}" for direction, kind, _ in messages)
        assert kinds["F Execute"] == 1, kinds
        assert kinds["F Query"] == 0, kinds
        assert kinds["F Sync"] == 1, kinds
        assert kinds["B CommandComplete"] == 1, kinds
        assert kinds["B ErrorResponse"] == 0, kinds
        ready = [text for direction, kind, text in messages if kind == "ReadyForQuery"]
        assert ready == ["I"], ready  # idle after the statement: committed
        # On the server's side: every new row was written by one and the same transaction.
        from psycopg import sql

        from tenure.stores.postgres import parse_postgres_url

        table = sql.Identifier(parse_postgres_url(url).schema, "tenure_jobs")
        query = sql.SQL(
            "SELECT count(*), count(DISTINCT xmin::text) FROM {} WHERE job_id = ANY(%s)"
        ).format(table)
        with postgres_admin() as admin:
            row = admin.execute(query, (new_ids,)).fetchone()
        assert row == (len(new_ids), 1), row


class RedisTap(_Tap):
    """Every request written to the store's redis-py connections, and which replies were
    ``NOSCRIPT`` (a request the server refused without running anything)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        from redis.connection import AbstractConnection
        from redis.exceptions import NoScriptError

        self.requests: list[list[bytes]] = []
        self.noscript = 0
        send: Any = AbstractConnection.send_packed_command
        read: Any = AbstractConnection.read_response

        def send_packed_command(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            if self._on:
                packed = command if isinstance(command, bytes) else b"".join(command)
                self.requests += resp_requests(packed)
            return send(conn, command, *args, **kwargs)

        def read_response(conn: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return read(conn, *args, **kwargs)
            except NoScriptError:
                self.noscript += self._on
                raise

        monkeypatch.setattr(AbstractConnection, "send_packed_command", send_packed_command)
        monkeypatch.setattr(AbstractConnection, "read_response", read_response)

    def assert_one_operation(self, store: tenure.Store, url: str, new_ids: list[str]) -> None:
        """One script run: the one request that ran is ``submit_many.lua`` (EVALSHA, or
        its EVAL after a NOSCRIPT), carrying the whole batch. A script is atomic: nothing
        else runs between its writes, and there is no MULTI/EXEC around it."""
        from tenure.stores.redis._common import SCRIPTS

        script = SCRIPTS["submit_many"]
        names = [request[0].upper() for request in self.requests]
        # Another test's SCRIPT FLUSH on the shared server makes the EVALSHA a NOSCRIPT,
        # which ran nothing, and the driver sends the script's text once (docs/redis.md).
        assert self.noscript in (0, 1), (self.noscript, names)
        assert len(self.requests) == 1 + self.noscript, names
        ran = self.requests[-1]
        if self.noscript:
            assert self.requests[0][:2] == [b"EVALSHA", script.sha.encode()], names
            assert ran[:2] == [b"EVAL", script.text.encode()], names
        else:
            assert ran[:2] == [b"EVALSHA", script.sha.encode()], names
        body = b"\0".join(ran)
        assert all(job_id.encode() in body for job_id in new_ids)


def resp_requests(data: bytes) -> list[list[bytes]]:
    """The requests (arrays of bulk strings) in ``data``, as RESP frames them."""
    requests = []
    at = 0
    while at < len(data):
        assert data[at : at + 1] == b"*", data[at : at + 20]
        end = data.index(b"\r\n", at)
        count, at = int(data[at + 1 : end]), end + 2
        args = []
        for _ in range(count):
            assert data[at : at + 1] == b"$", data[at : at + 20]
            end = data.index(b"\r\n", at)
            size, at = int(data[at + 1 : end]), end + 2
            args.append(data[at : at + size])
            at += size + 2
        requests.append(args)
    return requests


TAPS: dict[str, Callable[[pytest.MonkeyPatch, Path], Any]] = {
    "sqlite": SQLiteTap,
    "postgres": PostgresTap,
    "redis": RedisTap,
}


# -- the test -----------------------------------------------------------------------------


@pytest.mark.parametrize("existing", [0, BATCH // 2], ids=["all-new", "half-existing"])
def test_submit_many_of_a_full_batch_is_one_driver_call_and_one_operation(
    backend: Backend,
    url: str,
    open_store: Callable[..., tenure.Store],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    existing: int,
) -> None:
    tap = TAPS[backend.name](monkeypatch, tmp_path)
    store = open_store()
    ids = [f"job-{i:04}" for i in range(BATCH)]
    # Some jobs exist already (every other one), submitted by a first batch, which also
    # warms the connection up: a PostgreSQL connection prepares a statement at its first
    # use (one more round trip, once per connection), a Redis server caches the script.
    earlier = ids[1 : 2 * existing : 2] if existing else ["warm-up"]
    store.submit_many([{"job_id": job_id, "payload": "first"} for job_id in earlier])
    submitted = set(earlier)
    new_ids = [job_id for job_id in ids if job_id not in submitted]
    counting = CountingCalls(store._driver)
    store._driver = counting
    specs = [tenure.JobSpec(job_id, payload={"n": i}) for i, job_id in enumerate(ids)]
    with tap.recording():
        jobs = store.submit_many(specs)
    assert counting.calls == Counter({"submit_many": 1})
    tap.assert_one_operation(store, url, new_ids)
    # And the operation did the batch: one answer per job, in order, new ones created.
    assert [job.job_id for job in jobs] == ids
    assert sum(bool(job.created) for job in jobs) == len(new_ids) == BATCH - existing
    assert {job.payload for job in jobs if not job.created} <= {"first"}
