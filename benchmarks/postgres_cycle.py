"""claim -> complete cycles on PostgreSQL: tenure against a raw psycopg loop running the very
same SQL, in the same run; and batch claims against single claims.

    python benchmarks/postgres_cycle.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--jobs 300] [--repeat 5] [--workers 1,4,16] [--batch 50] [--chunk 50]

Each side of each repetition gets a fresh schema holding ``--jobs`` x W ready jobs (filled
untimed with one INSERT ... SELECT, then VACUUM ANALYZE), and W workers (W = 1: this
process; W > 1: W OS processes) drain it with cycles of claim + complete:

* **tenure**: ``tenure.connect(url)``, the public sync API (``claim_next`` + ``complete``):
  argument validation, a fresh lease secret and its SHA-256 per claim, the `Lease`, the
  driver's pool (get/put a connection, the dead-connection check) and row decoding;
* **raw psycopg**: one ``psycopg.Connection`` (autocommit, the same session setting as
  tenure's connections: ``sql/configure.sql``) executing the same ``claim_next.sql`` and
  ``complete.sql`` with the same parameters, a fixed secret hash, reading only the fields
  the next call needs: the ceiling for this design.

The sides take turns of ``--chunk`` cycles (A B, B A, ...; with W processes, all of them
run their turn on the same side at once: see benchmarks/_common.py), and the script prints
median cycles/s and tenure/raw for each W. Then, at the largest W, it compares claims
alone: ``claim_next`` one at a time against ``claim_many(owner, ttl, --batch)`` (one
statement per batch); and full cycles: ``claim_next`` + ``complete``, ``claim_many`` + a
``complete`` per lease, ``claim_many`` + ``complete_many`` (two statements per batch), and
a raw psycopg loop running the last one's SQL (``claim_next.sql`` with the limit,
``complete_many.sql``) as its ceiling. After every repetition it
checks that every job was claimed exactly once (done, or leased, at generation 1), so a
broken loop cannot pass for a fast one.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from _common import Result, Side, contend_chunks, interleave_chunks, machine_line, print_report

import tenure
from tenure._validate import MAX_GENERATION
from tenure.stores.postgres._common import SqlSet, Statement, binary_lists, render, sql_text

OWNER = "bench-worker"
TTL = 60.0
RAW_SECRET_HASH = "0" * 64  # as long as a real one (sha256 hex)
RAW_RECEIPT = "1" * 64  # what a settle leaves in its place, as long as a real receipt
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def schema_url(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def fresh_schema(base: str, jobs: int) -> str:
    """A new schema holding ``jobs`` ready jobs, vacuumed and analysed."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    tenure.connect(schema_url(base, schema)).close()  # creates it
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            render(
                "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
                "max_attempts, created_at, updated_at) "
                "SELECT 'job-' || g, 'default', 'ready', 1000 + g, 5, 1000, 1000 "
                "FROM generate_series(1, %s) g",
                schema,
            ).encode(),
            (jobs,),
        )
        conn.execute(render("VACUUM ANALYZE {schema}.tenure_jobs", schema).encode())
    return schema


def verify(base: str, schema: str, claimed: int, *, completed: bool = True) -> None:
    """Every job claimed at most once, ``claimed`` of them; then drop the schema."""
    with psycopg.connect(base, autocommit=True) as conn:
        row = conn.execute(
            render(
                "SELECT count(*) FILTER (WHERE generation = 1), "
                "count(*) FILTER (WHERE generation > 1), "
                "count(*) FILTER (WHERE state = 'done') FROM {schema}.tenure_jobs",
                schema,
            ).encode()
        ).fetchone()
        assert row is not None
        once, twice, done = row
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    if twice or once != claimed or (completed and done != claimed):
        raise AssertionError(
            f"{schema}: claimed once {once}, more {twice}, done {done}; ran {claimed}"
        )


# -- the sides ---------------------------------------------------------------------------


class TenureCycles:
    def __init__(self, url: str, owner: str) -> None:
        self.store = tenure.connect(url)
        self.owner = owner

    def step(self, limit: int) -> int:
        store, owner = self.store, self.owner
        done = 0
        while done < limit and (lease := store.claim_next(owner, TTL)) is not None:
            store.complete(lease)
            done += 1
        return done

    def close(self) -> None:
        self.store.close()


