"""Issue #17: submit inside the caller's own PostgreSQL transaction (psycopg, sync and
async; a SQLAlchemy session): the job exists if and only if that transaction commits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import psycopg
import pytest

import tenure
import tenure.aio
from tests.backends import ASYNCIO_ONLY, POSTGRES_URL

BUSINESS = "CREATE TABLE {schema}.orders (id text PRIMARY KEY)"


@pytest.fixture
def orders(admin: Any, schema: str, real_store: tenure.Store) -> str:
    admin.execute(BUSINESS.format(schema=schema))
    return f"{schema}.orders"


def _order_exists(admin: Any, table: str, order: str) -> bool:
    return admin.execute(f"SELECT count(*) FROM {table} WHERE id = %s", (order,)).fetchone()[0] == 1


def _exists(store: tenure.Store, job_id: str) -> bool:
    try:
        store.get(job_id)
    except tenure.JobNotFound:
        return False
    return True


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_a_job_exists_iff_the_transaction_commits(
    real_store: tenure.Store, admin: Any, orders: str, outcome: str
) -> None:
    with psycopg.connect(POSTGRES_URL) as conn:  # not autocommit: a transaction begins
        conn.execute(f"INSERT INTO {orders} VALUES ('o1')")
        job = real_store.submit("mail-o1", {"order": "o1"}, conn=conn)
        batch = real_store.submit_many([{"job_id": "bill-o1"}, {"job_id": "ship-o1"}], conn=conn)
        assert job.created
        assert [j.created for j in batch] == [True, True]
        # Not visible outside the transaction before it commits.
        assert not _exists(real_store, "mail-o1")
        if outcome == "commit":
            conn.commit()
        else:
            conn.rollback()
    committed = outcome == "commit"
    assert _order_exists(admin, orders, "o1") is committed
    for job_id in ("mail-o1", "bill-o1", "ship-o1"):
        assert _exists(real_store, job_id) is committed
    if committed:
        assert real_store.get("mail-o1").payload == {"order": "o1"}


def test_in_a_transaction_block_of_an_autocommit_connection(
    real_store: tenure.Store, orders: str
) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:

        def business() -> None:
            with conn.transaction():
                conn.execute(f"INSERT INTO {orders} VALUES ('o2')")
                real_store.submit("mail-o2", conn=conn)
                raise ZeroDivisionError  # the business code fails before its commit

        with pytest.raises(ZeroDivisionError):
            business()
        assert not _exists(real_store, "mail-o2")
        with conn.transaction():
            real_store.submit("mail-o3", conn=conn)
    assert _exists(real_store, "mail-o3")


def test_a_crash_before_the_commit_leaves_no_job(
    real_store: tenure.Store, admin: Any, orders: str, url: str
) -> None:
    script = textwrap.dedent(
        f"""
        import os, psycopg, tenure
        store = tenure.connect({url!r})
        conn = psycopg.connect({POSTGRES_URL!r})
        conn.execute("INSERT INTO {orders} VALUES ('o4')")
        store.submit("mail-o4", conn=conn)
        print("submitted", flush=True)
        os._exit(1)  # the process dies between the business write + submit and the commit
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert "submitted" in done.stdout, done.stderr
    assert done.returncode == 1
    assert not _order_exists(admin, orders, "o4")
    assert not _exists(real_store, "mail-o4")


def test_a_sqlalchemy_session(real_store: tenure.Store, admin: Any, orders: str) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session

    engine = sqlalchemy.create_engine(
        POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://")
    )
    try:
        with Session(engine) as session:
            session.execute(sqlalchemy.text(f"INSERT INTO {orders} VALUES ('o5')"))
            real_store.submit_many([{"job_id": "mail-o5"}], conn=session)
            session.rollback()
        assert not _exists(real_store, "mail-o5")
        with Session(engine) as session:
            session.execute(sqlalchemy.text(f"INSERT INTO {orders} VALUES ('o6')"))
            assert real_store.submit("mail-o6", conn=session).created
            assert not _exists(real_store, "mail-o6")
            session.commit()
        assert _exists(real_store, "mail-o6")
        assert _order_exists(admin, orders, "o6")
    finally:
        engine.dispose()


def test_a_cursor_is_refused(real_store: tenure.Store) -> None:
    with psycopg.connect(POSTGRES_URL) as conn:
        with pytest.raises(tenure.InvalidArgument) as caught:
            real_store.submit("x", conn=conn.cursor())  # a cursor is not a connection
        assert caught.value.argument == "conn"


@pytest.mark.anyio
@ASYNCIO_ONLY
async def test_async_store_with_an_async_connection(url: str, orders: str) -> None:
    store = await tenure.aio.connect(url)
    try:
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
            await conn.execute(f"INSERT INTO {orders} VALUES ('o7')")
            assert (await store.submit("mail-o7", conn=conn)).created
            await conn.rollback()
            await store.submit_many([{"job_id": "mail-o8"}], conn=conn)
            await conn.commit()
        with pytest.raises(tenure.JobNotFound):
            await store.get("mail-o7")
        assert (await store.get("mail-o8")).state == "ready"
        with psycopg.connect(POSTGRES_URL) as sync_conn, pytest.raises(tenure.InvalidArgument):
            await store.submit("x", conn=sync_conn)  # a sync connection for an async store
    finally:
        await store.close()


@pytest.mark.anyio
@ASYNCIO_ONLY
async def test_async_store_with_a_sqlalchemy_async_session(
    url: str, admin: Any, orders: str
) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("greenlet")
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://"))
    store = await tenure.aio.connect(url)
    try:
        async with AsyncSession(engine) as session:
            await session.execute(sqlalchemy.text(f"INSERT INTO {orders} VALUES ('o9')"))
            await store.submit_many([{"job_id": "mail-o9"}], conn=session)
            await session.rollback()
        with pytest.raises(tenure.JobNotFound):
            await store.get("mail-o9")
        assert not _order_exists(admin, orders, "o9")
        async with AsyncSession(engine) as session:
            await session.execute(sqlalchemy.text(f"INSERT INTO {orders} VALUES ('o10')"))
            assert (await store.submit("mail-o10", conn=session)).created
            with pytest.raises(tenure.JobNotFound):
                await store.get("mail-o10")  # not before the session commits
            await session.commit()
        assert (await store.get("mail-o10")).state == "ready"
        assert _order_exists(admin, orders, "o10")
        # An AsyncConnection works too, in its transaction.
        async with engine.connect() as connection, connection.begin():
            await store.submit("mail-o11", conn=connection)
        assert (await store.get("mail-o11")).state == "ready"
    finally:
        await store.close()
        await engine.dispose()
