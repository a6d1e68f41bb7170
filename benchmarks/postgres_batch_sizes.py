"""Batches of 10, 100 and 1,000 on PostgreSQL: what an item costs at each size, for tenure,
for a raw psycopg loop running tenure's own statements, and for pgqueuer's batch calls, in
the same run.

    python benchmarks/postgres_batch_sizes.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--sizes 10,100,1000] [--items 3000] [--repeat 3]

Per size, each side drains ``--items`` ready jobs (filled untimed) in rounds of three
calls, each over one batch of that size:

* **tenure**: ``store.claim_many(owner, ttl, size)``, ``store.renew_many(leases)``,
  ``store.complete_many(leases)``: the public sync API;
* **raw psycopg**: the same three statements (``claim_next.sql`` with the limit,
  ``renew_many.sql``, ``complete_many.sql``) on one plain connection, with tenure's session
  settings, a fixed secret hash, reading only what the next call needs;
* **pgqueuer** (1.6, its own database): ``Queries.dequeue(batch_size=size)``,
  ``Queries.update_heartbeat(ids)``, ``Queries.log_jobs(...)`` ("successful"): its claim,
  heartbeat and completion of a batch.

The sides alternate (ABC, CBA, ...). The script prints items/s per size with ratios to the
raw loop, then each side's cost per item at each size relative to its cost at the smallest:
a statement whose plan reads the batch once per item shows there as a ratio growing with
the size (tenure's batch statements did so before migration 0015: 10-20x at 1,000). After
each run it checks that every job was claimed once and completed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

import psycopg
from _common import Case, Result, interleave, machine_line, print_report
from postgres_compare import pgqueuer_setup, recreate_database
from postgres_cycle import (
    DEFAULT_URL,
    OWNER,
    RAW_RECEIPT,
    RAW_SECRET_HASH,
    TTL,
    RawCycles,
    fresh_schema,
    schema_url,
    verify,
)

import tenure
from tenure.stores.postgres._common import SqlSet

# A side's drain of a schema (timed; returns how many jobs it ran), and its close.
Loop = tuple[Callable[[], int], Callable[[], None]]


def drained(name: str, base: str, items: int, open_loop: Callable[[str], Loop]) -> Case:
    """A side on a fresh schema of ``items`` ready jobs: ``open_loop(schema)`` (untimed)
    returns the loop that drains it (timed; it returns how many jobs it ran) and a close."""

    def run() -> tuple[int, float]:
        schema = fresh_schema(base, items)
        loop, close = open_loop(schema)
        start = time.perf_counter()
        done = loop()
        seconds = time.perf_counter() - start
        close()
        verify(base, schema, items)
        return done, seconds

    return Case(name, run)


def tenure_loop(base: str, size: int) -> Callable[[str], Loop]:
    def open_loop(schema: str) -> Loop:
        store = tenure.connect(schema_url(base, schema))

        def loop() -> int:
            done = 0
            while leases := store.claim_many(OWNER, TTL, size):
                renewed = store.renew_many(leases)
                assert all(isinstance(lease, tenure.Lease) for lease in renewed)
                assert not store.complete_many(leases)
                done += len(leases)
            return done

        return loop, store.close

    return open_loop


def raw_loop(base: str, size: int) -> Callable[[str], Loop]:
    def open_loop(schema: str) -> Loop:
        raw = RawCycles(base, schema, OWNER)  # tenure's session settings, a raw cursor
        sql = SqlSet(schema)
        renew, complete = sql["renew_many"], sql["complete_many"]
        claim_params = {**raw.claim_params, "secret_hashes": [RAW_SECRET_HASH] * size}
        claim_params["limit"] = size

        def loop() -> int:
            done = 0
            while rows := raw.execute(raw.claim_next, claim_params).fetchall():
                count = len(rows)
                held = {
                    "job_ids": [row[1] for row in rows],
                    "owners": [OWNER] * count,
                    "generations": [row[5] for row in rows],
                    "held_hashes": [RAW_SECRET_HASH] * count,
                    "now": None,
                }
                raw.execute(renew, {**held, "ttls": [TTL] * count}).fetchall()
                completions = {**held, "receipts": [RAW_RECEIPT] * count}
                raw.execute(complete, {**completions, "results": [None] * count}).fetchall()
                done += count
            return done

        return loop, raw.close

    return open_loop


def pgqueuer_case(url: str, size: int, items: int) -> Case:
    from pgqueuer import PsycopgDriver, Queries
    from pgqueuer.ports.repository import EntrypointExecutionParameter

    async def drain() -> tuple[int, float]:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        await conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
        queries = Queries(PsycopgDriver(conn))
        await queries.enqueue(["noop"] * items, [None] * items, [0] * items)
        await conn.execute("VACUUM ANALYZE pgqueuer")
        entrypoints = {"noop": EntrypointExecutionParameter(concurrency_limit=0)}
        manager = uuid.uuid4()
        done = 0
        start = time.perf_counter()
        while jobs := await queries.dequeue(
            batch_size=size,
            entrypoints=entrypoints,  # type: ignore[arg-type]
            queue_manager_id=manager,  # type: ignore[arg-type]
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=TTL),
        ):
            await queries.update_heartbeat([job.id for job in jobs])
            await queries.log_jobs([(job, "successful", None) for job in jobs])
            done += len(jobs)
        seconds = time.perf_counter() - start
        left = await (await conn.execute("SELECT count(*) FROM pgqueuer")).fetchone()
        logged = await (
            await conn.execute(
                "SELECT count(DISTINCT job_id) FROM pgqueuer_log WHERE status = 'successful'"
            )
        ).fetchone()
        await conn.close()
        assert left == (0,), left
        assert logged == (items,), (logged, items)
        return done, seconds

    return Case("pgqueuer", lambda: asyncio.run(drain()))


def pgqueuer_database(base: str) -> str:
    """A fresh database with pgqueuer's tables (postgres_compare.py's own setup)."""
    url = recreate_database(base, "bench_batch_pgqueuer")
    pgqueuer_setup(url)
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(machine_line())
    print(f"{args.items} jobs per run, claim_many + renew_many + complete_many per batch")
    pgqueuer_url = pgqueuer_database(args.url)
    by_size: dict[int, list[Result]] = {}
    try:
        for size in sizes:
            cases = [
                drained("raw psycopg", args.url, args.items, raw_loop(args.url, size)),
                drained("tenure", args.url, args.items, tenure_loop(args.url, size)),
                pgqueuer_case(pgqueuer_url, size, args.items),
            ]
            by_size[size] = interleave(cases, args.repeat)
            print_report(f"batches of {size}", by_size[size], "raw psycopg", unit="items/s")
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute('DROP DATABASE IF EXISTS "bench_batch_pgqueuer" WITH (FORCE)')
    smallest = sizes[0]
    print(f"\ncost per item, relative to batches of {smallest} (median rates)")
    print(f"  {'':<14}" + "".join(f"{size:>10}" for size in sizes))
    for index, result in enumerate(by_size[smallest]):
        base = statistics.median(result.rates)
        cells = [base / statistics.median(by_size[size][index].rates) for size in sizes]
        print(f"  {result.name:<14}" + "".join(f"{cell:>9.2f}x" for cell in cells))


if __name__ == "__main__":
    main()
