"""Latency users feel: submit -> handler start on an idle worker, tenure beside pgqueuer and
Procrastinate on the same PostgreSQL, and beside Dramatiq on the same Redis (issue #19).

    pip install -e '.[bench]'
    python benchmarks/latency_compare.py [--pg postgresql://postgres@127.0.0.1:5432/postgres]
        [--redis redis://127.0.0.1:6379/13] [--jobs 200] [--gap 0.05] [--rounds 2]

For each system, one worker process is started with the system's own worker API and its
defaults for waking up (every one listens: LISTEN/NOTIFY on PostgreSQL, blocking reads on
Redis), and left idle for a second. Then this process submits ``--jobs`` jobs one at a time,
``--gap`` seconds apart (jittered by up to a tenth, so no system's poll period lines up with
the submits), each carrying ``time.monotonic()`` read just before its submit call; the
handler reads the clock as it starts (CLOCK_MONOTONIC is one clock for every process of the
machine) and reports the difference. The latency therefore includes the submit's own commit
and the wake-up, queue read and dispatch of the worker: what a request that enqueues waits
for before work starts.

* *tenure Worker*: ``tenure.Worker(url, concurrency=8)``, async handler, default settings;
  submits through ``tenure.connect(url).submit``.
* *pgqueuer*: ``QueueManager(...).run()`` (continuous mode, its defaults); ``Queries.enqueue``.
* *Procrastinate*: ``App(PsycopgConnector).run_worker_async()`` (listen_notify on, its
  default); ``task.defer_async``.
* *Dramatiq*: ``Worker(RedisBroker)`` (8 threads, prefetch 16); ``actor.send``.

Systems alternate order each round; per system, p50, p90, p99 and max over every round's
jobs are printed, and tenure's p99 over the best rival's on the same store. Every job must
report exactly once. Exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import random
import statistics
import sys
import time
import uuid
from typing import Any

from _common import machine_line
from postgres_compare import pgqueuer_setup, procrastinate_setup, recreate_database
from redis_brokers import tenure_url

import tenure

PG_SYSTEMS = ("tenure Worker (PostgreSQL)", "pgqueuer", "Procrastinate")
REDIS_SYSTEMS = ("tenure Worker (Redis)", "Dramatiq")
DATABASES = {"tenure Worker (PostgreSQL)": "lat_tenure", "pgqueuer": "lat_pgqueuer"}
DATABASES["Procrastinate"] = "lat_procrastinate"


# -- workers (each in a child process; reports go to ``out`` as (job key, latency s)) ------


def _tenure_worker(url: str, out: Any, ready: Any) -> None:
    worker = tenure.Worker(url, concurrency=8)

    @worker.handler("default")
    async def started(ctx: tenure.JobContext) -> None:
        out.put((ctx.job_id, time.monotonic() - ctx.payload["t"]))

    ready.set()
    worker.run(install_signal_handlers=False)


def _pgqueuer_worker(url: str, out: Any, ready: Any) -> None:
    import psycopg
    from pgqueuer import PsycopgDriver, Queries, QueueManager

    # pgqueuer cancels its own waits on a timer; psycopg warns of each one.
    logging.getLogger("psycopg").setLevel(logging.ERROR)

    async def main() -> None:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        manager = QueueManager(Queries(PsycopgDriver(conn)))

        @manager.entrypoint("lat")
        async def started(job: Any) -> None:
            now = time.monotonic()
            sent = json.loads(job.payload)
            out.put((sent["k"], now - sent["t"]))

        ready.set()
        await manager.run()

    asyncio.run(main())


def _procrastinate_app(url: str, out: Any) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="lat", queue="default")
    async def started(k: str, t: float) -> None:
        if out is not None:
            out.put((k, time.monotonic() - t))

    return app


def _procrastinate_worker(url: str, out: Any, ready: Any) -> None:
    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    app = _procrastinate_app(url, out)

    async def main() -> None:
        async with app.open_async():
            ready.set()
            await app.run_worker_async(queues=["default"], install_signal_handlers=False)

    asyncio.run(main())


def _dramatiq_actor(url: str, tag: str, out: Any) -> tuple[Any, Any]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url, namespace=tag)
    dramatiq.set_broker(broker)

    def lat(k: str, t: float) -> None:
        if out is not None:
            out.put((k, time.monotonic() - t))

    actor = dramatiq.actor(lat, actor_name="lat", queue_name="lat", broker=broker, max_retries=0)
    return broker, actor


def _dramatiq_worker(url: str, tag: str, out: Any, ready: Any) -> None:
    from dramatiq import Worker

    logging.getLogger("dramatiq").setLevel(logging.WARNING)
    broker, _ = _dramatiq_actor(url, tag, out)
    Worker(broker, worker_threads=8).start()
    ready.set()
    while True:
        time.sleep(3600)


# -- submitters (in this process) ---------------------------------------------------------


class Submitter:
    """Untimed setup in ``__init__``; ``send(key)`` submits one job stamped just before."""

    def __init__(self, system: str, url: str, tag: str) -> None:
        self.system = system
        self.loop = asyncio.new_event_loop()
        if system.startswith("tenure"):
            self.store = tenure.connect(url)
        elif system == "pgqueuer":
            import psycopg
            from pgqueuer import PsycopgDriver, Queries

            self.conn = self.loop.run_until_complete(
                psycopg.AsyncConnection.connect(url, autocommit=True)
            )
            self.queries = Queries(PsycopgDriver(self.conn))
        elif system == "Procrastinate":
            self.app = _procrastinate_app(url, None)
            self.context = self.app.open_async()
            self.loop.run_until_complete(self.context.__aenter__())
        else:
            _, self.actor = _dramatiq_actor(url, tag, None)

    def send(self, key: str) -> None:
        system = self.system
        if system.startswith("tenure"):
            self.store.submit(key, {"t": time.monotonic()})
        elif system == "pgqueuer":
            payload = json.dumps({"k": key, "t": time.monotonic()}).encode()
            self.loop.run_until_complete(self.queries.enqueue("lat", payload))
        elif system == "Procrastinate":
            task = self.app.tasks["lat"]
            self.loop.run_until_complete(task.defer_async(k=key, t=time.monotonic()))
        else:
            self.actor.send(key, time.monotonic())

    def close(self) -> None:
        if self.system.startswith("tenure"):
            self.store.close()
        elif self.system == "pgqueuer":
            self.loop.run_until_complete(self.conn.close())
        elif self.system == "Procrastinate":
            self.loop.run_until_complete(self.context.__aexit__(None, None, None))
        self.loop.close()


def _prepare(system: str, args: argparse.Namespace, tag: str) -> str:
    """A fresh place for the system's jobs; its URL."""
    if system in DATABASES:
        url = recreate_database(args.pg, DATABASES[system])
        if system == "pgqueuer":
            pgqueuer_setup(url)
        elif system == "Procrastinate":
            procrastinate_setup(url)
        else:
            tenure.connect(url).close()  # installs the schema
        return url
    if system.startswith("tenure"):
        return tenure_url(args.redis, tag)
    return args.redis


