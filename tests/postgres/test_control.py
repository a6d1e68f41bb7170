"""Job control on PostgreSQL: purge walks its index (a plan test on 100,000 jobs), the
single-job control statements use the primary key, and the purge index makes no update of
a claim or renewal lose HOT (heap-only) that it had without it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tenure
from tenure.stores.postgres._common import SqlSet, render, sql_text
from tests.backends import POSTGRES_URL, postgres_schema, postgres_schema_url
from tests.postgres._plans import explain, scans_of_jobs


@pytest.fixture(scope="module")
def filled() -> Iterator[tuple[Any, str]]:
    """100,000 jobs: nine in ten ready, the rest done, dead or cancelled at spread times."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn, postgres_schema("tctl") as schema:
        conn.execute(sql_text("configure").encode())  # the session of tenure's connections
        tenure.connect(postgres_schema_url(schema)).close()
        conn.execute(
            render(
                "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
                "max_attempts, created_at, updated_at) "
                "SELECT 'job-' || g, 'default', CASE g % 30 WHEN 0 THEN 'done' "
                "WHEN 10 THEN 'dead' WHEN 20 THEN 'cancelled' ELSE 'ready' END, "
                "1000 + g, 5, 1000, 1000 + g FROM generate_series(1, 100000) g",
                schema,
            ).encode()
        )
        conn.execute(render("ANALYZE {schema}.tenure_jobs", schema).encode())
        yield conn, schema


def test_purge_walks_the_finished_index(filled: tuple[Any, str]) -> None:
    conn, schema = filled
    params = {
        "states": ["done", "dead", "cancelled"],
        "older_than": 0.0,
        "limit": 500,
        "now": 1e9,
    }
    plan = explain(conn, SqlSet(schema)["purge"], params)
    scans = scans_of_jobs(plan)
    assert all(n["Node Type"] != "Seq Scan" for n in scans), scans
    picks = [n for n in scans if n.get("Index Name") == "tenure_jobs_finished"]
    assert picks, scans
    assert picks[0]["Node Type"] == "Index Scan", scans
    assert picks[0]["Actual Rows"] == 500  # one batch, read in index order and no more
    top = plan["Plan"]
    touched = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    assert touched < 20 * 500, touched  # a batch, not the table


@pytest.mark.parametrize("operation", ["cancel", "requeue", "delete"])
def test_control_statements_use_the_primary_key(filled: tuple[Any, str], operation: str) -> None:
    conn, schema = filled
    params = {
        "job_id": "job-77",
        "reason": "r",
        "takes": ["ready", "leased"],
        "max_generation": 2**63 - 1,
        "delay": 0.0,
        "reset_attempts": False,
        "now": None,
    }
    plan = explain(conn, SqlSet(schema)[operation], params)
    scans = scans_of_jobs(plan)
    assert scans
    assert all(n.get("Index Name") == "tenure_jobs_pkey" for n in scans), [
        (n["Node Type"], n.get("Index Name")) for n in scans
    ]


def _updates(admin: Any, schema: str) -> tuple[int, int]:
    admin.execute("SELECT pg_stat_clear_snapshot()")
    row = admin.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE schemaname = %s AND relname = 'tenure_jobs'",
        (schema,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _cycle(url: str, admin: Any, schema: str, prefix: str) -> int:
    """HOT updates among 30 claims, renewals and completions (90 updates)."""
    before = _updates(admin, schema)
    with tenure.connect(url) as store:
        for n in range(30):
            store.submit(f"{prefix}{n}")
            lease = store.claim(f"{prefix}{n}", "w", 30)
            assert lease is not None
            store.complete(store.renew(lease), None)
    # The store's connections report their counts when they close: wait for all 90.
    deadline = time.monotonic() + 10
    while (after := _updates(admin, schema))[0] < before[0] + 90:
        assert time.monotonic() < deadline, (before, after)
        time.sleep(0.1)
    return after[1] - before[1]


def test_the_purge_index_costs_no_hot_update(url: str, schema: str, admin: Any) -> None:
    # tenure_jobs_claimable already indexes state and available_at, which every claim,
    # renewal and completion change: none of them is HOT, with or without the purge index
    # (whose key, updated_at, they change too). This pins that down: if a statement ever
    # became HOT-able, the index would show here as the difference.
    tenure.connect(url).close()
    with_index = _cycle(url, admin, schema, "a")
    admin.execute(render("DROP INDEX {schema}.tenure_jobs_finished", schema).encode())
    without_index = _cycle(url, admin, schema, "b")
    assert with_index == without_index
