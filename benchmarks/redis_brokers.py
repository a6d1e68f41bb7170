"""tenure on Redis beside RQ and Dramatiq (Redis broker): one enqueue -> process workload,
every system against the same Redis server in the same run.

    pip install -e '.[bench]'        # rq and dramatiq[redis]
    python benchmarks/redis_brokers.py [--url redis://127.0.0.1:6379/13] [--jobs 2000]
                                       [--repeat 3] [--workers 1,4] [--batch 10]

The workload, for each system, on fresh keys (a new key prefix, queue name or namespace):

1. **enqueue**: this process enqueues ``--jobs`` jobs one call at a time, each carrying one
   small integer: ``store.submit(id, {"n": i})``, ``queue.enqueue("redis_brokers.handle",
   i)``, ``actor.send(i)``. Figure: jobs enqueued per second.
2. **process**: W worker processes (set up untimed, then released together) take every job,
   run ``handle(n)`` (checks n, returns None) and acknowledge it:

   * *tenure*: claim one job (lease and job snapshot, payload included: the claim path of
     ``tenure.Worker``, ``Store.claim_jobs``) -> ``handle(payload["n"])`` ->
     ``complete(lease)``, until nothing is left to claim (every job is then done);
   * *tenure batch*: the same, claiming ``--batch`` jobs per store operation;
   * *tenure many*: a worker with ``--batch`` slots: it fills them all in one claim
     (``claim_many``), runs the jobs, and acknowledges the finished ones in one call
     (``complete_many``): two store operations per ``--batch`` jobs, the counterpart of
     Dramatiq's prefetch and threads, which also hold several messages per worker;
   * *tenure many connecting*: the same, opening its store in the timed window (its
     connection, the store's open script) as a Worker does, where *tenure many* opens it
     in the untimed setup;
   * *tenure Worker*: ``tenure.Worker(concurrency=8)`` with an async handler,
     ``run(burst=True)``: the runtime users run; *tenure Worker sync*: the same with a
     plain function as the handler, run on the worker's handler threads;
   * *tenure batch sketch*: not the product; the runtime issue #19 names as its way out,
     designed around claimed batches, sketched to measure its floor (``_batch_runtime.py``:
     renewals on a thread of their own, ``--batch`` jobs a claim, completions with the next);
   * *RQ*: ``SimpleWorker([queue]).work(burst=True)`` (no fork per job; log level WARNING);
   * *Dramatiq*: a ``Worker(broker)`` per process with Dramatiq's defaults (8 threads,
     prefetch 16), until the broker's ``join`` sees no message queued or unacknowledged
     (polled every 5 ms); *Dramatiq 1 thr*: the same with ``worker_threads=1`` (prefetch 2),
     one thread per process like the other systems.

   Figures: jobs processed per second, from the first worker's start to the last one's end;
   and CPU per job, the worker processes' own (every thread of theirs, from their release
   to their end: a Worker's start and a Dramatiq worker's are in it, the hand loops opened
   their stores before) and the Redis server's (from before the workers' setup to their
   end: the setup's few commands are in it).

The systems alternate (ABC..., ...CBA) so that machine noise spreads over all of them. Every
run checks that each job ran exactly once (per-process counters summed; for tenure, every
job done at generation 1). The defaults use database 13 so the brokers' keys (``rq:*``,
the Dramatiq namespace) stay apart from other users of the server; they are deleted after
each run. Exits 0.

What differs between the systems (be fair when reading the numbers): RQ stores each job's
result and keeps registries (started, finished) per job; Dramatiq acknowledges through a
per-worker set and keeps no result; tenure keeps the job (state, generation, lease, result
field) and never deletes it. None of the three fsyncs anything here: that is the server's
configuration, the same for all.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import _batch_runtime
import redis
from _common import Result, burst_run, machine_line, print_report, run_children, warm_up_worker

import tenure

SYSTEMS = (
    "tenure",
    "tenure batch",
    "tenure many",
    "tenure many connecting",
    "tenure Worker",
    "tenure Worker sync",
    "tenure batch sketch",
    "RQ",
    "Dramatiq",
    "Dramatiq 1 thr",
)
TENURE = tuple(system for system in SYSTEMS if system.startswith("tenure"))
TTL = 60.0
BATCH = 10


class Cost(NamedTuple):
    """CPU spent on a run (or per job): the worker processes' own, and the Redis server's."""

    client: float
    server: float


def handle(n: int) -> None:
    """The job: the same trivial function in every system (no result to store)."""
    if n < 0:
        raise ValueError(n)


# -- per-system enqueue and worker setup ------------------------------------------------
# A run is named by ``tag`` (fresh for each run): the tenure key prefix, the RQ queue name
# and the Dramatiq namespace.


def tenure_url(url: str, tag: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}prefix={tag}"


def dramatiq_broker(url: str, tag: str) -> Any:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url, namespace=tag)
    dramatiq.set_broker(broker)
    actor = dramatiq.actor(
        handle, actor_name="handle", queue_name="bench", broker=broker, max_retries=0
    )
    return broker, actor


def enqueue(system: str, url: str, tag: str, jobs: int) -> Callable[[], None]:
    """Untimed setup; returns the timed loop that enqueues ``jobs`` jobs."""
    if system.startswith("tenure"):
        store = tenure.connect(tenure_url(url, tag))

        def tenure_loop() -> None:
            for n in range(jobs):
                store.submit(f"job-{n}", {"n": n})
            store.close()

        return tenure_loop
    if system == "RQ":
        from rq import Queue

        queue = Queue(tag, connection=redis.Redis.from_url(url))

        def rq_loop() -> None:
            for n in range(jobs):
                queue.enqueue("redis_brokers.handle", n)

        return rq_loop
    _, actor = dramatiq_broker(url, tag)

    def dramatiq_loop() -> None:
        for n in range(jobs):
            actor.send(n)

    return dramatiq_loop


def process(system: str, url: str, tag: str, index: int) -> Callable[[], int]:
    """Untimed setup in a worker process; returns the timed loop (jobs it processed)."""
    if system.startswith("tenure"):
        store = tenure.connect(tenure_url(url, tag))
        owner = f"worker-{index}"
        batch = 1 if system == "tenure" else BATCH

        if system.startswith("tenure Worker"):
            # The runtime itself, like Dramatiq's Worker: 8 slots (Dramatiq's 8 threads),
            # free slots filled in one claim, completions of jobs that finish together sent
            # in one call, leases renewed by its own thread. "sync": a plain function as
            # the handler, run on the worker's handler threads (issue #19: within 70 % of
            # the async handler).
            store.close()
            warm_up_worker(tenure_url(url, tag))
            worker = tenure.Worker(
                tenure_url(url, tag), concurrency=8, ttl=TTL, owner=owner, poll_interval=0.05
            )
            return burst_run(
                worker,
                "default",
                lambda ctx: handle(ctx.payload["n"]),
                sync=system.endswith("sync"),
            )

        if system == "tenure batch sketch":
            # Issue #19's runtime designed around claimed batches, sketched to measure its
            # floor (`_batch_runtime.py`); its connections open in the timed window, as
            # the Worker's do.
            store.close()
            sketch_url = tenure_url(url, tag)
            _batch_runtime.warm_up(sketch_url)

            async def run_one(job: tenure.Job) -> None:
                handle(job.payload["n"])

            return lambda: _batch_runtime.run(sketch_url, "default", owner, TTL, batch, run_one)

        if system.startswith("tenure many"):
            connecting = system.endswith("connecting")
            if connecting:
                store.close()  # opened again in the timed window, as a Worker's store is

            def tenure_many_loop() -> int:
                nonlocal store
                if connecting:
                    store = tenure.connect(tenure_url(url, tag))
                done = 0
                while claimed := store.claim_jobs(owner, TTL, batch):
                    for _, job in claimed:
                        handle(job.payload["n"])
                    lost = store.complete_many([lease for lease, _ in claimed])
                    if lost:
                        raise RuntimeError(f"benchmark bug: {len(lost)} leases lost")
                    done += len(claimed)
                store.close()
                return done

            return tenure_many_loop

        def tenure_loop() -> int:
            done = 0
            # The claim path of tenure.Worker: leases with their jobs' snapshots (payload
            # included, as the brokers deliver the message with its arguments).
            while claimed := store.claim_jobs(owner, TTL, batch):
                for lease, job in claimed:
                    handle(job.payload["n"])
                    store.complete(lease)
                    done += 1
            store.close()
            return done

        return tenure_loop
    if system == "RQ":
        from rq import Queue, SimpleWorker

        connection = redis.Redis.from_url(url)
        worker = SimpleWorker([Queue(tag, connection=connection)], connection=connection)

        def rq_loop() -> int:
            worker.work(burst=True, logging_level="WARNING")
            return 0  # counted in the parent, from the queue's finished-job registry

        return rq_loop
    from dramatiq import Middleware, Worker

    broker, _ = dramatiq_broker(url, tag)
    counter = [0]

    class Count(Middleware):  # type: ignore[misc]
        def after_process_message(self, broker: Any, message: Any, *, result: Any = None,
                                  exception: Any = None) -> None:  # fmt: skip
            if exception is None:
                counter[0] += 1

    broker.add_middleware(Count())
    # Dramatiq's defaults (8 threads, prefetch 16); "1 thr": one thread, like the others.
    worker = Worker(broker, worker_threads=1 if system.endswith("1 thr") else 8)

    def dramatiq_loop() -> int:
        worker.start()
        broker.join("bench", interval=5)
        return counter[0]

    def stop() -> None:
        worker.stop()
        broker.close()

    dramatiq_loop.stop = stop  # type: ignore[attr-defined]
    return dramatiq_loop


def _child(system: str, url: str, tag: str, index: int, barrier: Any, results: Any) -> None:
    logging.getLogger("dramatiq").setLevel(logging.WARNING)
    try:
        loop = process(system, url, tag, index)
        barrier.wait()
        start, cpu = time.monotonic(), time.process_time()
        done = loop()
        end, cpu = time.monotonic(), time.process_time() - cpu
        results.put((start, end, done, cpu, None))
        stop = getattr(loop, "stop", None)
        if stop is not None:
            stop()
    except BaseException as exc:
        barrier.abort()
        results.put((0.0, 0.0, 0, 0.0, f"{type(exc).__name__}: {exc}"))


def server_cpu(url: str) -> float:
    """The Redis server's CPU time so far (seconds, its process's user and system time)."""
    r = redis.Redis.from_url(url)
    info = r.info("cpu")
    r.close()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_workers(system: str, url: str, tag: str, workers: int) -> tuple[int, float, Cost]:
    """Run ``workers`` processes of ``system`` until its jobs are done: the jobs they did, the
    time from the first start to the last end, and the CPU they and the server spent."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    results = context.Queue()
    children = [
        context.Process(target=_child, args=(system, url, tag, index, barrier, results))
        for index in range(workers)
    ]
    # The server's share from before the workers' setup to their end: the setup's few
    # commands (a connect, a warm-up run that finds no job) are in it, its run is not.
    server_before = server_cpu(url)
    try:
        reports = run_children(children, results)
    except RuntimeError as exc:
        raise RuntimeError(f"{system}: {exc}") from None
    server = server_cpu(url) - server_before
    start = min(report[0] for report in reports)
    end = max(report[1] for report in reports)
    client = sum(report[3] for report in reports)
    return sum(report[2] for report in reports), end - start, Cost(client, server)


