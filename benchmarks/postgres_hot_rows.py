"""Whether a claim *could* be a HOT update, by the width of the row it writes: the page-room
half of the HOT-claims question (issue #18), apart from any index.

    python benchmarks/postgres_hot_rows.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--rows 20000] [--claims 2000] [--batches 1,10] [--fillfactors 85,70]

A HOT update needs two things: no index holds a column it changes, and the new version
fits on the old one's page. `postgres_hot_claims.py` measures tenure's own layout, where
the first fails (a claim changes ``state``, which the partial indexes read). This script
takes indexes out of the question (each table has only its primary key, on a column no
update writes) and measures the second alone, on three shapes of row:

* ``wide``: a job-like row (lease columns plus a ``--pad``-byte payload), claimed in place,
  as any layout that keeps the lease in ``tenure_jobs`` would;
* ``narrow``: a lease-only row (job id, generation, state, owner, secret hash, lease end),
  its lease columns NULL until the first claim;
* ``narrow presized`` and ``wide presized``: the same rows, their owner, secret hash and
  lease end written at insert with values of the claimed width, so that a claim does not
  grow the row.

Each run claims ``--claims`` rows in FIFO order in batches, one transaction per batch that
also completes the batch before (as ``complete_and_claim`` does), on a table filled and
vacuumed beforehand with autovacuum off. It prints the share of all those updates that were
HOT (``pg_stat_user_tables``). Each table lives in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import argparse
import uuid

import psycopg
from _common import machine_line, table_updates
from psycopg import sql

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

SHAPES = ("wide", "wide presized", "narrow", "narrow presized")


def flushed(conn: psycopg.Connection) -> None:
    """Make this backend's table counters visible to others now (PostgreSQL 15 and later
    flush them lazily, up to seconds after the transaction)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")


def measure(
    url: str, shape: str, fillfactor: int, batch: int, rows: int, claims: int, pad: int
) -> tuple[float, int, int]:
    """(rows per page, updates, HOT updates) of one run."""
    schema = f"hot_rows_{uuid.uuid4().hex[:10]}"
    table = sql.Identifier(schema, "leases")
    presized = shape.endswith("presized")
    with (
        psycopg.connect(url, autocommit=True) as conn,
        psycopg.connect(url, autocommit=True) as reader,
    ):
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (job_id bigint PRIMARY KEY,"
                    " generation bigint NOT NULL DEFAULT 0, state smallint NOT NULL DEFAULT 0,"
                    " owner text, secret_hash text, lease_until float8, payload text)"
                    " WITH (fillfactor = {}, autovacuum_enabled = false)"
                ).format(table, sql.Literal(fillfactor))
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (job_id, owner, secret_hash, lease_until, payload)"
                    " SELECT g, {}, {}, {}, {} FROM generate_series(1, {}) AS g"
                ).format(
                    table,
                    sql.Literal("worker-00" if presized else None),
                    sql.Literal("0" * 64 if presized else None),
                    sql.Literal(0.0 if presized else None),
                    sql.Literal("x" * pad if shape.startswith("wide") else None),
                    sql.Literal(rows),
                )
            )
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
            per_page = conn.execute(
                "SELECT %s / greatest(relpages, 1)::float8 FROM pg_class WHERE oid = %s::regclass",
                (rows, f"{schema}.leases"),
            ).fetchone()
            assert per_page is not None
            flushed(conn)
            before = table_updates(reader, schema, "leases")
            complete = sql.SQL(
                "UPDATE {} SET state = 2, owner = NULL, secret_hash = NULL, lease_until = NULL"
                " WHERE job_id = ANY(%s)"
            ).format(table)
            claim = sql.SQL(
                "UPDATE {} SET state = 1, generation = generation + 1, owner = 'worker-07',"
                " secret_hash = md5(random()::text) || md5(random()::text),"
                " lease_until = extract(epoch FROM clock_timestamp()) + 30"
                " WHERE job_id = ANY(%s)"
            ).format(table)
            previous: list[int] = []
            for first in range(1, claims + 1, batch):
                ids = list(range(first, min(first + batch, claims + 1)))
                with conn.transaction():
                    if previous:
                        conn.execute(complete, (previous,))
                    conn.execute(claim, (ids,))
                previous = ids
            flushed(conn)
            after = table_updates(reader, schema, "leases")
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return float(per_page[0]), after[0] - before[0], after[1] - before[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--batches", default="1,10")
    parser.add_argument("--fillfactors", default="85,70")
    parser.add_argument("--pad", type=int, default=200, help="payload bytes of a wide row")
    args = parser.parse_args()
    print(f"HOT updates by row shape, claim + complete in FIFO batches; {machine_line()}")
    print(f"{'shape':16} {'fillfactor':>10} {'rows/page':>9} {'batch':>5} {'HOT':>14}")
    for fillfactor in (int(value) for value in args.fillfactors.split(",")):
        for batch in (int(value) for value in args.batches.split(",")):
            for shape in SHAPES:
                per_page, updates, hot = measure(
                    args.url, shape, fillfactor, batch, args.rows, args.claims, args.pad
                )
                share = f"{hot}/{updates} {100 * hot / max(updates, 1):3.0f} %"
                print(f"{shape:16} {fillfactor:>10} {per_page:>9.1f} {batch:>5} {share:>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
