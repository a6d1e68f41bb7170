"""Batch submit against a loop of submit, on every store, in the same run.

    python benchmarks/submit_many.py [--stores sqlite,postgres,redis] [--jobs 2000]
        [--batch 100] [--repeat 5] [--chunk 200] [--quick] [--unique]
        [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
        [--redis redis://127.0.0.1:6379/0]

Per store, two sides take turns (A B, B A, ... see benchmarks/_common.py) submitting
``--jobs`` new jobs each into a fresh store (a new SQLite file, PostgreSQL schema or Redis
key prefix per side and repetition):

* **loop**: ``store.submit(job_id, payload)`` once per job: one round trip and one commit
  per job;
* **submit_many**: ``store.submit_many(batch)`` with ``--batch`` jobs a call: one round trip
  and one commit per batch (PostgreSQL: one statement; SQLite: one transaction; Redis: one
  script).

A turn is ``--chunk`` jobs. It prints median jobs/s of each side and submit_many/loop per
store (the target of issue #17 is >= 10x at batch 100), and checks after every
repetition that each side created exactly its jobs. ``--quick``: 1 repetition of 600 jobs.

``--unique`` (issue #18) compares instead **loop** with **loop_unique**: the same loop of
``store.submit``, each job with a ``unique_key`` of its own (so every one is created): the
cost of the keyed submit path against the plain one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import Result, Side, interleave_chunks, machine_line, print_report

import tenure

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


class Submitter:
    """One side's store and the jobs it still has to submit."""

    def __init__(
        self, store: tenure.Store, jobs: int, batch: int | None, unique: bool = False
    ) -> None:
        self.store = store
        self.batch = batch
        self.unique = unique
        self.next = 0
        self.jobs = jobs

    def step(self, limit: int) -> int:
        end = min(self.jobs, self.next + limit)
        ids = [f"job-{n}" for n in range(self.next, end)]
        if self.unique:
            for job_id in ids:
                self.store.submit(job_id, {"n": job_id}, unique_key=f"key-{job_id}")
        elif self.batch is None:
            for job_id in ids:
                self.store.submit(job_id, {"n": job_id})
        else:
            for start in range(0, len(ids), self.batch):
                chunk = ids[start : start + self.batch]
                self.store.submit_many([{"job_id": i, "payload": {"n": i}} for i in chunk])
        self.next = end
        return len(ids)

    def close(self) -> None:
        pass


def _urls(kind: str, args: argparse.Namespace, workdir: Path) -> Callable[[], tuple[str, Any]]:
    """A maker of fresh store URLs of ``kind``, each with its cleanup."""

    def fresh() -> tuple[str, Any]:
        tag = uuid.uuid4().hex[:10]
        if kind == "sqlite":
            return f"sqlite:///{workdir / f'{tag}.db'}", None
        if kind == "postgres":
            schema = f"bench_{tag}"
            sep = "&" if "?" in args.postgres else "?"
            return f"{args.postgres}{sep}schema={schema}", ("postgres", schema)
        sep = "&" if "?" in args.redis else "?"
        return f"{args.redis}{sep}prefix=bench-{tag}", ("redis", f"bench-{tag}")

    return fresh


def _cleanup(args: argparse.Namespace, what: Any) -> None:
    if what is None:
        return
    kind, name = what
    if kind == "postgres":
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
    else:
        import redis

        client = redis.Redis.from_url(args.redis)
        keys = list(client.scan_iter(match="{" + name + "}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()


def _side(name: str, fresh: Callable[[], tuple[str, Any]], args: argparse.Namespace) -> Side:
    batch = None if name.startswith("loop") else args.batch

    def open_side() -> tuple[Submitter, Callable[[int], None]]:
        url, what = fresh()
        store = tenure.connect(url)
        runner = Submitter(store, args.jobs, batch, unique=name == "loop_unique")

        def verify(done: int) -> None:
            assert done == args.jobs, (name, done)
            count, cursor = 0, None
            while True:
                page = store.jobs(limit=1000, cursor=cursor)
                count += len(page)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert count == args.jobs, (name, count)
            store.close()
            _cleanup(args, what)

        return runner, verify

    return Side(name, open_side)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres,redis")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per side per repetition")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=200, help="jobs per turn")
    parser.add_argument("--quick", action="store_true", help="1 repetition of 600 jobs")
    parser.add_argument("--unique", action="store_true", help="loop against loop_unique")
    parser.add_argument(
        "--postgres", default=os.environ.get("TENURE_BENCH_POSTGRES_URL", DEFAULT_POSTGRES)
    )
    parser.add_argument("--redis", default=os.environ.get("TENURE_BENCH_REDIS_URL", DEFAULT_REDIS))
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.repeat = 600, 1
    print(f"submit_many(batch={args.batch}) against a loop of submit; {machine_line()}")
    print(f"command: python benchmarks/submit_many.py {' '.join(argv)}".rstrip())
    ratios = {}
    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as workdir:
        for kind in args.stores.split(","):
            fresh = _urls(kind, args, Path(workdir))
            other = "loop_unique" if args.unique else "submit_many"
            sides = [_side("loop", fresh, args), _side(other, fresh, args)]
            results: list[Result] = interleave_chunks(sides, args.repeat, chunk=args.chunk)
            found = print_report(f"{kind}: jobs/s", results, "loop", unit="jobs/s")
            ratios[kind] = found[other]
    print(f"\n{other} / loop: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
