"""The statements' plans, as tenure's connections run them (generic plans, see
sql/configure.sql): claim_next picks from the partial index whatever the backlog, touching
about as many pages with 100,000 queued jobs as with 1,000; single-job operations go
through the primary key, and so do complete_many's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tenure
from tenure._validate import MAX_GENERATION
from tenure.stores.postgres._common import SqlSet, render, sql_text
from tests.backends import POSTGRES_URL, postgres_schema, postgres_schema_url
from tests.postgres._plans import buffers, explain, nodes, scans_of_jobs

pytestmark = pytest.mark.slow


def by_key_or_address(node: dict[str, Any]) -> bool:
    """A read of tenure_jobs by primary key, or of one row by its address (the batch updates
    reach the rows their pick or check locked so: sql/_held.sql)."""
    return node.get("Index Name") == "tenure_jobs_pkey" or node["Node Type"] == "Tid Scan"


def _fill(conn: Any, schema: str, count: int, *, analyze: bool = True) -> None:
    conn.execute(
        render(
            "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
            "max_attempts, created_at, updated_at, priority) "
            "SELECT 'job-' || g, CASE WHEN g %% 10 = 0 THEN 'other' ELSE 'default' END, "
            "'ready', 1000 + g, 5, 1000, 1000, g %% 3 - 1 FROM generate_series(1, %s) g",
            schema,
        ).encode(),
        (count,),
    )
    if analyze:
        conn.execute(render("ANALYZE {schema}.tenure_jobs", schema).encode())


@pytest.fixture(scope="module")
def filled() -> Iterator[tuple[Any, dict[int, str]]]:
    with (
        psycopg.connect(POSTGRES_URL, autocommit=True) as conn,
        postgres_schema("tplan") as small,
        postgres_schema("tplan") as large,
    ):
        conn.execute(sql_text("configure").encode())  # the session of tenure's connections
        for schema in (small, large):
            tenure.connect(postgres_schema_url(schema)).close()
        _fill(conn, small, 1_000)
        _fill(conn, large, 100_000)
        yield conn, {1_000: small, 100_000: large}


def _claim_next_params(limit: int, queues: list[str]) -> dict[str, Any]:
    return {
        "owner": "w",
        "ttl": 30.0,
        "queues": queues,
        "secret_hashes": [f"h{i}" for i in range(limit)],
        "limit": limit,
        "max_generation": MAX_GENERATION,
        "now": None,
    }


@pytest.mark.parametrize(("limit", "queues"), [(1, ["default"]), (50, ["default", "other"])])
def test_claim_next_cost_does_not_grow_with_the_backlog(
    filled: tuple[Any, dict[int, str]], limit: int, queues: list[str]
) -> None:
    conn, schemas = filled
    plans = {
        size: explain(conn, SqlSet(schema)["claim_next"], _claim_next_params(limit, queues))
        for size, schema in schemas.items()
    }
    for plan in plans.values():
        scans = scans_of_jobs(plan)
        assert all(n["Node Type"] != "Seq Scan" for n in scans), scans
        # Both paths of the pick (issue #18): ready jobs, and the expired leases.
        assert any(n.get("Index Name") == "tenure_jobs_queued" for n in scans)
        assert any(n.get("Index Name") == "tenure_jobs_leased" for n in scans)
        claimed = [n for n in nodes(plan) if n["Node Type"] == "ModifyTable"]
        assert sum(n["Actual Rows"] for n in claimed) == limit
        assert "JIT" not in plan  # compiling would cost more than running it
    small, large = buffers(plans[1_000]), buffers(plans[100_000])
    # Only the B-tree depth grows (one level between these sizes), for each index touched.
    assert large <= small * 1.3 + 8, (small, large)
    assert large < 40 * limit + 60, large


def test_a_paused_queue_is_left_out_before_its_walk(filled: tuple[Any, dict[int, str]]) -> None:
    # "other" paused: the pick walks tenure_jobs_queued for "default" only (one loop of
    # the index scan), and the paused row costs a probe, not a scan of the backlog.
    conn, schemas = filled
    schema = schemas[100_000]
    pause = render("INSERT INTO {schema}.tenure_queues VALUES ('other', true)", schema)
    conn.execute(pause.encode())
    try:
        plan = explain(
            conn, SqlSet(schema)["claim_next"], _claim_next_params(50, ["default", "other"])
        )
    finally:
        conn.execute(render("DELETE FROM {schema}.tenure_queues", schema).encode())
    scans = scans_of_jobs(plan)
    assert all(n["Node Type"] != "Seq Scan" for n in scans), scans
    walks = [n for n in scans if n.get("Index Name") == "tenure_jobs_queued"]
    assert walks
    assert all(n["Actual Loops"] == 1 for n in walks), walks
    claimed = [n for n in nodes(plan) if n["Node Type"] == "ModifyTable"]
    assert sum(n["Actual Rows"] for n in claimed) == 50
    assert buffers(plan) < 40 * 50 + 60


def _room_calls(plan: dict[str, Any]) -> list[int]:
    return [
        int(n["Actual Loops"])
        for n in nodes(plan)
        if n["Node Type"] == "Function Scan" and n.get("Function Name") == "tenure_queue_room"
    ]


def test_an_unlimited_claim_does_not_call_the_limits_function(
    filled: tuple[Any, dict[int, str]],
) -> None:
    # Queue limits (issue #18) cost unlimited queues a probe of tenure_queues per queue: the
    # function that locks and counts is behind a one-time filter and never runs.
    conn, schemas = filled
    plan = explain(
        conn, SqlSet(schemas[100_000])["claim_next"], _claim_next_params(50, ["default", "other"])
    )
    assert _room_calls(plan) == [0]
    claimed = [n for n in nodes(plan) if n["Node Type"] == "ModifyTable"]
    assert sum(n["Actual Rows"] for n in claimed) == 50


def test_a_limited_claim_takes_the_room_and_stays_on_the_index(
    filled: tuple[Any, dict[int, str]],
) -> None:
    conn, schemas = filled
    schema = schemas[100_000]
    limit = render("INSERT INTO {schema}.tenure_queues VALUES ('default', false, 10)", schema)
    conn.execute(limit.encode())
    try:
        plan = explain(
            conn, SqlSet(schema)["claim_next"], _claim_next_params(50, ["default", "other"])
        )
    finally:
        conn.execute(render("DELETE FROM {schema}.tenure_queues", schema).encode())
    assert _room_calls(plan) == [1]
    scans = scans_of_jobs(plan)
    assert all(n["Node Type"] != "Seq Scan" for n in scans), scans
    claimed = [n for n in nodes(plan) if n["Node Type"] == "ModifyTable"]
    # At most 10 of "default" (the rest from "other"), about as cheap as an unlimited pick.
    assert sum(n["Actual Rows"] for n in claimed) == 50
    assert buffers(plan) < 40 * 50 + 60


@pytest.mark.parametrize("operation", ["get", "claim", "renew", "complete", "release", "fail"])
def test_single_job_operations_use_the_primary_key(
    filled: tuple[Any, dict[int, str]], operation: str
) -> None:
    conn, schemas = filled
    params = {
        "job_id": "job-77",
        "owner": "w",
        "generation": 0,
        "secret_hash": "h",
        "receipt": "r",
        "ttl": 30.0,
        "result": None,
        "error": "e",
        "retry_in": 0.0,
        "max_generation": MAX_GENERATION,
        "now": None,
    }
    plan = explain(conn, SqlSet(schemas[100_000])[operation], params)
    scans = scans_of_jobs(plan)
    assert scans
    # Never tenure_jobs_leased, though renew, complete... say state = 'leased' too: its
    # predicate's "seq > 0" keeps a plan made while it was nearly empty off it.
    assert all(n.get("Index Name") == "tenure_jobs_pkey" for n in scans), [
        (n["Node Type"], n.get("Index Name"), n.get("Filter")) for n in scans
    ]
    # A few pages of the job's index and heap, plus a claim's one-row reads of the
    # generation floor and the store id row: a handful, whatever the table's size; and,
    # since issue #17, one more entry in the listing index (tenure_jobs_by_seq) per update
    # that moves a job (these updates are not HOT: they change available_at): 24 before it,
    # 20 before job control.
    assert buffers(plan) < 28


@pytest.mark.parametrize("count", [1, 10, 1000])
def test_complete_many_uses_the_primary_key(filled: tuple[Any, dict[int, str]], count: int) -> None:
    conn, schemas = filled
    params = {
        "job_ids": [f"job-{i * 97 + 1}" for i in range(count)],
        "owners": ["w"] * count,
        "generations": [0] * count,
        "held_hashes": ["h"] * count,
        "receipts": ["r"] * count,
        "results": [None] * count,
        "now": None,
    }
    plan = explain(conn, SqlSet(schemas[100_000])["complete_many"], params)
    scans = scans_of_jobs(plan)
    assert scans
    assert all(by_key_or_address(n) for n in scans), [
        (n["Node Type"], n.get("Index Name"), n.get("Filter")) for n in scans
    ]
    assert buffers(plan) < 10 * count + 20


def _batch_params() -> dict[str, Any]:
    """complete_many's and complete_and_claim's: ten completions, a claim of ten."""
    return {
        **_claim_next_params(10, ["default"]),
        "job_ids": [f"job-{i * 97 + 1}" for i in range(10)],
        "owners": ["w"] * 10,
        "generations": [0] * 10,
        "held_hashes": ["h"] * 10,
        "receipts": ["r"] * 10,
        "results": [None] * 10,
    }


@pytest.mark.parametrize("operation", ["complete_many", "complete_and_claim"])
@pytest.mark.parametrize("size", [1_000, 100_000])
def test_batch_statements_probe_the_primary_key_whatever_the_table_size(
    filled: tuple[Any, dict[int, str]], operation: str, size: int
) -> None:
    # With PostgreSQL's default random_page_cost a few thousand jobs were enough for the
    # generic plan to read the whole table (hash join over a sequential scan) instead of
    # probing the primary key ten times: sql/configure.sql sets 1.1.
    conn, schemas = filled
    params = _batch_params()
    plan = explain(conn, SqlSet(schemas[size])[operation], params)
    scans = scans_of_jobs(plan)
    assert scans
    assert all(n["Node Type"] != "Seq Scan" for n in scans), [
        (n["Node Type"], n.get("Index Name")) for n in scans
    ]
    picks = {"tenure_jobs_queued", "tenure_jobs_leased"}
    expected = {"tenure_jobs_pkey"} | (picks if "claim" in operation else set())
    assert {n.get("Index Name") for n in scans if n["Node Type"] != "Tid Scan"} == expected
    assert buffers(plan) < 400  # a read of the 100,000-job table would be thousands


@pytest.fixture(scope="module")
def recorded_empty() -> Iterator[tuple[Any, str]]:
    """20,000 jobs in a table whose statistics say it is empty: an analyze ran after every
    job had been purged (autovacuum does so), none since the queue filled again."""
    with (
        psycopg.connect(POSTGRES_URL, autocommit=True) as conn,
        postgres_schema("tplan") as schema,
    ):
        conn.execute(sql_text("configure").encode())
        tenure.connect(postgres_schema_url(schema)).close()
        _fill(conn, schema, 20_000)
        conn.execute(render("DELETE FROM {schema}.tenure_jobs", schema).encode())
        conn.execute(render("ANALYZE {schema}.tenure_jobs", schema).encode())
        _fill(conn, schema, 20_000, analyze=False)
        yield conn, schema


@pytest.mark.parametrize("operation", ["claim_next", "complete_many", "complete_and_claim"])
def test_batch_statements_probe_the_primary_key_when_the_statistics_say_empty(
    recorded_empty: tuple[Any, str], operation: str
) -> None:
    # Statistics of an empty table price a read of all of it at nothing: the batch
    # updates read every job through the primary key to find their ten, and the pick read
    # every ready job of the queue in a bitmap scan to sort them (claims at a twentieth of
    # their speed, benchmarks/postgres_stale_stats.py). Each update names its jobs as an
    # array too, so that any index path probes them; sql/configure.sql turns bitmap scans
    # off.
    conn, schema = recorded_empty
    params = _batch_params()
    plan = explain(conn, SqlSet(schema)[operation], params)
    scans = scans_of_jobs(plan)
    assert all(n["Node Type"] != "Seq Scan" for n in scans), scans
    assert sum(int(n.get("Actual Rows", 0)) * int(n.get("Actual Loops", 1)) for n in scans) < 100, [
        (n["Node Type"], n.get("Index Name"), n.get("Actual Rows")) for n in scans
    ]
    assert buffers(plan) < 400  # a read of the 20,000-job table is over a thousand


def test_wait_lookup_uses_the_partial_index(filled: tuple[Any, dict[int, str]]) -> None:
    conn, schemas = filled
    params = {"queues": ["default", "other"], "max_generation": MAX_GENERATION, "now": None}
    plan = explain(conn, SqlSet(schemas[100_000])["next_due"], params)
    scans = scans_of_jobs(plan)
    assert scans
    # The ready jobs' earliest run time per priority level (three here: a step to the level
    # and a probe of its first run time, a few pages each), the leases walked (none): the
    # pages grow with the levels, not with the 100,000 jobs. The leases' walk also reads
    # the index pages of the claims the other tests of this file ran under EXPLAIN ANALYZE
    # and rolled back (28 pages in a run of the whole file with tenure_jobs_leased keyed
    # (queue, priority DESC, seq), 37 since migration 0013 keyed it (queue, lease_min_end);
    # a walk of the backlog would be thousands).
    names = {"tenure_jobs_queued", "tenure_jobs_leased"}
    assert all(n.get("Index Name") in names for n in scans), scans
    assert buffers(plan) < 2 * 3 * 15 + 20


def test_connections_are_configured(real_store: tenure.Store) -> None:
    driver: Any = real_store._driver
    with driver._pool.connection() as conn:
        assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)
        assert conn.execute("SHOW jit").fetchone() == ("off",)
        assert conn.execute("SHOW random_page_cost").fetchone() == ("1.1",)
        assert conn.execute("SHOW enable_bitmapscan").fetchone() == ("off",)


@pytest.fixture(scope="module")
def finished_recorded_empty() -> Iterator[tuple[Any, str]]:
    """20,000 finished jobs and their 20,000 attempts, in tables whose statistics say they
    are empty (analyzed after a purge emptied them, not since)."""
    with (
        psycopg.connect(POSTGRES_URL, autocommit=True) as conn,
        postgres_schema("tplan") as schema,
    ):
        conn.execute(sql_text("configure").encode())
        tenure.connect(postgres_schema_url(schema)).close()
        for table in ("tenure_jobs", "tenure_attempts"):  # VACUUM records "empty" too
            conn.execute(render(f"VACUUM ANALYZE {{schema}}.{table}", schema).encode())
        conn.execute(
            render(
                "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, generation, "
                "available_at, max_attempts, created_at, updated_at) "
                "SELECT 'job-' || g, 'default', 'done', 1, 1000, 5, 1000, 1000 + g "
                "FROM generate_series(1, 20000) g",
                schema,
            ).encode()
        )
        conn.execute(
            render(
                "INSERT INTO {schema}.tenure_attempts (job_id, generation, owner, "
                "started_at, ended_at, ending) "
                "SELECT 'job-' || g, 1, 'w', 1000, 1000 + g, 'completed' "
                "FROM generate_series(1, 20000) g",
                schema,
            ).encode()
        )
        yield conn, schema


def _rows_read(plan: dict[str, Any], relation: str) -> list[tuple[str, str | None, int]]:
    return [
        (
            n["Node Type"],
            n.get("Index Name"),
            int(n.get("Actual Rows", 0)) * int(n.get("Actual Loops", 1)),
        )
        for n in nodes(plan)
        if n.get("Relation Name") == relation and n["Node Type"] != "ModifyTable"
    ]


@pytest.mark.parametrize(
    ("operation", "params", "deleted"),
    [
        ("purge", {"states": ["done"], "older_than": 0.0, "limit": 50, "now": None}, 50),
        ("delete", {"job_id": "job-777", "takes": ["done"], "now": None}, 1),
    ],
)
def test_purge_and_delete_probe_by_key_when_the_statistics_say_empty(
    finished_recorded_empty: tuple[Any, str], operation: str, params: dict[str, Any], deleted: int
) -> None:
    # A purge empties the tables and an analyze records them so: the next purge batches
    # (and deletes), planned for empty tables, must still find their jobs' history rows by
    # key, not read the 20,000 rows of everyone's.
    conn, schema = finished_recorded_empty
    plan = explain(conn, SqlSet(schema)[operation], params)
    for relation in ("tenure_jobs", "tenure_attempts"):
        reads = _rows_read(plan, relation)
        assert reads, relation
        assert all(kind != "Seq Scan" for kind, _, _ in reads), (relation, reads)
        assert sum(rows for _, _, rows in reads) <= 2 * deleted + 2, (relation, reads)
    assert buffers(plan) < 40 * deleted + 40  # a read of either table is over a hundred
