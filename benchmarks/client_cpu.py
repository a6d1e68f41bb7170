"""Client CPU per no-op job (issue #19's "runtime at most 1.5x the hand loop"), in one
process on a real store: the CPU time of the whole process (all threads: the Worker's
renewer and watchdog too) while it drains N queued jobs, four ways, taking turns:

* **hand loop (sync)**: ``claim_jobs(batch)`` once, then ``complete_and_claim_jobs``
  batches on the sync `tenure.Store`: the hand-written loop of the issue;
* **hand loop (async)**: the same calls on `tenure.aio.AsyncStore`, which the Worker uses;
* **batch runtime sketch**: not the product; the runtime issue #19 names as its way out,
  designed around claimed batches, sketched to measure its floor (``_batch_runtime.py``);
* **Worker**: ``tenure.Worker(concurrency=batch)`` with an async no-op handler,
  ``run(burst=True)`` (warmed up first on an empty queue, untimed);
* **Worker sync**: the same with a sync no-op handler (a plain function, run on the
  worker's handler threads).

    python benchmarks/client_cpu.py --url redis://127.0.0.1:6379/5 [--jobs 20000] [--repeat 3] \
        [--batch 8]
    python benchmarks/client_cpu.py --url postgresql://postgres@127.0.0.1:5432/bench_cpu --batch 10

It prints each way's median CPU per job, jobs/s, context switches per job (voluntary:
a thread waited; involuntary: it was preempted; from ``getrusage``, all threads) and its
ratio to the sync hand loop.
Give it a store of its own (a database, a Redis db or prefix): between runs it purges the
store's done jobs. CPU counts work, not waiting,
so it moves far less with the machine's load than jobs/s does. Run it on two trees
(``PYTHONPATH=<tree>/src``) to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from collections.abc import Callable

import _batch_runtime
from _common import burst_run, machine_line, warm_up_worker

import tenure
import tenure.aio

TTL = 60.0
QUEUE = "tenure-bench-cpu"
OWNER = "bench-cpu"


def fill(url: str, jobs: int) -> None:
    if url.startswith(("postgres://", "postgresql://")):
        # The last round's updates and purge left dead rows: without a VACUUM the rounds
        # slow down one after the other. Before the purge, not after it: a VACUUM of the
        # emptied tables makes PostgreSQL plan the attempt history's trigger for empty
        # tables, and each statement then scans the history (2x slower claims here).
        import psycopg

        with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
            conn.execute("VACUUM")
    with tenure.connect(url) as store:
        store.purge(states=("done",), older_than=0)
        for start in range(0, jobs, 500):
            store.submit_many(
                [
                    {"job_id": f"cpu-{n}", "queue": QUEUE}
                    for n in range(start, min(jobs, start + 500))
                ]
            )


def sync_loop(url: str, batch: int) -> int:
    done = 0
    with tenure.connect(url) as store:
        claimed = store.claim_jobs(OWNER, TTL, batch, queues=[QUEUE])
        while claimed:
            done += len(claimed)
            lost, claimed = store.complete_and_claim_jobs(
                [lease for lease, _ in claimed], OWNER, TTL, batch, queues=[QUEUE]
            )
            assert not lost, lost
    return done


def async_loop(url: str, batch: int) -> int:
    async def drain() -> int:
        done = 0
        async with await tenure.aio.connect(url) as store:
            claimed = await store.claim_jobs(OWNER, TTL, batch, queues=[QUEUE])
            while claimed:
                done += len(claimed)
                lost, claimed = await store.complete_and_claim_jobs(
                    [lease for lease, _ in claimed], OWNER, TTL, batch, queues=[QUEUE]
                )
                assert not lost, lost
        return done

    return asyncio.run(drain())


def batch_sketch(url: str, batch: int) -> int:
    return _batch_runtime.run(url, QUEUE, OWNER, TTL, batch, _batch_runtime.no_op)


def worker_run(url: str, batch: int, *, sync: bool = False) -> int:
    worker = tenure.Worker(url, concurrency=batch, ttl=TTL, owner=OWNER, summary_every=0)
    return burst_run(worker, QUEUE, lambda ctx: None, sync=sync)()


def worker_sync_run(url: str, batch: int) -> int:
    return worker_run(url, batch, sync=True)


WAYS: dict[str, Callable[[str, int], int]] = {
    "hand loop (sync)": sync_loop,
    "hand loop (async)": async_loop,
    "batch runtime sketch": batch_sketch,
    "Worker": worker_run,
    "Worker sync": worker_sync_run,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    print(f"client CPU per no-op job, {args.jobs:,} jobs, batch {args.batch}; {machine_line()}")
    command = " ".join(["python benchmarks/client_cpu.py", *argv])
    print(f"store: {args.url.split('://')[0]}; command: {command}")
    warm_up_worker(args.url)
    cpu: dict[str, list[float]] = {way: [] for way in WAYS}
    rate: dict[str, list[float]] = {way: [] for way in WAYS}
    switches: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for round_ in range(args.repeat):
        ways = list(WAYS) if round_ % 2 == 0 else list(reversed(WAYS))
        for way in ways:
            fill(args.url, args.jobs)
            before = resource.getrusage(resource.RUSAGE_SELF)
            started, wall = time.process_time(), time.perf_counter()
            done = WAYS[way](args.url, args.batch)
            wall = time.perf_counter() - wall
            spent = time.process_time() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
            assert done == args.jobs, (way, done)
            cpu[way].append(spent / done * 1e6)
            rate[way].append(done / wall)
            switches[way].append(
                (
                    (after.ru_nvcsw - before.ru_nvcsw) / done,
                    (after.ru_nivcsw - before.ru_nivcsw) / done,
                )
            )
    with tenure.connect(args.url) as store:
        store.purge(states=("done",), older_than=0)
    base = statistics.median(cpu["hand loop (sync)"])
    for way in WAYS:
        median = statistics.median(cpu[way])
        runs = ", ".join(f"{c:.1f}" for c in cpu[way])
        waited = statistics.median(v for v, _ in switches[way])
        preempted = statistics.median(i for _, i in switches[way])
        print(
            f"  {way:20} {median:6.1f} us CPU/job ({runs})  {statistics.median(rate[way]):8,.0f} "
            f"jobs/s  switches/job {waited:4.2f} + {preempted:4.2f}  "
            f"{median / base:4.2f}x the sync hand loop's CPU"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
