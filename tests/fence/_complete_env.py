"""The stores of the complete_with tests: a SQLite file or a PostgreSQL schema, each with a
table of the caller's (``reports``) in the store's own database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import tenure
from tests.backends import POSTGRES, SQLITE, Backend

TTL = 10.0


@dataclass
class Env:
    url: str
    clock: tenure.ManualClock
    store: tenure.Store
    stack: ExitStack
    backend: str
    table: str = ""

    def connect(self) -> tenure.Store:
        return self.stack.enter_context(
            tenure.connect(self.url, clock=self.clock, store_clock=self.clock)
        )

    def insert(self, cur: Any, value: str) -> Any:
        """Insert a row with ``cur``; what its execute returns (an awaitable for an async
        cursor)."""
        marker = "?" if self.backend == "sqlite" else "%s"
        return cur.execute(f"INSERT INTO {self.table} (value) VALUES ({marker})", (value,))

    def rows(self) -> list[str]:
        if self.backend == "sqlite":
            with sqlite3.connect(urlsplit(self.url).path[1:]) as conn:
                return [v for (v,) in conn.execute(f"SELECT value FROM {self.table} ORDER BY id")]
        import psycopg

        from tests.backends import POSTGRES_URL

        with psycopg.connect(POSTGRES_URL) as conn:
            found = conn.execute(f"SELECT value FROM {self.table} ORDER BY id").fetchall()
            return [v for (v,) in found]


@pytest.fixture(name="env", params=[SQLITE, POSTGRES], ids=str)
def complete_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    backend: Backend = request.param
    clock = tenure.ManualClock()
    with ExitStack() as stack:
        url = stack.enter_context(backend.isolated_url(tmp_path))
        store = stack.enter_context(tenure.connect(url, clock=clock, store_clock=clock))
        found = Env(url, clock, store, stack, backend.name)
        create_table(found)
        yield found


def create_table(env: Env) -> None:
    """The caller's table the tests write to, in the store's database."""
    if env.backend == "sqlite":
        env.table = "reports"
        with sqlite3.connect(urlsplit(env.url).path[1:]) as conn:
            conn.execute("CREATE TABLE reports (id INTEGER PRIMARY KEY, value TEXT)")
    else:
        import psycopg

        from tenure.stores.postgres import parse_postgres_url
        from tests.backends import POSTGRES_URL

        schema = parse_postgres_url(env.url).schema
        env.table = f'"{schema}".reports'
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {env.table} (id BIGSERIAL PRIMARY KEY, value TEXT)")


def claimed(env: Env, job: str = "job-1", owner: str = "A") -> tenure.Lease:
    env.store.submit(job)
    lease = env.store.claim(job, owner, TTL)
    assert lease is not None
    return lease
