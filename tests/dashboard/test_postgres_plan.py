"""`queue_stats` on PostgreSQL reads the backlog, not the history: with 200,000 jobs of
which 2,000 are live, its plan walks the partial indexes of ready and leased jobs (no sequential
scan of tenure_jobs) and touches about as many pages as with 2,000 jobs in all.

It is not O(1): it reads every live job once (an index scan plus their heap rows), so a
scrape of a store with a backlog of 1M ready jobs reads those 1M rows. Run with ``-s`` to
see the plan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tenure
from tenure.stores.postgres._common import SqlSet, render, sql_text
from tests.backends import POSTGRES_URL, postgres_schema, postgres_schema_url
from tests.postgres._plans import explain, nodes

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("postgres_up")]

LIVE = 2_000


@pytest.fixture(scope="module")
def postgres_up() -> None:
    from tests.backends import POSTGRES, unavailable

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        unavailable(f"PostgreSQL is not reachable at {POSTGRES_URL}: {exc}")
    assert POSTGRES.name == "postgres"


def _fill(conn: Any, schema: str, total: int) -> None:
    # LIVE jobs ready or leased (some expired) in 5 queues; the rest done.
    conn.execute(
        render(
            "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, owner, generation, "
            "lease_until, available_at, attempts, max_attempts, created_at, updated_at, "
            "lease_min_end) "
            "SELECT 'job-' || g, 'q' || (g %% 5), "
            "CASE WHEN g > %s THEN 'done' WHEN g %% 4 = 0 THEN 'leased' ELSE 'ready' END, "
            "'w', 1, CASE WHEN g %% 4 = 0 THEN 1000 + g %% 3 * 1e10 END, 1000 + g, 1, 5, "
            "1000, 1000, 1000 + g FROM generate_series(1, %s) g",
            schema,
        ).encode(),
        (LIVE, total),
    )
    conn.execute(render("ANALYZE {schema}.tenure_jobs", schema).encode())


def _outline(plan: dict[str, Any]) -> str:
    lines = []

    def walk(node: dict[str, Any], depth: int) -> None:
        where = node.get("Index Name") or node.get("Relation Name") or ""
        lines.append(
            f"{'  ' * depth}{node['Node Type']} {where} rows={node.get('Actual Rows')} "
            f"buffers={node.get('Shared Hit Blocks', 0) + node.get('Shared Read Blocks', 0)}"
        )
        for child in node.get("Plans", []):
            walk(child, depth + 1)

    walk(plan["Plan"], 0)
    return "\n".join(lines)


@pytest.fixture(scope="module")
def filled() -> Iterator[tuple[Any, dict[int, str]]]:
    with (
        psycopg.connect(POSTGRES_URL, autocommit=True) as conn,
        postgres_schema("tstat") as small,
        postgres_schema("tstat") as large,
    ):
        conn.execute(sql_text("configure").encode())  # the session of tenure's connections
        for schema in (small, large):
            tenure.connect(postgres_schema_url(schema)).close()
        _fill(conn, small, LIVE)
        _fill(conn, large, 200_000)
        yield conn, {LIVE: small, 200_000: large}


def test_queue_stats_reads_the_backlog_not_the_history(
    filled: tuple[Any, dict[int, str]],
) -> None:
    conn, schemas = filled
    plans = {
        size: explain(conn, SqlSet(schema)["queue_stats"], {"now": None})
        for size, schema in schemas.items()
    }
    for size, plan in plans.items():
        print(f"\nqueue_stats, {size} jobs ({LIVE} live):\n{_outline(plan)}")
        scans = [n for n in nodes(plan) if n.get("Relation Name") == "tenure_jobs"]
        assert sum(n["Actual Rows"] for n in scans) == LIVE, _outline(plan)
        if size > LIVE:  # (when every job is live, reading the table in order is right)
            assert all(n["Node Type"] != "Seq Scan" for n in scans), _outline(plan)
            names = {n.get("Index Name") for n in nodes(plan)}
            assert {"tenure_jobs_queued", "tenure_jobs_leased"} <= names, _outline(plan)
    top = {size: plan["Plan"] for size, plan in plans.items()}
    pages = {
        s: t.get("Shared Hit Blocks", 0) + t.get("Shared Read Blocks", 0) for s, t in top.items()
    }
    # 100 times the jobs, the same backlog: about the same pages (the B-tree may be a level
    # deeper; the live rows are spread over more heap pages among the done ones).
    assert pages[200_000] <= pages[LIVE] * 3 + 50, pages


def test_queue_stats_answers_from_the_filled_store(filled: tuple[Any, dict[int, str]]) -> None:
    _, schemas = filled
    with tenure.connect(postgres_schema_url(schemas[200_000])) as store:
        stats = store.queue_stats()
    assert stats is not None
    assert [q.queue for q in stats.queues] == ["q0", "q1", "q2", "q3", "q4"]
    live = sum(q.ready + q.scheduled + q.leased + q.expired for q in stats.queues)
    assert live == LIVE
    assert sum(q.leased for q in stats.queues) > 0
    assert sum(q.expired for q in stats.queues) > 0