class RawCycles:
    """The same two statements as the driver, on one plain psycopg connection."""

    def __init__(self, base: str, schema: str, owner: str) -> None:
        self.conn = psycopg.connect(base, autocommit=True)
        self.conn.execute(sql_text("configure").encode())
        # As the driver runs them: a raw cursor (PostgreSQL's $n placeholders), arrays in
        # binary.
        self.cursor = psycopg.RawCursor(self.conn)
        binary_lists(self.cursor)
        sql = SqlSet(schema)
        self.claim_next, self.complete = sql["claim_next"], sql["complete"]
        self.claim_params = {
            "owner": owner,
            "ttl": TTL,
            "queues": ["default"],
            "secret_hashes": [RAW_SECRET_HASH],
            "limit": 1,
            "max_generation": MAX_GENERATION,
            "now": None,
        }
        self.owner = owner

    def execute(self, statement: Statement, params: dict[str, Any]) -> psycopg.RawCursor[Any]:
        return self.cursor.execute(statement.text, statement.args(params))

    def step(self, limit: int) -> int:
        execute = self.execute
        claim_next, complete, claim_params = self.claim_next, self.complete, self.claim_params
        done = 0
        while done < limit:
            rows = execute(claim_next, claim_params).fetchall()
            if not rows:
                break
            row = rows[0]
            execute(
                complete,
                {
                    "job_id": row[1],
                    "owner": self.owner,
                    "generation": row[5],
                    "secret_hash": RAW_SECRET_HASH,
                    "receipt": RAW_RECEIPT,
                    "result": None,
                    "now": None,
                },
            ).fetchall()
            done += 1
        return done

    def close(self) -> None:
        self.conn.close()


class TenureClaims:
    """Claims alone: one at a time (batch 1) or ``claim_many`` batches."""

    def __init__(self, url: str, owner: str, batch: int) -> None:
        self.store = tenure.connect(url)
        self.owner = owner
        self.batch = batch

    def step(self, limit: int) -> int:
        done = 0
        while done < limit:
            if self.batch == 1:
                got = 1 if self.store.claim_next(self.owner, TTL) is not None else 0
            else:
                got = len(self.store.claim_many(self.owner, TTL, min(self.batch, limit - done)))
            done += got
            if not got:
                break
        return done

    def close(self) -> None:
        self.store.close()


class TenureBatchCycles(TenureClaims):
    """The full cycle with batch claims: claim_many, then complete each lease."""

    def step(self, limit: int) -> int:
        done = 0
        while done < limit:
            leases = self.store.claim_many(self.owner, TTL, min(self.batch, limit - done))
            for lease in leases:
                self.store.complete(lease)
            done += len(leases)
            if not leases:
                break
        return done


class TenureBatchManyCycles(TenureClaims):
    """The full cycle in batches both ways: claim_many, then complete_many of its leases."""

    def step(self, limit: int) -> int:
        done = 0
        while done < limit:
            leases = self.store.claim_many(self.owner, TTL, min(self.batch, limit - done))
            if not leases:
                break
            lost = self.store.complete_many(leases)
            assert not lost, lost
            done += len(leases)
        return done


class RawBatchCycles(RawCycles):
    """claim_next.sql with a limit, then complete_many.sql, on one plain connection."""

    def __init__(self, base: str, schema: str, owner: str, batch: int) -> None:
        super().__init__(base, schema, owner)
        self.complete_many = SqlSet(schema)["complete_many"]
        self.batch = batch

    def step(self, limit: int) -> int:
        execute, owner = self.execute, self.owner
        done = 0
        while done < limit:
            wanted = min(self.batch, limit - done)
            rows = execute(
                self.claim_next,
                {
                    **self.claim_params,
                    "secret_hashes": [RAW_SECRET_HASH] * wanted,
                    "limit": wanted,
                },
            ).fetchall()
            if not rows:
                break
            execute(
                self.complete_many,
                {
                    "job_ids": [row[1] for row in rows],
                    "owners": [owner] * len(rows),
                    "generations": [row[5] for row in rows],
                    "held_hashes": [RAW_SECRET_HASH] * len(rows),
                    "receipts": [RAW_RECEIPT] * len(rows),
                    "results": [None] * len(rows),
                    "now": None,
                },
            ).fetchall()
            done += len(rows)
        return done


