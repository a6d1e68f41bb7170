"""The same workload through tenure, pgqueuer and Procrastinate on the same PostgreSQL, in the
same run: W worker processes drain N queued no-op jobs; jobs done per second.

    pip install -e '.[bench]'     # pgqueuer and procrastinate: benchmark-only dependencies
    python benchmarks/postgres_compare.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
        [--jobs 2000] [--repeat 3] [--workers 1,4,16]

Each system gets its own database (``bench_tenure``, ``bench_pgqueuer``,
``bench_procrastinate``, created afresh by this script; ``--prefix`` renames them),
installed with its own tooling.
Before each run the queue is refilled untimed (tenure: one INSERT ... SELECT; pgqueuer:
``Queries.enqueue`` with lists; Procrastinate: ``Task.batch_defer_async``), then W worker
processes are released together (setup untimed) and run until the queue is empty, each
with the system's own worker API and default settings:

* **tenure**: ``claim_next`` + ``complete`` per job (sync API, one process per worker);
  **tenure batch**: ``claim_many(owner, ttl, 10)`` then ``complete_many`` of the 10 leases
  (two statements per 10 jobs); **tenure chained**: ``claim_many`` once, then
  ``complete_and_claim`` of each batch (one statement and one commit per 10 jobs);
  **tenure async**: claim_many + complete_many with the async API (``tenure.aio``, a pool
  of at most 2 connections per process); **tenure Worker**: the runtime,
  ``tenure.Worker(concurrency=10)`` with an async no-op handler, ``run(burst=True)``
  (**tenure Worker sync**: a sync no-op handler); **tenure batch sketch**: not the
  product; the runtime issue #19 names as its way out, designed around claimed batches,
  sketched to measure its floor (``_batch_runtime.py``);
* **pgqueuer**: ``QueueManager`` with a psycopg ``AsyncConnection``, an async no-op
  entrypoint, ``run(mode=drain)`` (its default batch_size=10: it dequeues 10 at a time and
  logs completions in batches);
* **Procrastinate**: ``App(PsycopgConnector)``, an async no-op task,
  ``run_worker_async(wait=False)`` (stops when no job is left; concurrency 1 per process).

Throughput is N / (time all N jobs are recorded done in the database - the time the workers
were released): this process polls each system's own record of finished jobs every 10 ms
(so a worker's idle tail before it exits is not counted against it; pgqueuer's drain mode
has one of several seconds). Systems alternate order every repetition (ABC, CBA, ...); the
medians and ratios to the faster competitor are printed. After each run the script checks
that every job was done exactly once.

Beside jobs/s it prints the CPU each system spent per job: its worker processes' (each
one's ``time.process_time`` over its loop) plus the local PostgreSQL server's (`ServerCpu`:
the backends that served the run, and the WAL writer, checkpointer and background writer).
Other load on the machine stretches wall time far more than it changes CPU time per job.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import _batch_runtime
import psycopg
from _common import burst_run, machine_line, warm_up_worker

import tenure
from tenure.stores.postgres._common import render

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TTL = 60.0
SYSTEMS = (
    "tenure",
    "tenure batch",
    "tenure chained",
    "tenure async",
    "tenure Worker",
    "tenure Worker sync",
    "tenure batch sketch",
    "pgqueuer",
    "procrastinate",
)


def database_url(base: str, name: str) -> str:
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def recreate_database(base: str, name: str) -> str:
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(base, name)


# -- tenure ------------------------------------------------------------------------------


def tenure_fill(url: str, jobs: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            render("TRUNCATE {schema}.tenure_jobs, {schema}.tenure_attempts", "public").encode()
        )
        conn.execute(
            render(
                "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
                "max_attempts, created_at, updated_at) "
                "SELECT 'job-' || g, 'default', 'ready', 1000 + g, 5, 1000, 1000 "
                "FROM generate_series(1, %s) g",
                "public",
            ).encode(),
            (jobs,),
        )
        conn.execute("VACUUM ANALYZE tenure_jobs")


TENURE_DONE = "SELECT count(*) FROM tenure_jobs WHERE state = 'done'"
PGQUEUER_DONE = "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
PROCRASTINATE_DONE = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"


def tenure_check(url: str, jobs: int) -> None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'done' AND generation = 1), count(*) "
            "FROM tenure_jobs"
        ).fetchone()
    assert row == (jobs, jobs), row


def tenure_worker(index: int, url: str, batch: int, chained: bool = False) -> Callable[[], int]:
    store = tenure.connect(url)
    owner = f"worker-{index}"

    def loop() -> int:
        done = 0
        try:
            if batch == 1:
                while (lease := store.claim_next(owner, TTL)) is not None:
                    store.complete(lease)
                    done += 1
            elif not chained:
                while leases := store.claim_many(owner, TTL, batch):
                    lost = store.complete_many(leases)
                    assert not lost, lost
                    done += len(leases)
            else:
                leases = store.claim_many(owner, TTL, batch)
                while leases:
                    done += len(leases)
                    lost, leases = store.complete_and_claim(leases, owner, TTL, batch)
                    assert not lost, lost
        finally:
            store.close()
        return done

    return loop


def tenure_async_worker(index: int, url: str, batch: int) -> Callable[[], int]:
    """The async API, like pgqueuer's batches and its buffered completions: take ``batch``
    jobs at once and complete them together, the completion of one batch in flight while
    the next batch is claimed (two pooled connections)."""
    import tenure.aio

    loop = asyncio.new_event_loop()
    separator = "&" if "?" in url else "?"
    store = loop.run_until_complete(tenure.aio.connect(f"{url}{separator}pool_min=2&pool_max=2"))
    owner = f"worker-{index}"

    async def complete(leases: list[tenure.Lease]) -> int:
        lost = await store.complete_many(leases)
        assert not lost, lost
        return len(leases)

    async def work() -> int:
        done = 0
        completing: asyncio.Task[int] | None = None
        try:
            while True:
                leases = await store.claim_many(owner, TTL, batch)
                if completing is not None:
                    done += await completing
                    completing = None
                if not leases:
                    break
                completing = asyncio.ensure_future(complete(leases))
        finally:
            if completing is not None:
                done += await completing
            await store.close()
        return done

    def run() -> int:
        done = loop.run_until_complete(work())
        loop.close()
        return done

    return run


def tenure_runtime_worker(index: int, url: str, sync: bool = False) -> Callable[[], int]:
    """The runtime itself, like pgqueuer's QueueManager: `tenure.Worker` with 10 slots (its
    batch of 10), an async no-op handler (``sync``: a plain function, run on a thread);
    free slots are filled in one claim, jobs that finish together are completed in one
    call, leases are renewed from its own thread. A first run on an empty queue, untimed,
    pays the imports (`warm_up_worker`), as the other rows connect before the barrier."""
    warm_up_worker(url)
    worker = tenure.Worker(url, concurrency=10, ttl=TTL, owner=f"worker-{index}")
    return burst_run(worker, "default", lambda ctx: None, sync=sync)


def tenure_sketch_worker(index: int, url: str) -> Callable[[], int]:
    """Issue #19's runtime designed around claimed batches, sketched to measure its floor
    (`_batch_runtime.py`): 10 jobs a claim, renewals on a thread of its own, completions
    with the next claim. Its connections open in the timed window, as the Worker's do."""

    _batch_runtime.warm_up(url)
    owner = f"worker-{index}"
    return partial(_batch_runtime.run, url, "default", owner, TTL, 10, _batch_runtime.no_op)


