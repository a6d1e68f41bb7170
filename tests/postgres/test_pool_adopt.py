"""A store opened by URL hands the connection its schema check used to its pool, rather than
closing it and connecting again (a backend's start per store, two stores per worker)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tenure.stores.postgres import AsyncPostgresDriver, PostgresDriver
from tenure.stores.postgres._connection import ReconnectingPool
from tests.backends import ASYNCIO_ONLY, POSTGRES_URL
from tests.postgres._support import backends_of
from tests.worker._support import wait_until


def no_backends(admin: Any, app_name: str) -> None:
    """Wait (bounded) until the server has no backend left with ``app_name``: a backend
    leaves pg_stat_activity a moment after its client closed the connection."""
    wait_until(lambda: not backends_of(admin, app_name), 10, f"{app_name}'s backends to end")


def test_the_schema_checks_connection_is_the_pools_first(
    url: str, app_name: str, admin: Any
) -> None:
    driver = PostgresDriver.open(url)
    try:
        pool = driver._pool
        assert pool.get_stats().get("connections_num", 0) == 0  # none made by the pool
        assert len(backends_of(admin, app_name)) == 1
        with pool.connection() as conn:  # configured as any pooled connection
            assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)
            assert conn.info.backend_pid in backends_of(admin, app_name)
    finally:
        driver.close()
    no_backends(admin, app_name)


@pytest.mark.anyio
@ASYNCIO_ONLY
async def test_the_async_schema_checks_connection_is_the_pools_first(
    url: str, app_name: str, admin: Any
) -> None:
    driver = await AsyncPostgresDriver.open(url)
    try:
        assert driver._pool.get_stats().get("connections_num", 0) == 0
        assert len(backends_of(admin, app_name)) == 1
        async with driver._pool.connection() as conn:
            cur = await conn.execute("SHOW plan_cache_mode")
            assert await cur.fetchone() == ("force_generic_plan",)
    finally:
        await driver.close()
    no_backends(admin, app_name)


def test_without_a_minimum_the_pool_keeps_no_connection(
    url: str, app_name: str, admin: Any
) -> None:
    driver = PostgresDriver.open(f"{url}&pool_min=0")
    try:
        no_backends(admin, app_name)
    finally:
        driver.close()


def test_a_closed_adopted_connection_is_replaced(app_name: str, admin: Any) -> None:
    url = f"{POSTGRES_URL}?application_name={app_name}"
    adopted = psycopg.connect(url, autocommit=True)
    adopted.close()
    pool = ReconnectingPool(url, kwargs={"autocommit": True}, min_size=1, open=False)
    pool.adopt(adopted)
    pool.open(wait=True, timeout=5)
    try:
        assert pool.get_stats().get("connections_num", 0) == 1
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()


def test_closing_a_pool_before_it_opened_closes_the_adopted_connection(
    app_name: str, admin: Any
) -> None:
    url = f"{POSTGRES_URL}?application_name={app_name}"
    adopted = psycopg.connect(url, autocommit=True)
    pool = ReconnectingPool(url, kwargs={"autocommit": True}, min_size=1, open=False)
    pool.adopt(adopted)
    pool.close()
    assert adopted.closed
    no_backends(admin, app_name)