# -- checks and cleanup ------------------------------------------------------------------


def rq_finished(url: str, tag: str) -> int:
    from rq import Queue

    connection = redis.Redis.from_url(url)
    queue = Queue(tag, connection=connection)
    finished, failed = queue.finished_job_registry.count, queue.failed_job_registry.count
    connection.close()
    if failed:
        raise SystemExit(f"benchmark bug: {failed} RQ jobs failed")
    return int(finished)


def check(system: str, url: str, tag: str, jobs: int, processed: int) -> None:
    if processed != jobs:
        raise SystemExit(f"benchmark bug: {system} processed {processed} of {jobs} jobs")
    if system.startswith("tenure"):
        with tenure.connect(tenure_url(url, tag)) as store:
            bad = [
                n
                for n in range(jobs)
                if (job := store.get(f"job-{n}")).state != "done" or job.generation != 1
            ]
        if bad:
            raise SystemExit(f"benchmark bug: {len(bad)} tenure jobs not done at generation 1")


def cleanup(url: str, tag: str, system: str) -> None:
    r = redis.Redis.from_url(url)
    patterns = {
        "tenure": ["{" + tag + "}:*"],
        "tenure batch": ["{" + tag + "}:*"],
        "tenure many": ["{" + tag + "}:*"],
        "tenure many connecting": ["{" + tag + "}:*"],
        "tenure Worker": ["{" + tag + "}:*"],
        "tenure Worker sync": ["{" + tag + "}:*"],
        "tenure batch sketch": ["{" + tag + "}:*"],
        "RQ": ["rq:*"],
        "Dramatiq": [tag + "*"],
        "Dramatiq 1 thr": [tag + "*"],
    }[system]
    for pattern in patterns:
        doomed = list(r.scan_iter(match=pattern, count=1000))
        for start in range(0, len(doomed), 1000):
            r.delete(*doomed[start : start + 1000])
    r.close()