# -- pgqueuer ----------------------------------------------------------------------------


def pgqueuer_setup(url: str) -> None:
    from pgqueuer import PsycopgDriver, Queries

    async def install() -> None:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        await Queries(PsycopgDriver(conn)).install()
        await conn.close()

    asyncio.run(install())


def pgqueuer_fill(url: str, jobs: int) -> None:
    from pgqueuer import PsycopgDriver, Queries

    async def fill() -> None:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        await conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
        await Queries(PsycopgDriver(conn)).enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)
        await conn.execute("VACUUM ANALYZE pgqueuer")
        await conn.close()

    asyncio.run(fill())


def pgqueuer_check(url: str, jobs: int) -> None:
    with psycopg.connect(url) as conn:
        left = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()
        done = conn.execute(
            "SELECT count(DISTINCT job_id) FROM pgqueuer_log WHERE status = 'successful'"
        ).fetchone()
    assert left == (0,), left
    assert done == (jobs,), done


def pgqueuer_worker(index: int, url: str) -> Callable[[], int]:
    from pgqueuer import PsycopgDriver, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    loop = asyncio.new_event_loop()
    done = [0]

    async def setup() -> QueueManager:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        manager = QueueManager(Queries(PsycopgDriver(conn)))

        @manager.entrypoint("noop")
        async def noop(job: Any) -> None:
            done[0] += 1

        return manager

    manager = loop.run_until_complete(setup())

    def run() -> int:
        loop.run_until_complete(manager.run(mode=QueueExecutionMode.drain))
        loop.close()
        return done[0]

    return run


