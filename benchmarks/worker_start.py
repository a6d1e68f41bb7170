"""How long a `tenure.Worker` takes to start and stop: a burst run on a queue with no jobs
(open its store and its renewer's, claim once, find nothing, drain, close), against what
the raw driver needs for the least a worker must do (one connection opened, one query,
closed), in the same run. A short-lived worker (a burst run, a deploy's rolling restart,
one benchmark process of many) pays this once per run.

    python benchmarks/worker_start.py [--stores sqlite,postgres,redis] [--repeat 15]

Each store's first run is a warm-up (imports, first-call costs); the medians of the others
are printed with their ratio to the raw driver's median, and the client's CPU time per run
(this process, all its threads): what a short-lived worker spends of its machine's CPU
before its first job and after its last.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from _common import machine_line

import tenure

POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS = "redis://127.0.0.1:6379/7"


def worker_run(url: str) -> Callable[[], None]:
    def run() -> None:
        worker = tenure.Worker(url, concurrency=8, ttl=30, summary_every=0)

        @worker.handler("tenure-bench-start")
        async def never(ctx: tenure.JobContext) -> None:
            raise AssertionError("the queue has no jobs")

        worker.run(burst=True, install_signal_handlers=False)

    return run


def raw_run(store: str, target: str) -> Callable[[], None]:
    def run() -> None:
        if store == "sqlite":
            conn = sqlite3.connect(target)
            conn.execute("SELECT 1").fetchone()
            conn.close()
        elif store == "postgres":
            import psycopg

            with psycopg.connect(target, autocommit=True) as conn:
                conn.execute("SELECT 1").fetchone()
        else:
            import redis

            client = redis.Redis.from_url(target)
            client.ping()
            client.close()

    return run


def timed(run: Callable[[], None], repeat: int) -> tuple[float, float]:
    """Medians of wall time and of this process's CPU time (all its threads) per run."""
    run()  # warm-up
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), statistics.median(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,postgres,redis")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--postgres", default=POSTGRES)
    parser.add_argument("--redis", default=REDIS)
    args = parser.parse_args()
    print(f"Worker start -> stop (burst run, no jobs) against the raw driver; {machine_line()}")
    with tempfile.TemporaryDirectory() as tmp:
        for store in args.stores.split(","):
            tag = f"bench_start_{uuid.uuid4().hex[:8]}"
            if store == "sqlite":
                raw_target = str(Path(tmp) / "raw.db")
                url = f"sqlite:///{Path(tmp) / 'tenure.db'}"
            elif store == "postgres":
                raw_target, url = args.postgres, f"{args.postgres}?schema={tag}"
            else:
                raw_target, url = args.redis, f"{args.redis}?prefix={tag}"
            raw, raw_cpu = timed(raw_run(store, raw_target), args.repeat)
            worker, worker_cpu = timed(worker_run(url), args.repeat)
            print(
                f"  {store:9} raw connect + query + close {raw * 1000:7.1f} ms "
                f"(CPU {raw_cpu * 1000:4.1f})   Worker start -> stop {worker * 1000:7.1f} ms "
                f"(CPU {worker_cpu * 1000:4.1f})   ratio {worker / raw:5.1f}x"
            )
            if store == "postgres":
                import psycopg

                with psycopg.connect(args.postgres, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE')
            elif store == "redis":
                import redis

                client = redis.Redis.from_url(args.redis)
                for key in client.scan_iter(match=f"{{{tag}}}*"):
                    client.delete(key)
                client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
