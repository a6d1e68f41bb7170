"""Fixtures of the PostgreSQL-specific tests: a fresh schema per test on the server named by
TENURE_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres), dropped
afterwards, and an autocommit admin connection for looking under the API."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tenure
from tests.backends import _postgres_admin, postgres_schema, postgres_schema_url


@pytest.fixture
def schema() -> Iterator[str]:
    with postgres_schema("tp") as name:
        yield name


@pytest.fixture
def app_name() -> str:
    """An application_name only this test's connections carry (to find and kill them)."""
    return f"tenure-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def url(schema: str, app_name: str) -> str:
    return f"{postgres_schema_url(schema)}&application_name={app_name}"


@pytest.fixture
def admin() -> Iterator[Any]:
    conn = _postgres_admin()
    yield conn
    conn.close()


@pytest.fixture
def open_store(url: str) -> Iterator[Callable[..., tenure.Store]]:
    """Open clients of the test's store; by default on the server's clock."""
    opened: list[tenure.Store] = []

    def factory(**options: Any) -> tenure.Store:
        store = tenure.connect(options.pop("url", url), **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., tenure.Store]) -> tenure.Store:
    return open_store()


def backends_of(admin: Any, app_name: str) -> list[int]:
    """Server process ids of the connections carrying ``app_name``."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app_name,)
    ).fetchall()
    return [int(row[0]) for row in rows]


def terminate(admin: Any, pids: list[int]) -> None:
    for pid in pids:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
