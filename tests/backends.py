"""The stores every conformance test runs against.

Each backend knows how to make an isolated store URL for one test (its own file, schema,
key prefix or database) and offers the few test hooks that reach under the public API.
A backend whose server is not reachable is skipped with a one-line reason, except in CI
(``CI=true``), where it fails: a skipped backend in CI would be a check that cannot fail.
"""

from __future__ import annotations

import atexit
import os
import queue
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip locally, fail in CI."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing backend is a failure, not a skip)")
    pytest.skip(reason)


@dataclass(frozen=True)
class Backend:
    name: str
    # tmp_path -> a context manager yielding a fresh, isolated store URL
    isolated_url: Callable[[Path], AbstractContextManager[str]]
    # (url, job_id, generation): force a job's generation (to test the top of the range)
    set_generation: Callable[[str, str, int], None]

    def __str__(self) -> str:
        return self.name


# -- SQLite ------------------------------------------------------------------------------


@contextmanager
def _sqlite_url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / f'tenure-{uuid.uuid4().hex[:8]}.db'}"


def sqlite_path(url: str) -> Path:
    """The file of a ``sqlite:///`` store URL."""
    return Path(urlsplit(url).path[1:])


def _sqlite_set_generation(url: str, job_id: str, generation: int) -> None:
    with sqlite3.connect(sqlite_path(url)) as conn:
        conn.execute("UPDATE tenure_jobs SET generation = ? WHERE job_id = ?", (generation, job_id))


SQLITE = Backend("sqlite", _sqlite_url, _sqlite_set_generation)

# PostgreSQL and Redis append themselves here when their drivers land.
BACKENDS: list[Backend] = [SQLITE]

# -- Redis -------------------------------------------------------------------------------
# Each test gets its own key prefix (its own hash tag) on the server named by
# TENURE_TEST_REDIS_URL; the prefix's keys are deleted afterwards.

REDIS_URL = os.environ.get("TENURE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


_redis_reachable: list[str] = []  # "" once reached; the reason when not


def redis_client() -> Any:
    """A plain redis-py client of the test server, or `unavailable`."""
    try:
        import redis
    except ImportError:
        unavailable("redis-py is not installed: pip install -e '.[redis]'")
    if _redis_reachable and _redis_reachable[0]:
        unavailable(_redis_reachable[0])
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        _redis_reachable[:] = [f"Redis is not reachable at {REDIS_URL} ({exc})"]
        unavailable(_redis_reachable[0])
    _redis_reachable[:] = [""]
    return client


@contextmanager
def _redis_url(tmp_path: Path) -> Iterator[str]:
    client = redis_client()
    prefix = f"tenure-test-{uuid.uuid4().hex[:12]}"
    separator = "&" if urlsplit(REDIS_URL).query else "?"
    try:
        yield f"{REDIS_URL}{separator}prefix={prefix}"
    finally:
        keys = list(client.scan_iter(match="{" + prefix + "}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def _redis_set_generation(url: str, job_id: str, generation: int) -> None:
    from tenure.stores.redis import Keys, parse_redis_url

    client = redis_client()
    try:
        key = Keys(parse_redis_url(url).prefix).job(job_id)
        if not client.exists(key):
            raise LookupError(f"no job {job_id!r} at {url}")
        client.hset(key, "g", str(generation))
    finally:
        client.close()


REDIS = Backend("redis", _redis_url, _redis_set_generation)
BACKENDS.append(REDIS)

# -- PostgreSQL --------------------------------------------------------------------------
# Each test gets its own schema (created by the store on first connect, ?schema=...) on the
# server named by TENURE_TEST_POSTGRES_URL; the schema is dropped afterwards.

POSTGRES_URL = os.environ.get(
    "TENURE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
_postgres_reachable: list[str] = []  # "" once reached; the reason when not


def postgres_admin() -> Any:
    """An autocommit connection to the test server, or `unavailable`."""
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed: pip install -e '.[postgres]'")
    if _postgres_reachable and _postgres_reachable[0]:
        unavailable(_postgres_reachable[0])
    try:
        conn = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        _postgres_reachable[:] = [f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc})"]
        unavailable(_postgres_reachable[0])
    _postgres_reachable[:] = [""]
    return conn


def postgres_schema_url(schema: str) -> str:
    separator = "&" if urlsplit(POSTGRES_URL).query else "?"
    return f"{POSTGRES_URL}{separator}schema={schema}"


class _SchemaDropper:
    """Drops finished tests' schemas in a background thread (a DROP ... CASCADE takes tens
    of milliseconds; no test waits for it). Everything is dropped before the run ends."""

    def __init__(self) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def drop(self, schema: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="drop-schemas", daemon=True)
            self._thread.start()
            atexit.register(self.finish)
        self._queue.put(schema)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            while (schema := self._queue.get()) is not None:
                admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def finish(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=60)


_dropper = _SchemaDropper()


@contextmanager
def postgres_schema(prefix: str = "t") -> Iterator[str]:
    """A fresh schema name on the test server, dropped (with everything in it) afterwards."""
    if _postgres_reachable != [""]:
        postgres_admin().close()
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        _dropper.drop(schema)


@contextmanager
def _postgres_url(tmp_path: Path) -> Iterator[str]:
    with postgres_schema() as schema:
        yield postgres_schema_url(schema)


def _postgres_set_generation(url: str, job_id: str, generation: int) -> None:
    from tenure.stores.postgres import parse_postgres_url

    schema = parse_postgres_url(url).schema
    with postgres_admin() as admin:
        done = admin.execute(
            f'UPDATE "{schema}".tenure_jobs SET generation = %s WHERE job_id = %s',
            (generation, job_id),
        )
        if done.rowcount != 1:
            raise LookupError(f"no job {job_id!r} at {url}")


POSTGRES = Backend("postgres", _postgres_url, _postgres_set_generation)
BACKENDS.append(POSTGRES)


# psycopg's async connections and pools run on asyncio only: a test of them runs there alone
# (under trio the PostgreSQL store runs its sync driver on threads, which the tests of the
# async API on both loops cover: tests/conformance/test_async.py and the like).
ASYNCIO_ONLY = pytest.mark.parametrize("anyio_backend", ["asyncio"])
