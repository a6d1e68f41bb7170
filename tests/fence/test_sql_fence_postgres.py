"""The SQL fence on a real PostgreSQL destination, through psycopg (format paramstyle).

Each test gets its own schema (the connections' search_path), dropped afterwards. Without
psycopg or a reachable server the tests skip locally and fail in CI (tests.backends).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tenure
from tenure import fence
from tests.backends import POSTGRES_URL, postgres_admin
from tests.fence import _writers

JOB = "report-42"


@pytest.fixture
def connect() -> Iterator[Callable[..., Any]]:
    """Open psycopg connections whose search_path is a fresh schema."""
    admin = postgres_admin()  # (or `unavailable`: no psycopg, no server)
    import psycopg

    schema = f"fence_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE SCHEMA "{schema}"')
    admin.execute(
        f'CREATE TABLE "{schema}".effects '
        "(id BIGSERIAL PRIMARY KEY, writer INTEGER NOT NULL, generation BIGINT NOT NULL)"
    )
    opened: list[Any] = []

    def factory(autocommit: bool = False) -> Any:
        conn = psycopg.connect(
            POSTGRES_URL, autocommit=autocommit, options=f"-c search_path={schema}"
        )
        opened.append(conn)
        return conn

    yield factory
    for conn in opened:
        conn.close()
    admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    admin.close()


def write(conn: Any, generation: int, **options: Any) -> None:
    with fence.sql_fence(conn, tenure.FencingToken(JOB, generation), **options) as cur:
        cur.execute(_writers.INSERT_FORMAT, (0, generation))


def effects(conn: Any) -> list[int]:
    with conn.cursor() as cur:
        cur.execute("SELECT generation FROM effects ORDER BY id")
        found = [int(g) for (g,) in cur.fetchall()]
    if not conn.autocommit:
        conn.rollback()
    return found


@pytest.mark.parametrize("autocommit", [False, True], ids=["transactional", "autocommit"])
def test_stale_rejected_same_allowed_higher_advances(
    connect: Callable[..., Any], autocommit: bool
) -> None:
    conn = connect(autocommit)
    write(conn, 7)
    write(conn, 7)
    write(conn, 8)
    ran = False
    with (
        pytest.raises(tenure.StaleToken) as caught,
        fence.sql_fence(conn, tenure.FencingToken(JOB, 7)),
    ):
        ran = True
    assert not ran
    assert (caught.value.generation, caught.value.highest_seen) == (7, 8)
    assert effects(conn) == [7, 7, 8]
    assert fence.fence_generation(conn, JOB) == 8
    assert conn.info.transaction_status == 0  # idle: the guard ended its transactions


def test_an_error_in_the_block_rolls_back_the_fence_too(connect: Callable[..., Any]) -> None:
    conn = connect()
    write(conn, 3)
    guard = fence.sql_fence(conn, tenure.FencingToken(JOB, 9))
    with pytest.raises(RuntimeError), guard as cur:  # noqa: PT012
        cur.execute(_writers.INSERT_FORMAT, (0, 9))
        raise RuntimeError("boom")
    assert fence.fence_generation(conn, JOB) == 3
    assert effects(conn) == [3]


def test_strict_and_a_pending_transaction(connect: Callable[..., Any]) -> None:
    conn = connect()
    write(conn, 5, strict=True)
    with pytest.raises(tenure.StaleToken, match="strict"):
        write(conn, 5, strict=True)
    conn.execute("SELECT 1")  # psycopg opened a transaction: the guard refuses to join it
    with pytest.raises(tenure.InvalidArgument, match="transaction in progress"):
        fence.sql_fence(conn, tenure.FencingToken(JOB, 6)).__enter__()
    conn.rollback()


def test_concurrent_writers_never_move_the_fence_back(connect: Callable[..., Any]) -> None:
    fence.create_fence_table(connect())  # avoids a CREATE race on the very first use
    writers, writes = 6, 25
    conns = [connect() for _ in range(writers)]
    start = threading.Barrier(writers)
    results: list[Any] = [None] * writers

    def work(writer: int) -> None:
        def ready() -> Any:
            start.wait()
            return conns[writer]

        results[writer] = _writers.run_writer(ready, writer, writes, _writers.INSERT_FORMAT)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(result is not None for result in results), "a writer thread failed"
    reader = connect()
    # BIGSERIAL ids follow commit order here: the fence row lock serialises the writers.
    _writers.check_history(
        effects(reader), results, fence.fence_generation(reader, _writers.JOB), writes
    )
