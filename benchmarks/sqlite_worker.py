"""The worker runtime on SQLite beside a hand loop and Huey's SQLite storage: one process
drains the same no-op jobs, every system on a fresh file in the same run (issue #19).

    pip install -e '.[bench]'        # huey
    python benchmarks/sqlite_worker.py [--jobs 2000] [--repeat 5] [--dir /dev/shm]

Each repetition prepares, untimed, one file per system holding ``--jobs`` jobs, each carrying
one small integer, then times one process taking every job, running ``handle(n)`` (checks n,
returns None) and acknowledging it:

* *tenure Worker*: ``tenure.Worker(concurrency=8)`` with an async handler, ``run(burst=True)``
  (the runtime a user runs: leases renewed off the handler's loop, per-job timeouts, stats);
* *tenure Worker sync*: the same with a sync handler (each job on a worker thread);
* *hand loop*: ``claim_jobs(owner, ttl, 1)`` -> ``handle`` -> ``complete``, the store calls the
  Worker makes for one job, written by hand: the baseline;
* *Huey*: ``SqliteHuey`` (``fsync=True``: ``synchronous=FULL``, tenure's setting; WAL, as
  tenure) and its own consumer, one worker thread (``huey.create_consumer(workers=1)``),
  stopped once its queue is empty and every job has run.

The systems alternate (ABC..., ...CBA) so that machine noise spreads over all of them; the
figure is jobs per second from the start of the run to the last job's acknowledgement, and
the ratio is against the hand loop. Every run checks that each job ran exactly once (for
tenure: every job done at generation 1). What differs (read the numbers with it): Huey
keeps no lease, no generation and no attempt history; a dequeued task is deleted from its
queue table, while tenure keeps every job (state, generation, result). Exits 0.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import Result, burst_run, machine_line, print_report

import tenure

SYSTEMS = ("hand loop", "tenure Worker", "tenure Worker sync", "Huey")
TTL = 60.0
OWNER = "bench-worker"


def handle(n: int) -> None:
    """The job: the same trivial function in every system."""
    if n < 0:
        raise ValueError(n)


def _fill_tenure(path: Path, jobs: int) -> None:
    with tenure.connect(f"sqlite:///{path}") as store:
        for start in range(0, jobs, 100):
            store.submit_many(
                [tenure.JobSpec(f"job-{i}", {"n": i}) for i in range(start, min(jobs, start + 100))]
            )


def _check_tenure(path: Path, jobs: int) -> None:
    conn = sqlite3.connect(path)
    try:
        found = conn.execute(
            "SELECT count(*) FROM tenure_jobs WHERE state = 'done' AND generation = 1"
        ).fetchone()[0]
    finally:
        conn.close()
    if found != jobs:
        raise RuntimeError(f"benchmark bug: {found} of {jobs} jobs done at generation 1")


def _hand_loop(path: Path, jobs: int) -> Callable[[], int]:
    store = tenure.connect(f"sqlite:///{path}")

    def run() -> int:
        done = 0
        while claimed := store.claim_jobs(OWNER, TTL, 1):
            for lease, job in claimed:
                handle(job.payload["n"])
                store.complete(lease)
                done += 1
        store.close()
        return done

    return run


def _worker(path: Path, jobs: int, *, sync: bool) -> Callable[[], int]:
    worker = tenure.Worker(
        f"sqlite:///{path}", concurrency=8, ttl=TTL, owner=OWNER, poll_interval=0.05
    )
    return burst_run(worker, "default", lambda ctx: handle(ctx.payload["n"]), sync=sync)


def _huey(path: Path, jobs: int) -> tuple[Callable[[], int], Callable[[], None]]:
    from huey import SqliteHuey

    huey = SqliteHuey("bench", filename=str(path), fsync=True)
    ran = [0]
    lock = threading.Lock()

    @huey.task()
    def huey_handle(n: int) -> None:
        handle(n)
        with lock:
            ran[0] += 1

    for i in range(jobs):
        huey_handle(i)

    def run() -> int:
        consumer = huey.create_consumer(
            workers=1, worker_type="thread", periodic=False, check_worker_health=False
        )
        consumer.start()
        # Huey has no "drain then stop": watch for the last job, as a test of it would.
        while ran[0] < jobs:
            time.sleep(0.001)
        consumer.stop(graceful=True)
        return ran[0]

    def check() -> None:
        if ran[0] != jobs or huey.pending_count() != 0:
            raise RuntimeError(f"benchmark bug: Huey ran {ran[0]} of {jobs} jobs")

    return run, check


def _one(system: str, folder: Path, jobs: int, rep: int) -> tuple[int, float]:
    path = folder / f"{system.replace(' ', '-')}-{rep}.db"
    check: Callable[[], None]
    if system == "Huey":
        run, check = _huey(path, jobs)
    else:
        _fill_tenure(path, jobs)
        if system == "hand loop":
            run = _hand_loop(path, jobs)
        else:
            run = _worker(path, jobs, sync=system.endswith("sync"))

        def check() -> None:
            _check_tenure(path, jobs)

    start = time.perf_counter()
    done = run()
    seconds = time.perf_counter() - start
    check()
    if done != jobs:
        raise RuntimeError(f"benchmark bug: {system} reported {done} of {jobs} jobs")
    return done, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    args = parser.parse_args(argv)
    logging.getLogger("huey").setLevel(logging.WARNING)
    print(machine_line())
    print(f"{args.jobs} no-op jobs per run, 1 process, {args.repeat} repetitions (+1 warm-up)")
    results = {system: Result(system) for system in SYSTEMS}
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for rep in range(args.repeat + 1):
            order = SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                done, seconds = _one(system, Path(folder), args.jobs, rep)
                if rep:
                    results[system].rates.append(done / seconds)
    print_report(
        "jobs/s, against the hand loop (claim_jobs + complete)",
        list(results.values()),
        "hand loop",
        unit="jobs/s",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
