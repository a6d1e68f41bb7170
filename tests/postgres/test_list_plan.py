"""Issue #17: a page of `jobs()` on PostgreSQL walks the listing index from its cursor
(tenure_jobs_by_seq), never the table: plans on 200,000 generated jobs, as tenure's
connections run them (generic plans, see sql/configure.sql)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tenure
from tenure.stores.postgres._common import SqlSet, render, sql_text
from tests.backends import POSTGRES_URL, postgres_schema, postgres_schema_url
from tests.postgres._plans import buffers, explain, nodes

pytestmark = pytest.mark.slow

ROWS = 200_000


@pytest.fixture(scope="module")
def listed() -> Iterator[tuple[Any, str]]:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn, postgres_schema("tlist") as schema:
        conn.execute(sql_text("configure").encode())  # the session of tenure's connections
        tenure.connect(postgres_schema_url(schema)).close()
        # Mostly done history, 1 % dead, the rest ready; ten queues, a hundred owners.
        conn.execute(
            render(
                "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, owner, available_at, "
                "max_attempts, created_at, updated_at) "
                "SELECT 'job-' || g, 'q' || (g %% 10), "
                "CASE WHEN g %% 100 = 0 THEN 'dead' WHEN g > %s THEN 'ready' ELSE 'done' END, "
                "'w' || (g %% 100), 1000 + g, 5, 1000 + g, 1000 + g "
                "FROM generate_series(1, %s) g",
                schema,
            ).encode(),
            (ROWS - 1000, ROWS),
        )
        conn.execute(render("VACUUM ANALYZE {schema}.tenure_jobs", schema).encode())
        yield conn, schema


def _plan(conn: Any, schema: str, **params: Any) -> dict[str, Any]:
    values = {"after": -1, "queue": None, "state": None, "owner": None, "older_than": None}
    values |= {"limit": 101, "now": None, **params}
    return explain(conn, SqlSet(schema)["list_page"], values)


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"after": ROWS // 2},
        {"queue": "q3", "after": 150_000},
        {"state": "ready"},
        {"owner": "w7", "older_than": 10.0},
    ],
    ids=repr,
)
def test_a_page_walks_the_listing_index_from_its_cursor(
    listed: tuple[Any, str], filters: dict[str, Any]
) -> None:
    conn, schema = listed
    plan = _plan(conn, schema, **filters)
    scans = [n for n in nodes(plan) if n.get("Relation Name") == "tenure_jobs"]
    assert scans
    assert all(n["Node Type"] == "Index Scan" for n in scans), [n["Node Type"] for n in scans]
    assert all(n.get("Index Name") == "tenure_jobs_by_seq" for n in scans)
    # The only sort is of the page itself (list_page.sql's outer ORDER BY), never the table.
    sorts = [n for n in nodes(plan) if n["Node Type"] == "Sort"]
    assert all(n["Actual Rows"] <= 101 for n in sorts), [n["Actual Rows"] for n in sorts]
    # A page of 100 found without reading the table (the unfiltered page: a few pages).
    if not filters or filters == {"after": ROWS // 2}:
        assert buffers(plan) < 40, buffers(plan)
