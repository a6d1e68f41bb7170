"""How many claims are HOT updates on PostgreSQL along the Worker's own path
(``complete_and_claim`` batches), by batch size, priorities and fillfactor.

    python benchmarks/postgres_hot_claims.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--jobs 3000] [--claims 1000] [--batches 1,10] [--priorities 1,5] [--fillfactors 85]

For each combination: a fresh schema (the importable tenure's layout; run with
``PYTHONPATH=<tree>/src`` to measure another tree), its ``tenure_jobs`` set to the
fillfactor (before any job is written) with autovacuum off, ``--jobs`` jobs submitted with
``submit_many`` (``--priorities`` levels in turn; 1: all at 0, strict FIFO), then one
worker claims a batch and, until ``--claims`` jobs were claimed, completes each batch and
claims the next in one ``complete_and_claim`` statement, as tenure.Worker does. The share of
the claims that were HOT is read from pg_stat_user_tables once the store closed: a complete
sets finished_at, which the purge index holds, so no complete is HOT and every HOT update is
a claim. Whether a claim can be HOT depends on its layout (no index may hold a column it
writes) and on room on the row's page: the claimed version is larger than the ready one (an
owner, a secret hash, a lease end).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

import psycopg
from _common import machine_line, table_updates

import tenure
from tenure.stores.postgres._common import render

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def measure(
    base: str, jobs: int, claims: int, batch: int, priorities: int, fillfactor: int
) -> tuple[int, int]:
    """(claims, HOT updates) of one run."""
    schema = f"hot_{uuid.uuid4().hex[:10]}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(base, autocommit=True) as admin:
        try:
            tenure.connect(url).close()
            admin.execute(
                render(
                    "ALTER TABLE {schema}.tenure_jobs SET (fillfactor = "
                    + str(fillfactor)
                    + ", autovacuum_enabled = off)",
                    schema,
                ).encode()
            )
            with tenure.connect(url) as store:
                for start in range(0, jobs, 1000):
                    store.submit_many(
                        [
                            {"job_id": f"j{i}", "priority": i % priorities, "payload": {"n": i}}
                            for i in range(start, min(jobs, start + 1000))
                        ]
                    )
            before = table_updates(admin, schema, "tenure_jobs")
            claimed = 0
            with tenure.connect(url) as store:
                leases = store.claim_many("bench", 60, batch)
                while True:
                    claimed += len(leases)
                    if claimed >= claims:
                        break
                    lost, leases = store.complete_and_claim(leases, "bench", 60, batch)
                    assert not lost
                    assert leases
                done = len(store.complete_many(leases))
                assert done == 0  # no lease lost
            expected = before[0] + 2 * claimed
            deadline = time.monotonic() + 15
            while (after := table_updates(admin, schema, "tenure_jobs"))[0] < expected:
                assert time.monotonic() < deadline, (before, after, expected)
                time.sleep(0.1)  # the backends report their counts when they exit
            return claimed, after[1] - before[1]
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TENURE_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--batches", default="1,10")
    parser.add_argument("--priorities", default="1,5")
    parser.add_argument("--fillfactors", default="85")
    args = parser.parse_args(argv)
    print(f"PostgreSQL HOT claims along complete_and_claim; {machine_line()}")
    print(f"command: python benchmarks/postgres_hot_claims.py {' '.join(argv)}".rstrip())
    print(f"  tenure from {os.path.dirname(tenure.__file__)}")
    for fillfactor in (int(f) for f in args.fillfactors.split(",")):
        for priorities in (int(p) for p in args.priorities.split(",")):
            for batch in (int(b) for b in args.batches.split(",")):
                claimed, hot = measure(
                    args.url, args.jobs, args.claims, batch, priorities, fillfactor
                )
                print(
                    f"  fillfactor {fillfactor:3}, {priorities} priorities, batch {batch:3}: "
                    f"{hot} of {claimed} claims HOT ({hot / claimed:.0%})"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
