"""What `tenure_jobs`' triggers cost the PostgreSQL server per operation: the schema as
migrated (migration 0012: one trigger per UPDATE statement, over transition tables, writes
the attempt history and notifies a finished job's waiters) against the same schema with
the two row triggers it replaced (migrations 0003 and 0004: one call per row), in the
same run.

    python benchmarks/postgres_triggers.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--jobs 2000] [--rounds 8] [--ops chained,single,renew]

Two databases, ``bench_triggers_stmt`` and ``bench_triggers_row``, made afresh and
dropped at the end. Each round refills both with ``--jobs`` ready jobs (untimed) and runs
each operation on one, then on the other (the order alternating by round), in one
process:

* chained: ``claim_many(10)`` then ``complete_and_claim`` of each batch, as
  ``tenure.Worker`` does;
* single: ``claim_next`` then ``complete``, one job at a time;
* renew: ten leases held, each renewed ``--jobs / 10`` times.

It reads the server's CPU for the run (user + system, from ``/proc`` of the backends of
the store's connections, so the server must run on this machine) and prints the median
per operation of each side and the median of the paired ratios, row triggers / statement
trigger: above 1 means the statement trigger costs the server less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from urllib.parse import urlsplit

import psycopg
from _common import machine_line
from postgres_compare import recreate_database

import tenure
from tenure._resources import migrations
from tenure.stores.postgres._common import render

# The two row triggers of schema version 11, as migrations 0003 and 0004 made them: their
# CREATE FUNCTION ... CREATE TRIGGER, taken from those files (package data).
ROW_TRIGGERS = (
    ("0003", "tenure_notify_ended"),
    ("0004", "tenure_record_attempt"),
)


def row_triggers() -> str:
    """The DDL that puts the row triggers back in place of migration 0012's trigger."""
    texts = {name[:4]: text for _, name, text in migrations("tenure.stores.postgres")}
    parts = ["DROP TRIGGER tenure_jobs_updated ON {schema}.tenure_jobs;"]
    for version, function in ROW_TRIGGERS:
        text = texts[version]
        start = text.index(f"CREATE FUNCTION {{schema}}.{function}()")
        end_marker = f"EXECUTE FUNCTION {{schema}}.{function}();"
        parts.append(text[start : text.index(end_marker) + len(end_marker)])
    return render("\n".join(parts), "public")


FILL = (
    "INSERT INTO tenure_jobs (job_id, queue, state, available_at, max_attempts, created_at,"
    " updated_at) SELECT 'job-' || g, 'default', 'ready', 1000 + g, 5, 1000, 1000"
    " FROM generate_series(1, %s) g"
)
TTL = 60.0
TICK = os.sysconf("SC_CLK_TCK")


def recreate(base: str, name: str, ddl: str | None) -> str:
    url = recreate_database(base, name)
    tenure.connect(url).close()  # migrates
    if ddl is not None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ddl.encode())
    return url


def server_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def run(url: str, op: str, jobs: int) -> float:
    """Server CPU per operation (µs) of one run of ``op`` on a refilled database."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE tenure_jobs, tenure_attempts")
        conn.execute(FILL.encode(), (jobs,))
        conn.execute("VACUUM ANALYZE tenure_jobs")
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as monitor, tenure.connect(url) as store:
        leases = store.claim_many("bench", TTL, 10)  # opens the store's connection
        if op == "single":
            store.complete_many(leases)
        pids = [
            int(row[0])
            for row in monitor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        ]
        before = server_cpu(pids)
        done = 0
        if op == "chained":
            while leases:
                done += len(leases)
                lost, leases = store.complete_and_claim(leases, "bench", TTL, 10)
                assert not lost, lost
        elif op == "single":
            while (lease := store.claim_next("bench", TTL)) is not None:
                store.complete(lease)
                done += 1
        else:
            for _ in range(jobs // 10):
                leases = [store.renew(lease) for lease in leases]
                done += len(leases)
        spent = server_cpu(pids) - before
    return 1e6 * spent / done


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--ops", default="chained,single,renew")
    args = parser.parse_args(argv)
    print(f"tenure_jobs' triggers, server CPU per operation; {machine_line()}")
    print(f"command: python benchmarks/postgres_triggers.py {' '.join(argv)}".rstrip())
    sides = {
        "statement": recreate(args.url, "bench_triggers_stmt", None),
        "row": recreate(args.url, "bench_triggers_row", row_triggers()),
    }
    try:
        for op in args.ops.split(","):
            costs: dict[str, list[float]] = {"statement": [], "row": []}
            ratios = []
            for round_ in range(args.rounds):
                order = ("statement", "row") if round_ % 2 == 0 else ("row", "statement")
                now = {side: run(sides[side], op, args.jobs) for side in order}
                for side, cost in now.items():
                    costs[side].append(cost)
                ratios.append(now["row"] / now["statement"])
            print(
                f"  {op:8} statement trigger {statistics.median(costs['statement']):6.0f} us,"
                f" row triggers {statistics.median(costs['row']):6.0f} us;"
                f" row / statement, paired median {statistics.median(ratios):.2f}"
                f" [{min(ratios):.2f}-{max(ratios):.2f}]"
            )
    finally:
        time.sleep(0.1)  # the stores' backends leave before the drop
        with psycopg.connect(args.url, autocommit=True) as conn:
            for name in ("bench_triggers_stmt", "bench_triggers_row"):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
