"""A batch of 1,000 costs about a thousand times one, on PostgreSQL (migration 0015): no node
of a batch statement's plan, nor of the plans of the trigger it fires, reads a thousand rows
a thousand times. Before, a generic plan (which costs an array parameter at ten elements)
joined the batch with tenure_jobs the wrong way round, one read of the batch per row, and
the attempt history's trigger, planned at its session's first (small) statement, looped
over one transition table per row of the other: a million rows each, a renew_many of 1,000
at seven times the cost of ten of 100.

Each statement runs as tenure's connections run it (a generic plan, sql/configure.sql),
first with one item so that the session's plans are made for a small statement, as they
are in a worker, then with 1,000; the server's auto_explain reports every plan it ran,
the trigger's included, with its row counts. The table's statistics are each of the three
states a store meets: never gathered, gathered, and gathered when it was empty."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tenure
from tenure._validate import MAX_GENERATION
from tenure.stores.postgres._common import SqlSet, render, sql_text
from tests.backends import POSTGRES_URL, postgres_admin, postgres_schema, postgres_schema_url
from tests.postgres._plans import literal, nodes

pytestmark = pytest.mark.slow

BATCH = 1000
# A row per item, with some headroom (an answer of a complete_and_claim is two batches):
# a loop over the batch per item would be BATCH * BATCH.
MOST_ROWS_A_NODE_MAY_READ = 5 * BATCH


def _fill(conn: Any, schema: str, ready: int) -> None:
    """1 + BATCH leased jobs ("held-0" is the first run's, held by "w" at generation 1 with
    secret hash "h"), and ``ready`` ready ones."""
    held = BATCH + 1
    conn.execute(
        render(
            "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, owner, generation, "
            "secret_hash, lease_until, available_at, lease_min_end, attempts, max_attempts, "
            "created_at, updated_at) "
            "SELECT 'held-' || g, 'default', 'leased', 'w', 1, 'h', 1e12, 1e12, 1e12, 1, 5, "
            "1000, 1000 FROM generate_series(0, %s - 1) AS g",
            schema,
        ).encode(),
        (held,),
    )
    conn.execute(
        render(
            "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
            "max_attempts, created_at, updated_at) "
            "SELECT 'ready-' || g, 'default', 'ready', 1000 + g, 5, 1000, 1000 "
            "FROM generate_series(1, %s) AS g",
            schema,
        ).encode(),
        (ready,),
    )


@pytest.fixture(scope="module", params=["never gathered", "gathered", "gathered when empty"])
def schema(request: pytest.FixtureRequest) -> Iterator[str]:
    statistics = request.param
    with postgres_schema("tbatch") as name, psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        tenure.connect(postgres_schema_url(name)).close()
        # Statistics stay as this test leaves them (autovacuum would gather them at will).
        no_autovacuum = "ALTER TABLE {schema}.tenure_jobs SET (autovacuum_enabled = false)"
        conn.execute(render(no_autovacuum, name).encode())
        if statistics == "gathered when empty":
            _fill(conn, name, 0)
            conn.execute(render("DELETE FROM {schema}.tenure_jobs", name).encode())
            conn.execute(render("ANALYZE {schema}.tenure_jobs", name).encode())
        _fill(conn, name, 20_000)
        if statistics == "gathered":
            conn.execute(render("ANALYZE {schema}.tenure_jobs", name).encode())
        yield name


def _params(items: range, claims: int) -> dict[str, Any]:
    job_ids = [f"held-{i}" for i in items]
    count = len(job_ids)
    return {
        "job_ids": job_ids,
        "owners": ["w"] * count,
        "generations": [1] * count,
        "held_hashes": ["h"] * count,
        "ttls": [30.0] * count,
        "receipts": ["r"] * count,
        "results": [None] * count,
        "owner": "w2",
        "ttl": 30.0,
        "queues": ["default"],
        "secret_hashes": [f"s{i}" for i in range(claims)],
        "limit": claims,
        "max_generation": MAX_GENERATION,
        "now": None,
    }


def _submissions(items: range) -> dict[str, Any]:
    """submit_many's parameters: every other id is a job that exists already (held-<i>),
    so that the batch both inserts and answers existing jobs."""
    job_ids = [f"held-{i}" if i % 2 else f"new-{i}" for i in items]
    count = len(job_ids)
    return {
        "job_ids": job_ids,
        "queues": ["default"] * count,
        "payloads": ["null"] * count,
        "delays": [0.0] * count,
        "max_attempts": [5] * count,
        "priorities": [0] * count,
        "timeouts": [1.0] * count,
        "headers": ["{}"] * count,
        "now": None,
    }


def _run_params(operation: str, items: range) -> dict[str, Any]:
    if operation == "submit_many":
        return _submissions(items)
    claims = len(items) if "claim" in operation else 0
    return _params(items, claims)


def _plans_run(schema: str, operation: str) -> list[dict[str, Any]]:
    """Every plan (top-level and nested) the server ran for ``operation`` over BATCH items,
    in a session whose plans were made for its one-item run before."""
    statement = SqlSet(schema)[operation]
    reports: list[str] = []
    conn = postgres_admin()
    try:
        conn.execute(sql_text("configure").encode())
        conn.execute("LOAD 'auto_explain'")
        for setting, value in [
            ("log_min_duration", "0"),
            ("log_analyze", "on"),
            ("log_nested_statements", "on"),
            ("log_format", "json"),
            ("log_level", "notice"),
        ]:
            conn.execute(f"SET auto_explain.{setting} = '{value}'")
        conn.execute("SET client_min_messages = notice")
        conn.add_notice_handler(lambda notice: reports.append(notice.message_primary))
        with conn.transaction(force_rollback=True):
            conn.execute(f"PREPARE batch AS {statement.text.decode()}")
            for items in (range(1), range(1, 1 + BATCH)):
                params = _run_params(operation, items)
                args = ", ".join(literal(v) for v in statement.args(params))
                reports.clear()
                conn.execute(f"EXECUTE batch({args})")
    finally:
        conn.close()
    return [json.loads(report[report.index("{") :]) for report in reports if "plan:" in report]


# Each batch statement, and the rows its updates and inserts write for BATCH items (a
# complete_and_claim completes them and claims as many; submit_many inserts the half that
# is new).
WRITTEN = {
    "renew_many": BATCH,
    "complete_many": BATCH,
    "claim_next": BATCH,
    "complete_and_claim": 2 * BATCH,
    "submit_many": BATCH // 2,
}


@pytest.mark.parametrize("operation", list(WRITTEN))
def test_no_plan_reads_the_batch_once_per_item(schema: str, operation: str) -> None:
    plans = _plans_run(schema, operation)
    top = [p for p in plans if "tenure_jobs AS j" in p["Query Text"]]
    assert top, [p["Query Text"][:80] for p in plans]
    if operation != "submit_many":  # an insert fires no update trigger
        # The trigger's plans are among them, so that they are checked too (a renewal
        # stops at its first check, a probe of the table per old row).
        trigger = [p for p in plans if "tenure_old" in p["Query Text"]]
        assert trigger
    worst = max(
        (
            int(node.get("Actual Rows", 0)) * int(node.get("Actual Loops", 1)),
            node["Node Type"],
            node.get("Relation Name") or node.get("CTE Name") or node.get("Function Name"),
            plan["Query Text"].strip()[:60],
        )
        for plan in plans
        for node in nodes(plan)
    )
    assert worst[0] <= MOST_ROWS_A_NODE_MAY_READ, worst
    # And the work was done: every item applied (renewed, completed, inserted when new),
    # every job claimed.
    applied = [n for p in top for n in nodes(p) if n["Node Type"] == "ModifyTable"]
    assert sum(int(n.get("Actual Rows", 0)) for n in applied) == WRITTEN[operation]
