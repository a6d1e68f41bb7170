"""What the attempt history costs a claim_next -> complete cycle on SQLite and PostgreSQL:
the same tenure code on two stores open at once, one as migrated (its triggers write the
history) and one with the history's triggers dropped (what every cycle cost before
migration 0004), taking turns in the same run.

    python benchmarks/attempts_cost.py [--store sqlite,postgres] [--jobs 600] [--repeat 5]
        [--chunk 50] [--url postgresql://postgres@127.0.0.1:5432/postgres] [--dir DIR]

Each repetition gives each side a fresh store holding ``--jobs`` ready jobs (submitted
untimed with ``submit_many``), drained by the public sync API (``claim_next`` then
``complete``) in turns of ``--chunk`` cycles (A B, B A, ...: benchmarks/_common.py), so a
noise burst on the machine hits both alike. Prints median cycles/s and the paired ratio
history/none per store. After every repetition it checks that every job is done and that
the history side recorded one completed attempt per job (and the other none). Redis has no
triggers to drop: its history is in the Lua scripts, measured by running
benchmarks/redis_cycle.py on the code before and after (docs/benchmarks.md). Exits 0.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
from _common import Cycles, Side, interleave_chunks, machine_line, print_report

import tenure

OWNER = "bench-worker"
SQLITE_TRIGGERS = ("tenure_attempt_ended",)


def _fill(store: tenure.Store, jobs: int) -> None:
    for start in range(0, jobs, 500):
        batch = range(start, min(jobs, start + 500))
        store.submit_many([{"job_id": f"j{i:06d}"} for i in batch])


def _check(url: str, jobs: int, done: int, history: bool) -> None:
    with tenure.connect(url) as store:
        assert done == jobs, (done, jobs)
        assert all(job.state == "done" for job in store.jobs(limit=1000))
        attempts = store.attempts("j000000")
        assert [a.ending for a in attempts] == (["completed"] if history else []), attempts


def sqlite_side(name: str, directory: Path, jobs: int, history: bool) -> Side:
    def open_side() -> tuple[Cycles, Callable[[int], None]]:
        path = directory / f"{name}-{uuid.uuid4().hex[:8]}.db"
        url = f"sqlite:///{path}"
        with tenure.connect(url) as store:
            _fill(store, jobs)
        if not history:
            with sqlite3.connect(path) as conn:
                for trigger in SQLITE_TRIGGERS:
                    conn.execute(f"DROP TRIGGER {trigger}")

        def verify(done: int) -> None:
            _check(url, jobs, done, history)
            path.unlink()

        return Cycles(tenure.connect(url), OWNER), verify

    return Side(name, open_side)


def postgres_side(name: str, base: str, jobs: int, history: bool) -> Side:
    def open_side() -> tuple[Cycles, Callable[[int], None]]:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
        with tenure.connect(url) as store:
            _fill(store, jobs)
        with psycopg.connect(base, autocommit=True) as conn:
            if not history:
                # The trigger that writes the history also notifies a finished job's waiters
                # (none here): without it, neither.
                conn.execute(f"DROP TRIGGER tenure_jobs_updated ON {schema}.tenure_jobs")
            conn.execute(f"VACUUM ANALYZE {schema}.tenure_jobs")

        def verify(done: int) -> None:
            _check(url, jobs, done, history)
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")

        return Cycles(tenure.connect(url), OWNER), verify

    return Side(name, open_side)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sqlite,postgres")
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    print(f"attempt history cost, claim_next + complete cycles; {machine_line()}")
    directory = Path(args.dir or tempfile.mkdtemp(prefix="tenure-attempts-"))
    try:
        for store in args.store.split(","):
            if store == "sqlite":
                sides = [
                    sqlite_side("no history", directory, args.jobs, False),
                    sqlite_side("history", directory, args.jobs, True),
                ]
            else:
                sides = [
                    postgres_side("no history", args.url, args.jobs, False),
                    postgres_side("history", args.url, args.jobs, True),
                ]
            results = interleave_chunks(sides, args.repeat, chunk=args.chunk)
            print_report(f"{store}: cycles/s", results, "no history", unit="cycles/s")
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
