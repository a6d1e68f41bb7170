"""A pool of the caller's: used as it is (row factory, autocommit or not), configured with
PostgresDriver.configure, never closed by tenure."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import tenure
import tenure.aio
from tenure.stores.postgres import AsyncPostgresDriver, PostgresDriver
from tests.backends import ASYNCIO_ONLY, POSTGRES_URL


@pytest.mark.parametrize("autocommit", [True, False])
def test_callers_sync_pool(schema: str, autocommit: bool) -> None:
    pool = ConnectionPool(
        POSTGRES_URL,
        kwargs={"autocommit": autocommit, "row_factory": dict_row},
        configure=PostgresDriver.configure,
        min_size=1,
        max_size=2,
        open=True,
    )
    try:
        store = tenure.Store(PostgresDriver.open(pool=pool, schema=schema))
        assert store.url.endswith(f"schema={schema}")
        store.submit("J", {"n": 1})
        lease = store.claim_next("A", 30)
        assert lease is not None
        store.complete(store.renew(lease), "ok")
        assert store.get("J").result == "ok"
        store.wait_for_jobs(timeout=0.05)
        store.close()
        with pool.connection() as conn:  # still open, and nothing left in a transaction
            row: Any = conn.execute("SHOW plan_cache_mode").fetchone()
            assert row == {"plan_cache_mode": "force_generic_plan"}
            assert conn.info.transaction_status.name in ("IDLE", "INTRANS")
    finally:
        pool.close()


@pytest.mark.anyio
@ASYNCIO_ONLY
async def test_callers_async_pool(schema: str) -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        POSTGRES_URL,
        kwargs={"autocommit": True},
        configure=AsyncPostgresDriver.configure,
        min_size=1,
        max_size=2,
        open=False,
    )
    await pool.open()
    try:
        store = tenure.aio.AsyncStore(await AsyncPostgresDriver.open(pool=pool, schema=schema))
        await store.submit("J")
        lease = await store.claim("J", "A", 30)
        assert lease is not None
        await store.complete(lease)
        await store.close()
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT 1")
            assert await cur.fetchone() == (1,)
    finally:
        await pool.close()


def test_url_xor_pool() -> None:
    with pytest.raises(TypeError):
        PostgresDriver.open()


def test_more_threads_than_connections(open_real_store: Any, url: str) -> None:
    """Operations beyond the pool's size wait for a connection, and get one as soon as an
    operation ends (none is kept aside while others wait)."""
    import threading
    import time

    store = open_real_store(url=url + "&pool_max=2&pool_timeout=3")
    for i in range(60):
        store.submit(f"j{i}")
    errors: list[BaseException] = []
    started = time.monotonic()

    def work() -> None:
        try:
            while (lease := store.claim_next("w", 30)) is not None:
                store.complete(lease)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert time.monotonic() - started < 3  # no operation waited for the pool's timeout
    assert all(job.state == "done" for job in store.jobs(limit=100))


@pytest.mark.anyio
async def test_more_tasks_than_connections(url: str) -> None:
    import time

    import anyio

    store = await tenure.aio.connect(url + "&pool_max=2&pool_timeout=3")
    try:
        for i in range(40):
            await store.submit(f"j{i}")
        started = time.monotonic()
        while leases := await store.claim_many("w", 30, 10):
            async with anyio.create_task_group() as group:
                for lease in leases:
                    group.start_soon(store.complete, lease)
        assert time.monotonic() - started < 3
        assert all(job.state == "done" for job in await store.jobs(limit=100))
    finally:
        await store.close()


@pytest.mark.parametrize(("threshold", "prepared"), [(5, True), (None, False)])
def test_statements_are_prepared_at_first_use_unless_the_pool_turns_it_off(
    schema: str, threshold: int | None, prepared: bool
) -> None:
    """A worker's first batches are not planned afresh (psycopg's default prepares on the
    sixth use); a pool built with prepare_threshold=None (PgBouncer before 1.21) keeps
    tenure from preparing anything."""
    pool = ConnectionPool(
        POSTGRES_URL,
        kwargs={"autocommit": True, "prepare_threshold": threshold},
        configure=PostgresDriver.configure,
        min_size=1,
        max_size=1,
        open=True,
    )
    try:
        store = tenure.Store(PostgresDriver.open(pool=pool, schema=schema))
        store.submit("J")
        lease = store.claim_next("A", 30)
        assert lease is not None
        store.close()
        with pool.connection() as conn:
            rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
        claims = [text for (text,) in rows if "FOR NO KEY UPDATE SKIP LOCKED" in text]
        assert len(claims) == (1 if prepared else 0), rows
    finally:
        pool.close()