def print_costs(label: str, costs: dict[str, list[Cost]], baseline: str) -> None:
    """CPU per job, medians over the runs: the worker processes' (from their release to
    their end, every thread of theirs) and the server's, with the client's against
    ``baseline``'s: what the runtime costs per job at this process count."""
    medians = {
        system: Cost(
            statistics.median(cost.client for cost in runs),
            statistics.median(cost.server for cost in runs),
        )
        for system, runs in costs.items()
    }
    width = max(12, *(len(system) + 1 for system in medians))
    print(f"\nCPU per job, {label} (median; us)")
    print(f"  {'':<{width}}{'client':>9}{'server':>9}   client / {baseline}")
    base = medians[baseline].client
    for system, cost in medians.items():
        versus = "(baseline)" if system == baseline else f"{cost.client / base:.2f}x"
        print(f"  {system:<{width}}{cost.client:>9.1f}{cost.server:>9.1f}   {versus}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/13", help="Redis server")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per run (default 2000)")
    parser.add_argument("--repeat", type=int, default=3, help="measured runs per system")
    parser.add_argument("--workers", default="1,4", help="worker processes (default 1,4)")
    parser.add_argument("--batch", type=int, default=BATCH, help="tenure claim_many size")
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="comma-separated, of: " + ", ".join(SYSTEMS) + " (default all)",
    )
    args = parser.parse_args(argv)
    globals()["BATCH"] = args.batch
    worker_counts = [int(part) for part in args.workers.split(",") if part]
    systems = [system for system in args.systems.split(",") if system]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s): {', '.join(unknown)}")
    tenure_rows = [system for system in systems if system in TENURE]
    logging.getLogger("dramatiq").setLevel(logging.WARNING)

    import dramatiq
    import rq

    r = redis.Redis.from_url(args.url)
    version = r.info("server")["redis_version"]
    r.close()
    print(
        f"redis_brokers: enqueue -> process, {args.jobs} jobs per run, {args.repeat} runs per "
        f"system (+1 warm-up), tenure {tenure.__version__}, RQ {rq.__version__}, "
        f"Dramatiq {dramatiq.__version__}"
    )
    print(f"{machine_line()}, Redis {version}, redis-py {redis.__version__}")
    summary = []
    for workers in worker_counts:
        enqueued = {system: Result(system) for system in systems}
        processed = {system: Result(system) for system in systems}
        costs: dict[str, list[Cost]] = {system: [] for system in systems}
        for rep in range(1 + args.repeat):
            order = list(systems) if rep % 2 == 0 else list(reversed(systems))
            for system in order:
                tag = f"bench-{uuid.uuid4().hex[:10]}"
                try:
                    loop = enqueue(system, args.url, tag, args.jobs)
                    start = time.perf_counter()
                    loop()
                    enqueue_seconds = time.perf_counter() - start
                    done, seconds, cost = run_workers(system, args.url, tag, workers)
                    if system == "RQ":
                        done = rq_finished(args.url, tag)
                    check(system, args.url, tag, args.jobs, done)
                finally:
                    cleanup(args.url, tag, system)
                if rep:  # the first round warms up
                    enqueued[system].rates.append(args.jobs / enqueue_seconds)
                    processed[system].rates.append(done / seconds)
                    costs[system].append(Cost(cost.client / done * 1e6, cost.server / done * 1e6))
        label = "1 worker process" if workers == 1 else f"{workers} worker processes"
        # The ratios are to the `tenure` row, or to the run's first system without it.
        baseline = "tenure" if "tenure" in systems else systems[0]
        print_report("enqueue, 1 producer", list(enqueued.values()), baseline, unit="jobs/s")
        ratios = print_report(
            f"process, {label}", list(processed.values()), baseline, unit="jobs/s"
        )
        print_costs(label, costs, baseline)
        best = max(processed, key=lambda s: statistics.median(processed[s].rates))
        rivals = [s for s in systems if s not in tenure_rows]
        if not rivals:  # tenure's rows only: the report above is the whole answer
            summary.append(f"{workers}w: fastest {best}; no rival in --systems")
            continue
        rival = max(rivals, key=lambda s: statistics.median(processed[s].rates))
        summary.append(
            f"{workers}w: fastest {best}; "
            + ", ".join(
                f"{mine} / {rival} (fastest rival) = {ratios[mine] / ratios[rival]:.2f}x "
                f"(paired {statistics.median(processed[mine].paired(processed[rival])):.2f}x)"
                for mine in tenure_rows
            )
        )
    print("\n" + "\n".join(summary))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
