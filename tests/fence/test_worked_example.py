"""The worked example of docs/design.md §1, across real processes and real destinations.

Worker A claims job J at generation 7, prepares its effect and stalls (it stops itself with
SIGSTOP). Its lease expires; worker B claims J at generation 8, makes its effect and
completes. A is continued: its late effect reaches the destination and is refused there,
on the destination's own authority, and its completion is refused by the store.

The story is told on every lease store (``url``: each of the suite's backends) with a SQLite
destination: the expiry of A's lease by the store's own clock, B's takeover at generation 8
and the refusal of A's completion happen in the store. The other destinations (the signed
HTTP sink, PostgreSQL) do nothing with the lease store, so they hear the story on SQLite
only (each run is a few real processes and about 1.5 s).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence
from tests.backends import POSTGRES_URL, SQLITE, postgres_schema, unavailable
from tests.fence._sink import SinkProcess, events

pytestmark = pytest.mark.races

Actors = Callable[..., subprocess.Popen[str]]


def store_at_generation_6(url: str, job: str) -> str:
    """The lease store ``url``, where ``job`` has been claimed (and given back) six times."""
    with tenure.connect(url) as store:
        store.submit(job)
        for n in range(6):
            lease = store.claim(job, f"warm-up-{n}", 10)
            assert lease is not None
            store.release(lease)
        assert store.get(job).generation == 6
    return url


def run_story(actors: Actors, store: str, job: str, kind: str, where: str) -> dict[str, Any]:
    common = ("--store", store, "--job", job, "--kind", kind, "--where", where)
    a = actors("stale", *common, "--generation", "7", "--ttl", "0.4")
    a_events = events(a, "prepared")
    assert a_events["claimed"]["generation"] == 7
    b = actors("fresh", *common, "--generation", "8", "--ttl", "10")
    b_events = events(b, "complete")
    assert b.wait(timeout=30) == 0
    a.send_signal(signal.SIGCONT)  # A wakes up and carries on as if nothing happened
    a_events.update(events(a, "complete"))
    assert a.wait(timeout=30) == 0
    assert b_events["claimed"]["generation"] == 8
    assert b_events["complete"] == {"ok": True}
    # The store refuses A's completion: the job is B's (and done).
    assert a_events["complete"] == {"error": "LeaseLost", "current_generation": 8}
    with tenure.connect(store) as check:
        done = check.get(job)
    assert (done.state, done.generation, done.result) == ("done", 8, {"by": "worker-B"})
    return {"a": a_events["effect"], "b": b_events["effect"]}


# The destination is the point here, not the lease store: one store is enough.
@pytest.mark.parametrize("backend", [SQLITE], ids=str)
def test_http_sink_rejects_the_late_write_with_409(
    signed_sink: SinkProcess, actors: Actors, url: str
) -> None:
    job = f"report/{uuid.uuid4().hex[:6]} é"  # a job id that needs percent-encoding
    effects = run_story(actors, store_at_generation_6(url, job), job, "http", signed_sink.url)
    assert effects["b"]["status"] == 201
    assert effects["a"]["status"] == 409
    problem = effects["a"]["body"]
    assert problem["type"] == "urn:tenure:problem:stale"
    assert (problem["job_id"], problem["presented_generation"], problem["current_generation"]) == (
        job,
        7,
        8,
    )
    with signed_sink.client() as client:
        records = client.get("/records", params={"job": job}).json()["records"]
        refused = client.get("/rejections", params={"job": job}).json()["rejections"]
        fence_row = client.get(f"/fence/{job}").json()
    assert [(r["generation"], r["value"]) for r in records] == [
        (8, {"by": "worker-B", "generation": 8})
    ]
    assert [
        (r["kind"], r["status"], r["presented_generation"], r["current_generation"])
        for r in refused
    ] == [("stale", 409, 7, 8)]
    assert fence_row == {"job_id": job, "generation": 8}


def test_sqlite_destination_rejects_the_late_write(
    actors: Actors, url: str, tmp_path: Path
) -> None:
    job = f"report-{uuid.uuid4().hex[:6]}"
    dest = tmp_path / "dest.db"
    with sqlite3.connect(dest) as conn:
        conn.execute("CREATE TABLE effects (id INTEGER PRIMARY KEY, writer TEXT, generation INT)")
    effects = run_story(actors, store_at_generation_6(url, job), job, "sqlite", str(dest))
    assert effects["b"] == {"written": True}
    assert effects["a"]["error"] == "StaleToken"
    assert effects["a"]["highest_seen"] == 8
    conn = sqlite3.connect(dest)
    try:
        rows = conn.execute("SELECT writer, generation FROM effects ORDER BY id").fetchall()
        assert rows == [("worker-B", 8)]
        assert fence.fence_generation(conn, job) == 8
    finally:
        conn.close()


@pytest.fixture
def postgres_destination() -> Iterator[str]:
    """``conninfo#schema`` of a fresh schema holding an ``effects`` table."""
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed: pip install -e '.[postgres]'")
    with postgres_schema("fence") as schema:
        try:
            admin = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)
        except psycopg.OperationalError as exc:
            unavailable(f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc})")
        with admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')
            admin.execute(
                f'CREATE TABLE "{schema}".effects '
                "(id BIGSERIAL PRIMARY KEY, writer TEXT NOT NULL, generation BIGINT NOT NULL)"
            )
        yield f"{POSTGRES_URL}#{schema}"


# The destination is the point here, not the lease store: one store is enough.
@pytest.mark.parametrize("backend", [SQLITE], ids=str)
def test_postgres_destination_rejects_the_late_write(
    actors: Actors, url: str, postgres_destination: str
) -> None:
    import psycopg

    job = f"report-{uuid.uuid4().hex[:6]}"
    store = store_at_generation_6(url, job)
    effects = run_story(actors, store, job, "postgresql", postgres_destination)
    assert effects["b"] == {"written": True}
    assert (effects["a"]["error"], effects["a"]["highest_seen"]) == ("StaleToken", 8)
    conninfo, _, schema = postgres_destination.partition("#")
    with psycopg.connect(conninfo, options=f"-c search_path={schema}") as conn:
        rows = conn.execute("SELECT writer, generation FROM effects ORDER BY id").fetchall()
        assert rows == [("worker-B", 8)]
        conn.rollback()
        assert fence.fence_generation(conn, job) == 8
