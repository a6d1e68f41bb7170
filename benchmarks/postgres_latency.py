"""Claim latency on PostgreSQL with 10,000 and 1,000,000 jobs queued: is it flat?

    python benchmarks/postgres_latency.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--sizes 10000,1000000] [--claims 3000] [--chunk 100] [--priorities 5] [--held 0]

One schema per size is filled untimed (one INSERT ... SELECT with triggers off, then VACUUM
ANALYZE), the jobs spread over ``--priorities`` priority levels in turn (job g has priority
g mod P - P // 2; 1: every job at priority 0), so the pick walks a ready index of mixed
priorities (issue #18). Then one worker (this process) times
``store.claim_next(owner, ttl)`` (the public sync API, one statement) for ``--claims``
claims per size, completing each job untimed, in turns of ``--chunk`` claims alternating
between the sizes (A B, B A, ...) so that machine noise hits both alike. It prints
p50/p90/p99/max per size and p99(largest)/p99(smallest): the target is at most 1.5 (the
pick walks the partial index from its start, whatever the backlog behind it). Every
claimed job must be a distinct job at generation 1, and (sampled) of a priority no higher
than the one before it.

``--held 0,1000``: phases, one per number of leases held. Before a phase's claims, another
owner claims (untimed, ttl one hour) and keeps as many leases as it says, so that the claims
run while that many live leases sit at the head of the claim order (they were the first
jobs); each phase reports its own percentiles, and the share of the phase's claim and
complete updates of tenure_jobs that were HOT (pg_stat_user_tables, read once the
connections closed; the completes cannot be HOT: they move the job into the purge index).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

import psycopg
from _common import machine_line, table_updates

import tenure
from tenure.stores.postgres._common import render

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def fill(base: str, jobs: int, priorities: int) -> str:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    tenure.connect(f"{base}{'&' if '?' in base else '?'}schema={schema}").close()
    insert_ready_jobs(base, schema, jobs, priorities)
    return schema


def insert_ready_jobs(base: str, schema: str, jobs: int, priorities: int) -> None:
    """``jobs`` ready jobs in ``schema``'s tenure_jobs in one statement (job g at priority
    g mod ``priorities`` - ``priorities`` // 2), then VACUUM ANALYZE."""
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # no NOTIFY trigger per row
        conn.execute(
            render(
                "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
                "max_attempts, payload, created_at, updated_at, priority) "
                "SELECT 'job-' || g, 'default', 'ready', 1000 + g, 5, '{\"n\": ' || g || '}', "
                "1000, 1000, g %% %s - %s FROM generate_series(1, %s) g",
                schema,
            ).encode(),
            (priorities, priorities // 2, jobs),
        )
        conn.execute(render("VACUUM ANALYZE {schema}.tenure_jobs", schema).encode())


def _updates(url: str, schema: str) -> tuple[int, int]:
    """tenure_jobs' updates and HOT updates so far (pg_stat_user_tables)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return table_updates(conn, schema, "tenure_jobs")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TENURE_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--claims", type=int, default=3000)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--priorities", type=int, default=5)
    parser.add_argument("--held", default="0")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    helds = [int(held) for held in args.held.split(",")]
    print(f"PostgreSQL claim latency by backlog, {args.priorities} priorities; {machine_line()}")
    print(f"command: python benchmarks/postgres_latency.py {' '.join(argv)}".rstrip())
    schemas = {}
    for size in sizes:
        started = time.perf_counter()
        schemas[size] = fill(args.url, size, args.priorities)
        print(f"  filled {size:,} jobs in {time.perf_counter() - started:.1f} s")

    def url_of(schema: str) -> str:
        return f"{args.url}{'&' if '?' in args.url else '?'}schema={schema}"

    stores = {size: tenure.connect(url_of(schema)) for size, schema in schemas.items()}
    seen: dict[int, set[str]] = {size: set() for size in sizes}
    for store in stores.values():  # warm up: connections, prepared statements
        for _ in range(20):
            lease = store.claim_next("warm-up", 60)
            assert lease is not None
            store.complete(lease)
    held: dict[int, list[tenure.Lease]] = {size: [] for size in sizes}
    results: list[tuple[int, int, list[float], tuple[int, int]]] = []
    for holding in helds:
        for size in sizes:
            wanted = holding - len(held[size])
            with tenure.connect(url_of(schemas[size])) as holder:
                while wanted > 0:  # untimed: leases another owner keeps through the phase
                    got = holder.claim_many("holder", 3600, min(wanted, 1000))
                    held[size].extend(got)
                    wanted -= len(got)
        # Every update so far reported: a backend reports its statistics when it exits.
        for size in sizes:
            stores[size].close()
        time.sleep(0.5)
        before = {size: _updates(args.url, schema) for size, schema in schemas.items()}
        for size in sizes:
            stores[size] = tenure.connect(url_of(schemas[size]))
            for _ in range(20):  # warm up again (counted in the phase's updates)
                lease = stores[size].claim_next("warm-up", 60)
                assert lease is not None
                stores[size].complete(lease)
        timings: dict[int, list[float]] = {size: [] for size in sizes}
        last = {size: (args.priorities - 1) - args.priorities // 2 for size in sizes}  # the top
        turn = 0
        clock = time.perf_counter
        while any(len(timings[size]) < args.claims for size in sizes):
            for size in sizes if turn % 2 == 0 else sizes[::-1]:
                store = stores[size]
                for _ in range(min(args.chunk, args.claims - len(timings[size]))):
                    start = clock()
                    lease = store.claim_next("bench", 60)
                    timings[size].append(clock() - start)
                    assert lease is not None
                    assert lease.generation == 1
                    assert lease.job_id not in seen[size]
                    seen[size].add(lease.job_id)
                    if len(seen[size]) % 100 == 1:  # untimed: never a higher priority than before
                        priority = store.get(lease.job_id).priority
                        assert priority <= last[size], (lease, priority, last[size])
                        last[size] = priority
                    store.complete(lease)
            turn += 1
        # The phase's updates, once its backends reported them (on exit).
        for size in sizes:
            stores[size].close()
        time.sleep(0.5)
        for size, schema in schemas.items():
            after = _updates(args.url, schema)
            hot = (after[0] - before[size][0], after[1] - before[size][1])
            results.append((holding, size, timings[size], hot))
    for store in stores.values():
        store.close()
    with psycopg.connect(args.url, autocommit=True) as conn:
        for schema in schemas.values():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    print(f"\n  claim_next latency, {args.claims:,} claims per backlog and phase (ms)")
    print(
        f"  {'held':>6}{'queued':>10}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}{'mean':>9}"
        f"{'claims/s':>10}  HOT updates (claims + completes; no complete can be)"
    )
    for holding, size, timing, (updates, hot) in results:
        ms = [t * 1000 for t in timing]
        print(
            f"  {holding:>6,}{size:>10,}{percentile(ms, 0.5):>9.3f}{percentile(ms, 0.9):>9.3f}"
            f"{percentile(ms, 0.99):>9.3f}{max(ms):>9.3f}{statistics.fmean(ms):>9.3f}"
            f"{1000 / statistics.fmean(ms):>10.0f}  {hot} of {updates}"
        )
    small, large = min(sizes), max(sizes)
    by = {(holding, size): timing for holding, size, timing, _ in results}
    print()
    for holding in helds:
        ratio = percentile(by[holding, large], 0.99) / percentile(by[holding, small], 0.99)
        p50 = percentile(by[holding, large], 0.5) / percentile(by[holding, small], 0.5)
        print(
            f"  {holding:,} held: p99 at {large:,} / p99 at {small:,}: {ratio:.2f}"
            f" (target <= 1.5); p50: {p50:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
