"""Fixtures of the PostgreSQL-specific tests: ``backend`` pinned to PostgreSQL, a fresh
schema per test on the server named by TENURE_TEST_POSTGRES_URL (default
postgresql://postgres@127.0.0.1:5432/postgres), dropped afterwards, ``url`` (still an
isolated URL: of that schema, with an ``application_name`` only this test's connections
carry), an autocommit admin connection for looking under the API, and a proxy in front of
the server. The store fixtures are the suite's (tests/conftest.py): ``real_store`` and
``open_real_store`` run on the server's clock, ``store``/``open_store`` on the test's
manual clock. Helpers are in tests/postgres/_support.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends import POSTGRES, Backend, postgres_admin, postgres_schema, postgres_schema_url
from tests.proxy import Proxy, postgres_reply, proxy_for


@pytest.fixture
def backend() -> Backend:
    return POSTGRES


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
    conn = postgres_admin()
    yield conn
    conn.close()


@pytest.fixture
def proxied(schema: str) -> Iterator[tuple[Proxy, str]]:
    """A proxy in front of the server, and a URL of the test's schema through it."""
    url = f"{postgres_schema_url(schema)}&sslmode=disable&gssencmode=disable"
    with proxy_for(url, 5432, postgres_reply) as running:
        yield running
