"""The SQL fence on SQLite destinations (`tenure.fence.sql_fence`)."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence
from tests.fence import _writers

JOB = "report-42"

# sqlite3 isolation modes: "" (the default: implicit BEGIN DEFERRED before writes) and None
# (autocommit: the guard's explicit BEGIN IMMEDIATE is the only transaction).
MODES: dict[str, Any] = {"deferred": "", "autocommit": None}


@pytest.fixture(params=sorted(MODES))
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path / "dest.db", isolation_level=MODES[request.param])
    conn.execute("CREATE TABLE effects (id INTEGER PRIMARY KEY, job TEXT, generation INTEGER)")
    conn.commit()
    yield conn
    conn.close()


def write(conn: sqlite3.Connection, token: Any, **options: Any) -> None:
    generation = token.token.generation if isinstance(token, tenure.Lease) else token.generation
    with fence.sql_fence(conn, token, **options) as cur:
        cur.execute("INSERT INTO effects (job, generation) VALUES (?, ?)", (JOB, generation))


def effects(conn: sqlite3.Connection) -> list[int]:
    return [g for (g,) in conn.execute("SELECT generation FROM effects ORDER BY id")]


def token(generation: int, job: str = JOB) -> tenure.FencingToken:
    return tenure.FencingToken(job, generation)


def test_first_write_creates_the_table_and_commits(db: sqlite3.Connection, tmp_path: Path) -> None:
    assert fence.fence_generation(db, JOB) is None  # no table yet: nothing accepted
    write(db, token(7))
    assert not db.in_transaction
    other = sqlite3.connect(tmp_path / "dest.db")  # committed: another connection sees it
    assert [g for (g,) in other.execute("SELECT generation FROM effects")] == [7]
    row = other.execute("SELECT job_id, generation, updated_at FROM tenure_fence").fetchone()
    other.close()
    assert row[:2] == (JOB, 7)
    assert row[2]


def test_stale_write_is_rejected_and_rolled_back(db: sqlite3.Connection) -> None:
    write(db, token(8))
    ran = False
    with pytest.raises(tenure.StaleToken) as caught, fence.sql_fence(db, token(7)) as cur:  # noqa: PT012
        ran = True
        cur.execute("INSERT INTO effects (job, generation) VALUES (?, ?)", (JOB, 7))
    assert not ran, "the guarded block ran for a stale token"
    error = caught.value
    assert (error.job_id, error.generation, error.highest_seen) == (JOB, 7, 8)
    message = str(error)
    for part in (repr(JOB), "generation 7", "generation 8", "Nothing was written", "Stop"):
        assert part in message
    assert effects(db) == [8]
    assert fence.fence_generation(db, JOB) == 8
    assert not db.in_transaction


def test_same_generation_twice_is_allowed(db: sqlite3.Connection) -> None:
    write(db, token(5))
    write(db, token(5))
    assert effects(db) == [5, 5]
    assert fence.fence_generation(db, JOB) == 5


def test_strict_allows_each_generation_once(db: sqlite3.Connection) -> None:
    write(db, token(5), strict=True)
    with pytest.raises(tenure.StaleToken, match="strict") as caught:
        write(db, token(5), strict=True)
    assert caught.value.highest_seen == 5
    write(db, token(6), strict=True)
    assert effects(db) == [5, 6]


def test_higher_generation_advances(db: sqlite3.Connection) -> None:
    for generation in (1, 2, 9, 2**63 - 1):
        write(db, token(generation))
        assert fence.fence_generation(db, JOB) == generation
    assert effects(db) == [1, 2, 9, 2**63 - 1]


def test_jobs_are_fenced_independently(db: sqlite3.Connection) -> None:
    write(db, token(9, "a"))
    write(db, token(1, "b"))
    assert (fence.fence_generation(db, "a"), fence.fence_generation(db, "b")) == (9, 1)
    assert fence.fence_generation(db, "c") is None


def test_an_error_in_the_block_rolls_back_the_fence_too(db: sqlite3.Connection) -> None:
    write(db, token(3))
    with pytest.raises(RuntimeError, match="boom"), fence.sql_fence(db, token(9)) as cur:  # noqa: PT012
        cur.execute("INSERT INTO effects (job, generation) VALUES (?, ?)", (JOB, 9))
        raise RuntimeError("boom")
    assert effects(db) == [3]
    assert fence.fence_generation(db, JOB) == 3  # generation 9 was never accepted
    write(db, token(4))  # so an older-than-9 writer still gets through
    assert effects(db) == [3, 4]


def test_a_failing_write_propagates_and_rolls_back(db: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.OperationalError), fence.sql_fence(db, token(2)) as cur:
        cur.execute("INSERT INTO no_such_table VALUES (1)")
    assert fence.fence_generation(db, JOB) is None
    assert not db.in_transaction


def test_accepts_a_lease(tmp_path: Path, db: sqlite3.Connection) -> None:
    clock = tenure.ManualClock()
    with tenure.connect(f"sqlite:///{tmp_path / 'store.db'}", clock=clock, store_clock=clock) as s:
        s.submit(JOB)
        first = s.claim(JOB, "a", 10)
        assert first is not None
        clock.advance(11)
        second = s.claim(JOB, "b", 10)
        assert second is not None
    write(db, second)
    with pytest.raises(tenure.StaleToken):
        write(db, first)
    assert effects(db) == [second.generation] == [2]


def test_a_connection_with_a_pending_transaction_is_refused(db: sqlite3.Connection) -> None:
    db.execute("BEGIN")
    db.execute("INSERT INTO effects (job, generation) VALUES ('mine', 0)")
    with pytest.raises(tenure.InvalidArgument, match="conn: has a transaction in progress"):
        fence.sql_fence(db, token(1)).__enter__()
    assert db.in_transaction  # the caller's work is left as it was
    assert fence.fence_generation(db, JOB) is None  # a read joins the open transaction
    db.rollback()
    assert effects(db) == []


def test_a_guard_is_single_use(db: sqlite3.Connection) -> None:
    guard = fence.sql_fence(db, token(1))
    with guard:
        pass
    with pytest.raises(tenure.InvalidArgument, match="single-use"), guard:
        pass


def test_create_fence_table_is_idempotent(db: sqlite3.Connection) -> None:
    fence.create_fence_table(db)
    fence.create_fence_table(db)
    names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert fence.FENCE_TABLE in names
    assert not db.in_transaction


class _Thing:
    pass


@pytest.mark.parametrize(
    ("bad", "argument"),
    [
        (None, "token"),
        ("7:report-42", "token"),
        (7, "token"),
        ((JOB, 7), "token"),
        (tenure.FencingToken("", 7), "token job_id"),
        (tenure.FencingToken("x" * 256, 7), "token job_id"),
        (tenure.FencingToken("a\x00b", 7), "token job_id"),
        (tenure.FencingToken("a\ud800", 7), "token job_id"),
        (tenure.FencingToken(JOB, 0), "token generation"),
        (tenure.FencingToken(JOB, -1), "token generation"),
        (tenure.FencingToken(JOB, 2**63), "token generation"),
        (tenure.FencingToken(JOB, True), "token generation"),
        (tenure.FencingToken(JOB, 7.0), "token generation"),  # type: ignore[arg-type]
        (tenure.FencingToken(JOB, "7"), "token generation"),  # type: ignore[arg-type]
    ],
)
def test_bad_tokens_are_refused_before_any_io(
    db: sqlite3.Connection, bad: Any, argument: str
) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        fence.sql_fence(db, bad)
    assert caught.value.argument == argument
    assert str(caught.value).startswith(f"{argument}: ")
    tables = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ["effects"]  # nothing was created or written


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"dialect": "mysql"}, "dialect"),
        ({"paramstyle": "named"}, "paramstyle"),
        ({"paramstyle": "pyformat"}, "paramstyle"),
        ({"strict": "yes"}, "strict"),
        ({"strict": 1}, "strict"),
    ],
)
def test_bad_options_are_refused(
    db: sqlite3.Connection, options: dict[str, Any], argument: str
) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        fence.sql_fence(db, token(1), **options)
    assert caught.value.argument == argument


def test_what_is_not_a_connection_is_refused() -> None:
    with pytest.raises(tenure.InvalidArgument, match="conn: must be a DB-API 2 connection"):
        fence.sql_fence(_Thing(), token(1))
    with pytest.raises(tenure.InvalidArgument, match="job_id"):
        fence.fence_generation(sqlite3.connect(":memory:"), "")


class _FormatConnection:
    """A DB-API connection of an unknown driver that speaks the "format" paramstyle: a thin
    translation over sqlite3 (the driver modules tenure knows are detected on their own)."""

    class _Cursor:
        def __init__(self, cur: sqlite3.Cursor) -> None:
            self._cur = cur
            self.statements: list[str] = []

        def execute(self, sql: str, params: Any = ()) -> None:
            assert "?" not in sql, sql
            self._cur.execute(sql.replace("%s", "?"), params)

        def fetchone(self) -> Any:
            return self._cur.fetchone()

        @property
        def rowcount(self) -> int:
            return self._cur.rowcount

        def close(self) -> None:
            self._cur.close()

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def cursor(self) -> _FormatConnection._Cursor:
        return self._Cursor(self._conn.cursor())

    def commit(self) -> None:
        self._conn.commit()

    def rollback(self) -> None:
        self._conn.rollback()


def test_format_paramstyle_and_explicit_dialect(db: sqlite3.Connection) -> None:
    conn = _FormatConnection(db)
    with pytest.raises(tenure.InvalidArgument, match="dialect"):
        fence.sql_fence(conn, token(1))  # an unknown driver: the dialect must be named
    options: dict[str, Any] = {"dialect": "sqlite", "paramstyle": "format"}
    with fence.sql_fence(conn, token(4), **options) as cur:
        cur.execute("INSERT INTO effects (job, generation) VALUES (%s, %s)", (JOB, 4))
    with pytest.raises(tenure.StaleToken):
        fence.sql_fence(conn, token(3), **options).__enter__()
    assert fence.fence_generation(conn, JOB, **options) == 4
    assert effects(db) == [4]


# -- concurrency ---------------------------------------------------------------------------

WRITES = 40


def _committed(path: Path) -> tuple[list[int], int | None]:
    conn = sqlite3.connect(path)
    try:
        committed = [g for (g,) in conn.execute("SELECT generation FROM effects ORDER BY id")]
        return committed, fence.fence_generation(conn, _writers.JOB)
    finally:
        conn.close()


def _prepare(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(_writers.EFFECTS_SQLITE)
    conn.commit()
    conn.close()


def test_concurrent_threads_never_move_the_fence_back(tmp_path: Path) -> None:
    path = tmp_path / "dest.db"
    _prepare(path)
    writers = 8
    results: list[Any] = [None] * writers
    start = threading.Barrier(writers)

    def work(writer: int) -> None:
        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, timeout=60, check_same_thread=False)
            start.wait()
            return conn

        results[writer] = _writers.run_writer(connect, writer, WRITES)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(result is not None for result in results), "a writer thread failed"
    committed, highest = _committed(path)
    _writers.check_history(committed, results, highest, WRITES)


def test_concurrent_processes_never_move_the_fence_back(tmp_path: Path) -> None:
    path = tmp_path / "dest.db"
    _prepare(path)
    writers = 4
    context = multiprocessing.get_context("spawn")
    start, queue = context.Barrier(writers), context.Queue()
    processes = [
        context.Process(target=_writers.sqlite_writer, args=(str(path), n, WRITES, start, queue))
        for n in range(writers)
    ]
    for process in processes:
        process.start()
    done = dict(queue.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    results = [done[n] for n in range(writers)]
    committed, highest = _committed(path)
    _writers.check_history(committed, results, highest, WRITES)


def test_the_history_check_can_fail() -> None:
    """The checker above rejects a history where an older generation landed later."""
    results: list[Any] = [([1, _writers.SPIKE], [(2, _writers.SPIKE)] * 27), ([3], [])]
    with pytest.raises(AssertionError, match="went backwards"):
        _writers.check_history([1, _writers.SPIKE, 3], results, _writers.SPIKE, 15)
