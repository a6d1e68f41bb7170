"""Claims on PostgreSQL when the planner's statistics say a table is empty while it is not:
the hand loop (``claim_jobs(10)`` once, then ``complete_and_claim_jobs`` batches of 10) in
one process, jobs/s, in four cases, each in a fresh store:

* **new store**: the first N jobs of a store never analyzed (the reference);
* **history vacuumed empty**, **history analyzed empty**, **jobs analyzed empty**: N jobs
  run and purged, then ``VACUUM tenure_attempts``, ``ANALYZE tenure_attempts`` or
  ``ANALYZE tenure_jobs`` while that table is empty (what autovacuum does after a purge
  that emptied it), then N more jobs submitted and run, timed.

    python benchmarks/postgres_stale_stats.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--jobs 10000] [--repeat 2]

tenure's connections keep one generic plan per statement for the session
(sql/configure.sql); a plan made while the statistics said "empty" priced a read of the
whole table at nothing and kept reading it at every statement until the next analyze. It
prints each case's median jobs/s and its ratio to the new store's, in the same run; 1.0 is
the goal. The cases run in a database of their own (created and dropped here) with
autovacuum off for tenure's tables, so that no analyze mends the statistics mid-run. Run
it on two trees (``PYTHONPATH=<tree>/src``) to compare them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
from _common import machine_line
from client_cpu import QUEUE, sync_loop
from postgres_compare import recreate_database

import tenure

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DATABASE = "tenure_bench_stale_stats"
BATCH = 10

# case -> what runs on the emptied store before the timed jobs (None: the new store)
CASES: dict[str, str | None] = {
    "new store": None,
    "history vacuumed empty": "VACUUM tenure_attempts",
    "history analyzed empty": "ANALYZE tenure_attempts",
    "jobs analyzed empty": "ANALYZE tenure_jobs",
}


def submit(store: tenure.Store, prefix: str, jobs: int) -> None:
    for start in range(0, jobs, 1000):
        store.submit_many(
            [
                {"job_id": f"{prefix}-{n}", "queue": QUEUE}
                for n in range(start, min(jobs, start + 1000))
            ]
        )


def drain(url: str) -> tuple[int, float]:
    """The hand loop (client_cpu.py's), on connections it opens: their plans are made now."""
    started = time.perf_counter()
    done = sync_loop(url, BATCH)
    return done, time.perf_counter() - started


def one_case(base: str, prepare: str | None, jobs: int) -> float:
    url = recreate_database(base, DATABASE)
    with tenure.connect(url) as store:
        pass  # installs the schema
    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("tenure_jobs", "tenure_attempts"):
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    if prepare is not None:
        with tenure.connect(url) as store:
            submit(store, "before", jobs)
        drain(url)
        with tenure.connect(url) as store:
            store.purge(states=("done",), older_than=0)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(prepare)
    with tenure.connect(url) as store:
        submit(store, "timed", jobs)
    done, seconds = drain(url)
    assert done == jobs, (done, jobs)
    return done / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="a database to create others from")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    rates: dict[str, list[float]] = {case: [] for case in CASES}
    try:
        for _ in range(args.repeat):
            for case, prepare in CASES.items():  # the cases take turns
                rates[case].append(one_case(args.url, prepare, args.jobs))
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')

    print(f"# {machine_line()}; {args.jobs} jobs, batches of {BATCH}, medians of {args.repeat}")
    reference = statistics.median(rates["new store"])
    for case, values in rates.items():
        median = statistics.median(values)
        print(
            f"{case:<24} {median:8.0f} jobs/s  {median / reference:5.2f}x the new store  "
            f"[{', '.join(f'{v:.0f}' for v in values)}]"
        )


if __name__ == "__main__":
    main()