# -- Procrastinate -----------------------------------------------------------------------


def _procrastinate_app(url: str, done: list[int]) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop", queue="default")
    async def noop() -> None:
        done[0] += 1

    return app


def procrastinate_setup(url: str) -> None:
    async def install() -> None:
        app = _procrastinate_app(url, [0])
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(install())


def procrastinate_fill(url: str, jobs: int) -> None:
    async def fill() -> None:
        app = _procrastinate_app(url, [0])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("TRUNCATE procrastinate_jobs CASCADE")
        async with app.open_async():
            task = app.tasks["noop"]
            for start in range(0, jobs, 1000):
                await task.batch_defer_async(*[{} for _ in range(min(1000, jobs - start))])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE procrastinate_jobs")

    asyncio.run(fill())


def procrastinate_check(url: str, jobs: int) -> None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*), "
            "max(attempts) FROM procrastinate_jobs"
        ).fetchone()
    assert row is not None
    assert row[:2] == (jobs, jobs), row


def procrastinate_worker(index: int, url: str) -> Callable[[], int]:
    loop = asyncio.new_event_loop()
    done = [0]
    app = _procrastinate_app(url, done)
    context = app.open_async()
    loop.run_until_complete(context.__aenter__())

    def run() -> int:
        loop.run_until_complete(
            app.run_worker_async(
                queues=["default"], wait=False, install_signal_handlers=False, concurrency=1
            )
        )
        loop.run_until_complete(context.__aexit__(None, None, None))
        loop.close()
        return done[0]

    return run


# -- the run -----------------------------------------------------------------------------


def _child(factory: Any, args: tuple[Any, ...], index: int, barrier: Any, results: Any) -> None:
    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    try:
        loop = factory(index, *args)
        barrier.wait()
        start, cpu_start = time.monotonic(), time.process_time()
        done = loop()
        results.put((start, done, time.process_time() - cpu_start, None))
    except BaseException as exc:  # report, don't leave the parent waiting
        barrier.abort()
        results.put((0.0, 0, 0.0, f"{type(exc).__name__}: {exc}"))


_TICK = os.sysconf("SC_CLK_TCK")
# PostgreSQL's own processes that work for every connection (WAL flushes, dirty pages).
_AUXILIARY = (b"walwriter", b"checkpointer", b"background writer")


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()


def _proc_cpu(pid: int, *, children: bool = False) -> float:
    """CPU seconds of a local process (user + system), or of its reaped children."""
    fields = _stat_fields(pid)
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / _TICK


