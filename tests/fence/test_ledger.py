"""Idempotency keys (`apply_once`, `record_effect`) and fencing inside the caller's own
transaction (`advance_fence`): sqlite3, psycopg and SQLAlchemy sessions."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence
from tests.backends import POSTGRES_URL, postgres_schema, unavailable

JOB = "invoice-run"


def token(generation: int, job: str = JOB) -> tenure.FencingToken:
    return tenure.FencingToken(job, generation)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path / "dest.db", timeout=30, check_same_thread=False)
    conn.execute("CREATE TABLE sent (id INTEGER PRIMARY KEY, key TEXT, generation INTEGER)")
    conn.commit()
    yield conn
    conn.close()


def send(key: str, generation: int) -> Callable[[Any], int]:
    def effect(cur: Any) -> int:
        cur.execute("INSERT INTO sent (key, generation) VALUES (?, ?)", (key, generation))
        return int(cur.lastrowid)

    return effect


def sent(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    return conn.execute("SELECT key, generation FROM sent ORDER BY id").fetchall()


def test_an_effect_is_applied_once(db: sqlite3.Connection) -> None:
    first = fence.apply_once(db, token(7), "mail:1", send("mail:1", 7))
    assert (first.applied, first.generation, first.value) == (True, 7, 1)
    again = fence.apply_once(db, token(7), "mail:1", send("mail:1", 7))
    assert (again.applied, again.generation, again.value) == (False, 7, None)
    # The next holder retries the whole job: what was done is not done again...
    retried = fence.apply_once(db, token(8), "mail:1", send("mail:1", 8))
    assert (retried.applied, retried.generation) == (False, 7)
    # ...and what was not done yet is done, once.
    assert fence.apply_once(db, token(8), "mail:2", send("mail:2", 8)).applied
    assert sent(db) == [("mail:1", 7), ("mail:2", 8)]
    assert fence.effect_generation(db, JOB, "mail:1") == 7
    assert fence.effect_generation(db, JOB, "mail:3") is None
    assert not db.in_transaction


def test_a_stale_generation_is_refused_even_for_a_new_key(db: sqlite3.Connection) -> None:
    fence.apply_once(db, token(8), "mail:1", send("mail:1", 8))
    ran: list[int] = []
    with pytest.raises(tenure.StaleToken) as caught:
        fence.apply_once(db, token(7), "mail:2", lambda cur: ran.append(1))
    assert (caught.value.generation, caught.value.highest_seen) == (7, 8)
    assert ran == []
    assert fence.effect_generation(db, JOB, "mail:2") is None


def test_a_failing_effect_leaves_its_key_unrecorded(db: sqlite3.Connection) -> None:
    def boom(cur: Any) -> None:
        cur.execute("INSERT INTO sent (key, generation) VALUES ('x', 1)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fence.apply_once(db, token(1), "x", boom)
    assert fence.effect_generation(db, JOB, "x") is None
    assert fence.apply_once(db, token(1), "x", send("x", 1)).applied
    assert sent(db) == [("x", 1)]


def test_keys_are_per_job(db: sqlite3.Connection) -> None:
    assert fence.apply_once(db, token(1, "a"), "k", send("a", 1)).applied
    assert fence.apply_once(db, token(1, "b"), "k", send("b", 1)).applied
    assert not fence.apply_once(db, token(1, "a"), "k", send("a", 1)).applied


@pytest.mark.parametrize(
    ("key", "effect", "argument"),
    [("", None, "effect_key"), ("k" * 256, None, "effect_key"), ("k", "nope", "effect")],
)
def test_bad_arguments(db: sqlite3.Connection, key: str, effect: Any, argument: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        fence.apply_once(db, token(1), key, effect or send(key, 1))
    assert caught.value.argument == argument


def test_concurrent_duplicates_apply_each_key_once(tmp_path: Path) -> None:
    """Threads with their own connections deliver the same effects, with mixed
    generations: each key lands once, and accepted generations never decrease."""
    path = tmp_path / "dest.db"
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE sent (id INTEGER PRIMARY KEY, key TEXT, generation INTEGER)")
    setup.commit()
    writers, keys = 6, 30
    start = threading.Barrier(writers)
    outcomes: list[list[tuple[str, int, str]]] = [[] for _ in range(writers)]

    def work(writer: int) -> None:
        conn = sqlite3.connect(path, timeout=60)
        start.wait()
        try:
            for n in range(keys):
                generation = 1 + (n + writer) % 4 + n // 10 * 4  # mixed, rising overall
                key = f"k{n}"
                try:
                    done = fence.apply_once(conn, token(generation), key, send(key, generation))
                except tenure.StaleToken:
                    outcomes[writer].append((key, generation, "stale"))
                else:
                    outcomes[writer].append(
                        (key, generation, "applied" if done.applied else "duplicate")
                    )
        finally:
            conn.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    rows = sent(setup)
    landed = [key for key, _ in rows]
    assert len(landed) == len(set(landed)), "an effect key was applied twice"
    generations = [g for _, g in rows]
    assert generations == sorted(generations), "an accepted generation went backwards"
    applied = sorted((k, g) for out in outcomes for k, g, what in out if what == "applied")
    assert applied == sorted(rows)
    assert sum(len(out) for out in outcomes) == writers * keys
    setup.close()


# -- inside the caller's transaction ---------------------------------------------------


def test_advance_fence_in_a_sqlite3_transaction(db: sqlite3.Connection) -> None:
    with db:  # the sqlite3 context manager commits, or rolls back on an exception
        fence.advance_fence(db, token(5))
        db.execute("INSERT INTO sent (key, generation) VALUES ('a', 5)")
    with pytest.raises(tenure.StaleToken), db:  # noqa: PT012
        db.execute("INSERT INTO sent (key, generation) VALUES ('b', 4)")
        fence.advance_fence(db, token(4))
    assert sent(db) == [("a", 5)]  # the write before the refused fence rolled back too
    assert fence.fence_generation(db, JOB) == 5


def test_record_effect_in_a_sqlite3_transaction(db: sqlite3.Connection) -> None:
    for _ in range(2):
        with db:
            if fence.record_effect(db, token(3), "once"):
                db.execute("INSERT INTO sent (key, generation) VALUES ('once', 3)")
    assert sent(db) == [("once", 3)]


def test_an_autocommit_connection_without_a_transaction_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    with pytest.raises(tenure.InvalidArgument, match="autocommit"):
        fence.advance_fence(conn, token(1))
    conn.execute("BEGIN")
    fence.advance_fence(conn, token(1))  # inside an explicit transaction: fine
    conn.execute("COMMIT")
    assert fence.fence_generation(conn, JOB) == 1
    conn.close()


def _sqlalchemy() -> Any:
    return pytest.importorskip("sqlalchemy")


def _check_session_story(engine: Any, id_column: str) -> None:
    sa = _sqlalchemy()
    from sqlalchemy.orm import Session

    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE sent ({id_column}, key TEXT, gen INTEGER)"))
    insert = sa.text("INSERT INTO sent (key, gen) VALUES (:key, :gen)")
    with Session(engine) as session, session.begin():
        fence.advance_fence(session, token(7))
        session.execute(insert, {"key": "a", "gen": 7})
    with pytest.raises(tenure.StaleToken), Session(engine) as session, session.begin():  # noqa: PT012
        session.execute(insert, {"key": "stale", "gen": 6})
        fence.advance_fence(session, token(6))
    for _ in range(2):
        with Session(engine) as session, session.begin():
            if fence.record_effect(session, token(8), "b"):
                session.execute(insert, {"key": "b", "gen": 8})
    with engine.connect() as conn:  # a Connection works too
        with conn.begin():
            fence.advance_fence(conn, token(9))
        rows = conn.execute(sa.text("SELECT key, gen FROM sent ORDER BY id")).all()
        highest = conn.execute(
            sa.text("SELECT generation FROM tenure_fence WHERE job_id = :j"), {"j": JOB}
        ).scalar()
    assert [tuple(r) for r in rows] == [("a", 7), ("b", 8)]
    assert highest == 9


def test_sqlalchemy_session_on_sqlite(tmp_path: Path) -> None:
    sa = _sqlalchemy()
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'orm.db'}")
    try:
        _check_session_story(engine, "id INTEGER PRIMARY KEY")
    finally:
        engine.dispose()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed: pip install -e '.[postgres]'")
    with postgres_schema("fence") as schema:
        try:
            with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as admin:
                admin.execute(f'CREATE SCHEMA "{schema}"')
        except psycopg.OperationalError as exc:
            unavailable(f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc})")
        yield schema


def test_sqlalchemy_session_on_postgres(pg_schema: str) -> None:
    sa = _sqlalchemy()
    url = POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sa.create_engine(url, connect_args={"options": f"-c search_path={pg_schema}"})
    try:
        _check_session_story(engine, "id BIGSERIAL PRIMARY KEY")
    finally:
        engine.dispose()


def test_psycopg_apply_once_and_record_effect(pg_schema: str) -> None:
    import psycopg

    conn = psycopg.connect(POSTGRES_URL, options=f"-c search_path={pg_schema}")
    try:
        conn.execute("CREATE TABLE sent (id BIGSERIAL PRIMARY KEY, key TEXT, gen BIGINT)")
        conn.commit()

        def effect(cur: Any) -> None:
            cur.execute("INSERT INTO sent (key, gen) VALUES (%s, %s)", ("k", 4))

        assert fence.apply_once(conn, token(4), "k", effect).applied
        assert not fence.apply_once(conn, token(5), "k", effect).applied
        with pytest.raises(tenure.StaleToken):
            fence.apply_once(conn, token(3), "other", effect)
        with conn.transaction():
            assert fence.record_effect(conn, token(5), "j")
        assert fence.effect_generation(conn, JOB, "j") == 5
        assert fence.fence_generation(conn, JOB) == 5
        assert conn.execute("SELECT key, gen FROM sent").fetchall() == [("k", 4)]
        conn.rollback()
        auto = psycopg.connect(POSTGRES_URL, autocommit=True, options=f"-c search_path={pg_schema}")
        with pytest.raises(tenure.InvalidArgument, match="autocommit"):
            fence.advance_fence(auto, token(6))
        auto.close()
    finally:
        conn.close()


def test_concurrent_psycopg_writers_apply_each_key_once(pg_schema: str) -> None:
    import psycopg

    def connect() -> Any:
        return psycopg.connect(POSTGRES_URL, options=f"-c search_path={pg_schema}")

    setup = connect()
    setup.execute("CREATE TABLE sent (id BIGSERIAL PRIMARY KEY, key TEXT, gen BIGINT)")
    setup.commit()
    fence.create_fence_table(setup)
    writers, keys = 5, 20
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def work(writer: int) -> None:
        conn = connect()
        start.wait()
        try:
            for n in range(keys):
                generation = 1 + (n + writer) % 3 + n // 5 * 3
                key = f"k{n}"

                def effect(cur: Any, key: str = key, generation: int = generation) -> None:
                    cur.execute("INSERT INTO sent (key, gen) VALUES (%s, %s)", (key, generation))

                with contextlib.suppress(tenure.StaleToken):
                    fence.apply_once(conn, token(generation), key, effect)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    rows = setup.execute("SELECT key, gen FROM sent ORDER BY id").fetchall()
    setup.rollback()
    keys_landed = [k for k, _ in rows]
    assert len(keys_landed) == len(set(keys_landed))
    assert [g for _, g in rows] == sorted(g for _, g in rows)
    setup.close()