SIDES = {
    "tenure": lambda base, schema, owner, batch: TenureCycles(schema_url(base, schema), owner),
    "raw psycopg": lambda base, schema, owner, batch: RawCycles(base, schema, owner),
    "claim_next": lambda base, schema, owner, batch: TenureClaims(
        schema_url(base, schema), owner, 1
    ),
    "claim_many": lambda base, schema, owner, batch: TenureClaims(
        schema_url(base, schema), owner, batch
    ),
    "cycle, single": lambda base, schema, owner, batch: TenureCycles(
        schema_url(base, schema), owner
    ),
    "cycle, batch": lambda base, schema, owner, batch: TenureBatchCycles(
        schema_url(base, schema), owner, batch
    ),
    "batch + many": lambda base, schema, owner, batch: TenureBatchManyCycles(
        schema_url(base, schema), owner, batch
    ),
    "raw batch": lambda base, schema, owner, batch: RawBatchCycles(base, schema, owner, batch),
}
COMPLETES = {"claim_next": False, "claim_many": False}


def open_runner(index: int, side: str, base: str, schemas: dict[str, str], batch: int) -> Any:
    """Runs in each child process (module level, so that it can be pickled)."""
    return SIDES[side](base, schemas[side], f"{OWNER}-{index}-{os.getpid()}", batch)


def run_processes(
    base: str, sides: list[str], workers: int, jobs: int, chunk: int, repeat: int, batch: int
) -> list[Result]:
    results = [Result(side) for side in sides]
    for rep in range(repeat + 1):  # the first is a warm-up
        schemas = {side: fresh_schema(base, jobs * workers) for side in sides}
        totals = contend_chunks(
            open_runner, workers, sides, jobs * workers, chunk, base, schemas, batch
        )
        for result, side, (done, seconds) in zip(results, sides, totals, strict=True):
            verify(base, schemas[side], done, completed=COMPLETES.get(side, True))
            if rep:
                result.rates.append(done / seconds)
    return results


def run_one_process(
    base: str, sides: list[str], jobs: int, chunk: int, repeat: int
) -> list[Result]:
    def side(name: str) -> Side:
        def open_side() -> tuple[Any, Callable[[int], None]]:
            schema = fresh_schema(base, jobs)
            runner = SIDES[name](base, schema, OWNER, 1)
            return runner, lambda done: verify(base, schema, done)

        return Side(name, open_side)

    return interleave_chunks([side(name) for name in sides], repeat, chunk=chunk)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TENURE_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--jobs", type=int, default=300, help="jobs per worker per repetition")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--chunk", type=int, default=50, help="cycles per turn")
    args = parser.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    print(f"PostgreSQL claim -> complete cycles; {machine_line()}")
    with psycopg.connect(args.url) as conn:
        print(f"server: {conn.execute('SELECT version()').fetchone()[0]}")  # type: ignore[index]
    print(f"command: python benchmarks/postgres_cycle.py {' '.join(argv)}".rstrip())
    for count in workers:
        if count == 1:
            results = run_one_process(
                args.url, ["tenure", "raw psycopg"], args.jobs, args.chunk, args.repeat
            )
        else:
            results = run_processes(
                args.url,
                ["tenure", "raw psycopg"],
                count,
                args.jobs,
                args.chunk,
                args.repeat,
                args.batch,
            )
        print_report(f"{count} worker(s): cycles/s", results, "raw psycopg", unit="cycles/s")
    top = max(workers)
    results = run_processes(
        args.url,
        ["claim_next", "claim_many"],
        top,
        args.jobs,
        args.chunk * 2,
        args.repeat,
        args.batch,
    )
    print_report(
        f"{top} workers: claims/s, one at a time vs claim_many(batch={args.batch})",
        results,
        "claim_next",
        unit="claims/s",
    )
    results = run_processes(
        args.url,
        ["cycle, single", "cycle, batch", "batch + many", "raw batch"],
        top,
        args.jobs,
        args.chunk * 2,
        args.repeat,
        args.batch,
    )
    print_report(
        f"{top} workers: cycles/s; claim_next + complete (cycle, single), claim_many("
        f"{args.batch}) + complete each (cycle, batch) or + complete_many (batch + many)",
        results,
        "cycle, single",
        unit="cycles/s",
    )
    print_report(
        f"{top} workers: the same runs, against raw batch",
        [r for r in results if r.name in ("batch + many", "raw batch")],
        "raw batch",
        unit="cycles/s",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