class ServerCpu:
    """CPU seconds the local PostgreSQL server spends for one database from `start` to
    `stop`: its backends' (those alive at `start` only from then on; they are counted once
    they exit, reaped by the postmaster, so `stop` waits for that) plus the WAL writer,
    checkpointer and background writer. Backends of other sessions that exit meanwhile
    count too: on a busy machine read it as an upper bound. None when the server is not on
    this machine."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.postmaster: int | None = None
        self.auxiliary: list[int] = []
        try:
            self.postmaster = int(_stat_fields(conn.info.backend_pid)[1])
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                        command = cmdline.read()
                    parent = int(_stat_fields(int(entry))[1])
                except (OSError, ValueError, IndexError):
                    continue
                if parent == self.postmaster and any(name in command for name in _AUXILIARY):
                    self.auxiliary.append(int(entry))
        except (OSError, ValueError, IndexError):
            self.postmaster = None

    def _others(self) -> list[int]:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        return [row[0] for row in rows]

    def _total(self) -> float:
        assert self.postmaster is not None
        return _proc_cpu(self.postmaster, children=True) + sum(map(_proc_cpu, self.auxiliary))

    def start(self) -> float | None:
        if self.postmaster is None:
            return None
        try:
            # The backends alive now will be counted whole when reaped: take off what they
            # spent before (connecting, setting up).
            return self._total() - sum(map(_proc_cpu, self._others()))
        except OSError:
            return None

    def stop(self, started: float | None) -> float | None:
        for _ in range(200):  # the workers' backends exit once their connections close
            if not self._others():
                break
            time.sleep(0.01)
        time.sleep(0.05)
        if started is None:
            return None
        try:
            return self._total() - started
        except OSError:
            return None


def drain(
    factory: Any, processes: int, args: tuple[Any, ...], url: str, done_sql: str, jobs: int
) -> tuple[int, float, tuple[float, float] | None]:
    """Release ``processes`` workers together; time until ``done_sql`` counts ``jobs``.
    Returns (jobs done, seconds, CPU seconds of the workers and of the server, or None)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    children = [
        context.Process(target=_child, args=(factory, args, index, barrier, results))
        for index in range(processes)
    ]
    for child in children:
        child.start()
    with psycopg.connect(url, autocommit=True) as conn:
        server = ServerCpu(conn)
        barrier.wait(timeout=300)
        server_start = server.start()
        released = time.monotonic()
        finished = None
        while finished is None:
            row = conn.execute(done_sql).fetchone()
            if row is not None and row[0] >= jobs:
                finished = time.monotonic()
            else:
                time.sleep(0.01)
                if time.monotonic() - released > 600:
                    raise TimeoutError("the jobs were not done within 10 minutes")
        reports = [results.get(timeout=600) for _ in children]
        for child in children:
            child.join()
        server_cpu = server.stop(server_start)
    errors = [error for *_, error in reports if error]
    if errors:
        raise RuntimeError(f"benchmark worker failed: {errors[0]}")
    start = min(report[0] for report in reports)
    client_cpu = sum(report[2] for report in reports)
    cpu = None if server_cpu is None else (client_cpu, server_cpu)
    return sum(report[1] for report in reports), finished - min(start, released), cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TENURE_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument(
        "--prefix",
        default="bench",
        help="names of the databases made and dropped: <prefix>_tenure, <prefix>_pgqueuer, ... "
        "(one's own, where others run benchmarks on the same server)",
    )
    args = parser.parse_args(argv)
    names = {name: f"{args.prefix}_{name}" for name in ("tenure", "pgqueuer", "procrastinate")}
    systems = args.systems.split(",")
    import pgqueuer
    import procrastinate

    logging.getLogger("procrastinate").setLevel(logging.ERROR)

    print(f"PostgreSQL job queues, same workload; {machine_line()}")
    print(
        f"tenure {tenure.__version__}, pgqueuer {pgqueuer.__version__}, "
        f"procrastinate {procrastinate.__version__}, psycopg {psycopg.__version__}"
    )
    print(f"command: python benchmarks/postgres_compare.py {' '.join(argv)}".rstrip())
    urls = {system: recreate_database(args.url, name) for system, name in names.items()}
    # Every tenure row drains the same database, filled and checked the same way.
    variants = [system for system in SYSTEMS if system.startswith("tenure ")]
    urls.update(dict.fromkeys(variants, urls["tenure"]))
    tenure.connect(urls["tenure"]).close()
    pgqueuer_setup(urls["pgqueuer"])
    procrastinate_setup(urls["procrastinate"])
    fill: dict[str, Callable[[str, int], None]] = {
        "tenure": tenure_fill,
        "pgqueuer": pgqueuer_fill,
        "procrastinate": procrastinate_fill,
    }
    check: dict[str, Callable[[str, int], None]] = {
        "tenure": tenure_check,
        "pgqueuer": pgqueuer_check,
        "procrastinate": procrastinate_check,
    }
    fill.update(dict.fromkeys(variants, tenure_fill))
    check.update(dict.fromkeys(variants, tenure_check))
    workers: dict[str, tuple[Callable[..., Callable[[], int]], tuple[Any, ...], str]] = {
        "tenure": (tenure_worker, (urls["tenure"], 1), TENURE_DONE),
        "tenure batch": (tenure_worker, (urls["tenure"], 10), TENURE_DONE),
        "tenure chained": (tenure_worker, (urls["tenure"], 10, True), TENURE_DONE),
        "tenure async": (tenure_async_worker, (urls["tenure"], 10), TENURE_DONE),
        "tenure Worker": (tenure_runtime_worker, (urls["tenure"],), TENURE_DONE),
        "tenure Worker sync": (tenure_runtime_worker, (urls["tenure"], True), TENURE_DONE),
        "tenure batch sketch": (tenure_sketch_worker, (urls["tenure"],), TENURE_DONE),
        "pgqueuer": (pgqueuer_worker, (urls["pgqueuer"],), PGQUEUER_DONE),
        "procrastinate": (procrastinate_worker, (urls["procrastinate"],), PROCRASTINATE_DONE),
    }
    for count in [int(w) for w in args.workers.split(",")]:
        rates: dict[str, list[float]] = {system: [] for system in systems}
        costs: dict[str, list[tuple[float, float]]] = {system: [] for system in systems}
        for rep in range(args.repeat + 1):  # the first is a warm-up
            for system in systems if rep % 2 == 0 else systems[::-1]:
                fill[system](urls[system], args.jobs)
                factory, extra, done_sql = workers[system]
                done, seconds, cpu = drain(factory, count, extra, urls[system], done_sql, args.jobs)
                check[system](urls[system], args.jobs)
                assert done == args.jobs, (system, done)
                if rep:
                    rates[system].append(done / seconds)
                    if cpu is not None:
                        costs[system].append((sum(cpu) / done * 1e6, cpu[1] / done * 1e6))
        medians = {system: statistics.median(values) for system, values in rates.items()}
        rivals = [medians[s] for s in ("pgqueuer", "procrastinate") if s in medians]
        best = max(rivals) if rivals else None
        print(
            f"\n{count} worker process(es), {args.jobs:,} jobs: jobs/s (median of "
            f"{args.repeat}); CPU per job: workers + server (server), median"
        )
        for system in systems:
            versus = f"   {medians[system] / best:5.2f}x the faster rival" if best else ""
            spread = f"[{min(rates[system]):,.0f}-{max(rates[system]):,.0f}]"
            cost = "         -           "
            if costs[system]:
                total = statistics.median(c[0] for c in costs[system])
                server = statistics.median(c[1] for c in costs[system])
                cost = f"{total:5.0f} us ({server:4.0f} server)"
            print(f"  {system:<19}{medians[system]:>10,.0f}  {spread:<16}{cost}{versus}")
    with psycopg.connect(args.url, autocommit=True) as conn:
        for name in names.values():
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
