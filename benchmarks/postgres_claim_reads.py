"""What a claim reads on PostgreSQL, by the number of worker processes: index entries and
table rows per job, for each index of tenure_jobs, while N processes drain the queue with
the hand loop (``claim_many(10)`` once, then ``complete_and_claim`` batches of 10).

    python benchmarks/postgres_claim_reads.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--jobs 4000] [--workers 1,4,16] [--repeat 2]

Not a speed benchmark: it counts work, which does not move with the machine's noise, from
PostgreSQL's own statistics (pg_stat_user_indexes: idx_tup_read, the index entries a scan
returned, and idx_tup_fetch, the table rows it then read), taken before the drain and once
every worker's connection has closed (a backend flushes its counts when it exits). Each
process count runs in a database of its own, created and dropped here. It prints the
counts per job, and each process count's against one process's: what contention adds.
The expired-lease path (tenure_jobs_leased) should read nothing while no lease has run
out (migration 0013); the ready path (tenure_jobs_queued) reads, besides the jobs it
takes, the entries at its queue's head that other claims hold locked or have just taken.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

import psycopg
from _common import machine_line
from postgres_compare import recreate_database

import tenure

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TTL = 60.0  # no lease runs out during a drain
BATCH = 10
DATABASE = "tenure_bench_claim_reads"


def _drain(args: tuple[str, int]) -> int:
    url, index = args
    owner = f"worker-{index}"
    with tenure.connect(url) as store:
        done = 0
        leases = store.claim_many(owner, TTL, BATCH)
        while leases:
            done += len(leases)
            lost, leases = store.complete_and_claim(leases, owner, TTL, BATCH)
            assert not lost, lost
    return done


def _counts(conn: psycopg.Connection) -> dict[str, tuple[int, int, int]]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = conn.execute(
        "SELECT indexrelname, idx_scan, idx_tup_read, idx_tup_fetch FROM pg_stat_user_indexes"
        " WHERE relname = 'tenure_jobs'"
    ).fetchall()
    return {name: (scans, read, fetched) for name, scans, read, fetched in rows}


def _backends(conn: psycopg.Connection, database: str) -> int:
    found = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        (database,),
    ).fetchone()
    return int(found[0]) if found else 0


def _one_run(base: str, jobs: int, workers: int) -> dict[str, tuple[float, float]]:
    """Index entries and table rows read per job, by index, for one drain."""
    url = recreate_database(base, DATABASE)
    try:
        with tenure.connect(url) as store:
            for start in range(0, jobs, 1000):
                store.submit_many(
                    [
                        tenure.JobSpec(job_id=f"job-{n}", payload=None)
                        for n in range(start, min(start + 1000, jobs))
                    ]
                )
        with psycopg.connect(url, autocommit=True) as conn:
            while _backends(conn, DATABASE):  # the submit's connections flushed their counts
                time.sleep(0.05)
            before = _counts(conn)
            with multiprocessing.get_context("spawn").Pool(workers) as pool:
                done = sum(pool.map(_drain, [(url, i) for i in range(workers)]))
            assert done == jobs, (done, jobs)
            deadline = time.monotonic() + 10
            while _backends(conn, DATABASE) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
            after = _counts(conn)
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    per_job = {}
    for name, (_, read, fetched) in after.items():
        _, read0, fetched0 = before.get(name, (0, 0, 0))
        per_job[name] = ((read - read0) / jobs, (fetched - fetched0) / jobs)
    return per_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TENURE_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--repeat", type=int, default=2)
    options = parser.parse_args()
    counts = [int(n) for n in options.workers.split(",")]
    print(f"PostgreSQL claim reads, hand loop, batches of {BATCH}; {machine_line()}")
    print(
        f"{options.jobs:,} jobs; index entries read per job (table rows read), median of "
        f"{options.repeat}"
    )
    first: dict[str, float] = {}
    for workers in counts:
        runs = [_one_run(options.url, options.jobs, workers) for _ in range(options.repeat)]
        print(f"  {workers} process(es)")
        for name in sorted(runs[0]):
            read = statistics.median(run[name][0] for run in runs)
            fetched = statistics.median(run[name][1] for run in runs)
            if workers == counts[0]:
                first[name] = read
            against = ""
            if workers != counts[0] and first.get(name):
                against = f"   {read / first[name]:.1f}x with {counts[0]}"
            print(f"    {name:<22} {read:7.1f} ({fetched:.1f}){against}")


if __name__ == "__main__":
    main()