def measure(system: str, args: argparse.Namespace) -> list[float]:
    """One round of one system: the latencies of ``--jobs`` jobs, in seconds."""
    tag = f"lat{uuid.uuid4().hex[:8]}"
    url = _prepare(system, args, tag)
    context = multiprocessing.get_context("spawn")
    out, ready = context.Queue(), context.Event()
    target: Any = {
        "pgqueuer": _pgqueuer_worker,
        "Procrastinate": _procrastinate_worker,
    }.get(system, _tenure_worker)
    child_args: tuple[Any, ...] = (url, out, ready)
    if system == "Dramatiq":
        target, child_args = _dramatiq_worker, (url, tag, out, ready)
    child = context.Process(target=target, args=child_args, daemon=True)
    child.start()
    submitter = Submitter(system, url, tag)
    try:
        if not ready.wait(60):
            raise RuntimeError(f"{system}: the worker did not start")
        time.sleep(1.0)  # idle: whatever the worker does when there is nothing to do
        keys = [f"lat-{i}" for i in range(args.jobs)]
        for key in keys:
            submitter.send(key)
            time.sleep(args.gap * (1 + random.uniform(-0.1, 0.1)))
        reports = dict(out.get(timeout=60) for _ in keys)
    finally:
        submitter.close()
        child.kill()
        child.join()
    if sorted(reports) != sorted(keys):
        raise RuntimeError(f"benchmark bug: {system} reported {len(reports)} of {len(keys)}")
    return list(reports.values())


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    logging.getLogger("psycopg").setLevel(logging.ERROR)  # the rivals' cancelled waits
    print(machine_line())
    print(f"{args.jobs} jobs per round, {args.gap * 1000:.0f} ms apart, {args.rounds} rounds")
    for title, systems in (("PostgreSQL", PG_SYSTEMS), ("Redis", REDIS_SYSTEMS)):
        latencies: dict[str, list[float]] = {system: [] for system in systems}
        for round_ in range(args.rounds):
            for system in systems if round_ % 2 == 0 else systems[::-1]:
                latencies[system].extend(measure(system, args))
        print(f"\n{title}: submit -> handler start, ms")
        print(f"  {'':<28}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}")
        p99 = {}
        for system, values in latencies.items():
            ms = [v * 1000 for v in values]
            p99[system] = _quantile(ms, 0.99)
            print(
                f"  {system:<28}{statistics.median(ms):8.2f}{_quantile(ms, 0.9):8.2f}"
                f"{p99[system]:8.2f}{max(ms):8.2f}"
            )
        ours = systems[0]
        best = min(p99[s] for s in systems[1:])
        print(f"  tenure p99 / best rival's p99: {p99[ours] / best:.2f}")
    import psycopg

    with psycopg.connect(args.pg, autocommit=True) as conn:
        for name in DATABASES.values():
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
