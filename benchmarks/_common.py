"""Helpers shared by the benchmark scripts (``benchmarks/<store>_<workload>.py``).

Method (see docs/benchmarks.md): every benchmark measures tenure *and* the raw driver doing
the same statements in the same run, interleaved so that machine noise (other tenants, disk
flushes, CPU frequency) hits both sides alike, and reports the ratio. Absolute numbers on a
shared 2-core machine are noise; the ratio is the figure.

Two ways to interleave:

* `interleave_chunks` (one process): both sides are open at once, each on its own copy of
  the data, and take turns running ``chunk`` operations (A B, B A, A B, ...) until both
  are drained; that is one repetition. A noise burst lasting longer than a chunk or two
  hits both sides, so the per-repetition ratio is steady even on a busy machine.
* `contend_chunks` (several processes): the same turns, each process running its chunk
  at once on the same side's data (a barrier releases them together), so that during a
  turn the processes contend with each other on one side only.

`interleave` (whole runs alternating, A B, B A, ...) with `contend` (one whole run in
several processes) is the coarser form, for workloads that cannot be cut into turns.

Reuse from another script::

    from _common import Side, contend_chunks, interleave_chunks, print_report

``benchmarks/`` is not a package: a script run as ``python benchmarks/x.py`` has this
directory on ``sys.path``, so ``import _common`` works, in spawned child processes too.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "Case",
    "Cycles",
    "Result",
    "Runner",
    "Side",
    "contend",
    "contend_chunks",
    "fresh_store",
    "interleave",
    "interleave_chunks",
    "machine_line",
    "print_report",
    "run_children",
    "timed",
]


class Runner(Protocol):
    """One side's open connection(s)."""

    def step(self, limit: int) -> int:
        """Run up to ``limit`` operations; returning fewer means the data is used up."""
        ...

    def close(self) -> None: ...


@dataclass
class Side:
    """A side for `interleave_chunks`. ``open()`` does the untimed setup (a fresh copy of
    the data, connections) and returns the runner and a ``verify(done)`` to call once the
    runner is closed: it checks the data ended as ``done`` operations should leave it and
    cleans up, so that a broken loop cannot pass for a fast one."""

    name: str
    open: Callable[[], tuple[Runner, Callable[[int], None]]]


@dataclass
class Case:
    """A side for `interleave`: ``run()`` prepares, times and returns ``(operations,
    seconds)``; it does its own untimed setup so that only the measured part is timed."""

    name: str
    run: Callable[[], tuple[int, float]]


@dataclass
class Result:
    name: str
    rates: list[float] = field(default_factory=list)  # operations per second, per repetition

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    def paired(self, baseline: Result) -> list[float]:
        """This result's rate over ``baseline``'s, repetition by repetition (both measured
        in the same window): the least noisy comparison on a busy machine."""
        return [mine / theirs for mine, theirs in zip(self.rates, baseline.rates, strict=True)]


def timed(loop: Callable[[], int]) -> tuple[int, float]:
    """Run ``loop`` (which returns how many operations it did) and time it."""
    start = time.perf_counter()
    done = loop()
    return done, time.perf_counter() - start


def interleave_chunks(
    sides: Sequence[Side], repeat: int, *, chunk: int = 100, warmup: int = 1
) -> list[Result]:
    """Per repetition: open every side, then let them take turns running ``chunk``
    operations, the order flipping every turn, until each is used up. A side's rate is its
    operations over the sum of its own turns' times. ``warmup`` repetitions are discarded."""
    results = [Result(side.name) for side in sides]
    for rep in range(warmup + repeat):
        opened = [side.open() for side in sides]
        runners = [runner for runner, _ in opened]
        done = [0] * len(sides)
        spent = [0.0] * len(sides)
        live = list(range(len(sides)))
        turn = 0
        while live:
            for index in live if turn % 2 == 0 else live[::-1]:
                start = time.perf_counter()
                ran = runners[index].step(chunk)
                spent[index] += time.perf_counter() - start
                done[index] += ran
                if ran < chunk:
                    live = [other for other in live if other != index]
            turn += 1
        for index, (runner, verify) in enumerate(opened):
            runner.close()
            verify(done[index])
            if rep >= warmup:
                results[index].rates.append(done[index] / spent[index])
    return results


def interleave(cases: Sequence[Case], repeat: int, *, warmup: int = 1) -> list[Result]:
    """Run every case ``repeat`` times, alternating the order each repetition (ABBA...);
    ``warmup`` extra repetitions run first and are discarded."""
    results = [Result(case.name) for case in cases]
    for rep in range(warmup + repeat):
        order = list(zip(cases, results, strict=True))
        if rep % 2:
            order.reverse()
        for case, result in order:
            operations, seconds = case.run()
            if rep >= warmup:
                result.rates.append(operations / seconds)
    return results


# -- several processes -------------------------------------------------------------------

# A worker factory runs in the child: ``factory(index, *args)`` does the untimed setup (open
# connections) and returns the loop to time, which returns how many operations it did.
WorkerFactory = Callable[..., Callable[[], int]]


def _child(
    factory: WorkerFactory,
    args: tuple[Any, ...],
    index: int,
    barrier: Any,
    results: Any,
) -> None:
    try:
        loop = factory(index, *args)
        barrier.wait()
        start = time.monotonic()
        done = loop()
        end = time.monotonic()
        results.put((index, start, end, done, None))
    except BaseException as exc:  # report, don't leave the parent waiting on the barrier
        barrier.abort()
        results.put((index, 0.0, 0.0, 0, f"{type(exc).__name__}: {exc}"))


def run_children(children: Sequence[Any], queue: Any) -> list[Any]:
    """Start the child processes, collect one report from each (its last field an error
    message or None), join them; raise if any failed."""
    for child in children:
        child.start()
    reports = [queue.get() for _ in children]
    for child in children:
        child.join()
    errors = [report[-1] for report in reports if report[-1]]
    if errors:
        raise RuntimeError(f"benchmark worker failed: {errors[0]}")
    return reports


def contend(factory: WorkerFactory, processes: int, *args: Any) -> tuple[int, float]:
    """Run ``processes`` OS processes at once, each running ``factory(index, *args)()``,
    released together by a barrier after their setup. Returns the total operations and the
    wall time from the first start to the last finish (aggregate throughput = ops / time).

    ``factory`` must be a module-level function (it is pickled into spawned children)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    queue = context.Queue()
    children = [
        context.Process(target=_child, args=(factory, args, index, barrier, queue))
        for index in range(processes)
    ]
    reports = run_children(children, queue)
    start = min(report[1] for report in reports)
    end = max(report[2] for report in reports)
    return sum(report[3] for report in reports), end - start


# A runner factory runs in each child: ``factory(index, side, *args)`` opens that side
# (untimed) and returns its `Runner`. Module-level, so that it can be pickled.
RunnerFactory = Callable[..., Runner]


def _turns_child(
    factory: RunnerFactory,
    sides: Sequence[str],
    turns: int,
    chunk: int,
    args: tuple[Any, ...],
    index: int,
    barrier: Any,
    results: Any,
) -> None:
    log: list[tuple[int, int, float, float, int]] = []
    try:
        runners = [factory(index, side, *args) for side in sides]
        for turn in range(turns):
            order = range(len(sides)) if turn % 2 == 0 else range(len(sides) - 1, -1, -1)
            for which in order:
                barrier.wait()
                start = time.monotonic()
                ran = runners[which].step(chunk)
                log.append((turn, which, start, time.monotonic(), ran))
        for runner in runners:
            runner.close()
        results.put((index, log, None))
    except BaseException as exc:  # report, don't leave the others waiting on the barrier
        barrier.abort()
        results.put((index, log, f"{type(exc).__name__}: {exc}"))


def contend_chunks(
    factory: RunnerFactory,
    processes: int,
    sides: Sequence[str],
    operations: int,
    chunk: int,
    *args: Any,
) -> list[tuple[int, float]]:
    """`interleave_chunks` for ``processes`` contending OS processes, one repetition.

    Every process opens every side (``factory(index, side, *args)``; each side has its own
    data, shared by the processes). Then, turn by turn, all processes are released together
    by a barrier to run ``chunk`` operations each on one side, then on the next (order
    flipping every turn): during a turn the processes contend on one side's data only. A
    turn's time runs from the first process's start to the last one's finish. Enough turns
    run to use up ``operations`` (plus one, which finds the data used up). Returns, per
    side, (operations, seconds): aggregate throughput is their quotient."""
    turns = -(-operations // (processes * chunk)) + 1
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    queue = context.Queue()
    children = [
        context.Process(
            target=_turns_child,
            args=(factory, tuple(sides), turns, chunk, args, index, barrier, queue),
        )
        for index in range(processes)
    ]
    reports = run_children(children, queue)
    windows: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
    for _, log, _ in reports:
        for turn, which, start, end, ran in log:
            windows.setdefault((turn, which), []).append((start, end, ran))
    totals = [(0, 0.0)] * len(sides)
    for (_, which), spans in windows.items():
        done, seconds = totals[which]
        elapsed = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
        totals[which] = (done + sum(ran for *_, ran in spans), seconds + elapsed)
    return totals


# -- reporting ---------------------------------------------------------------------------


def burst_run(
    worker: Any, queue: str, work: Callable[[Any], object], *, sync: bool = False
) -> Callable[[], int]:
    """Register ``work(ctx)`` as ``worker``'s handler of ``queue``, called from an ``async
    def`` handler (``sync``: ``work`` itself, a plain function the worker runs on its
    handler threads), and return the timed part: one burst run, answering the jobs it
    completed."""
    if sync:
        worker.register(queue, work)
    else:

        async def run_async(ctx: Any) -> None:
            work(ctx)

        worker.register(queue, run_async)

    def run() -> int:
        worker.run(burst=True, install_signal_handlers=False)
        return int(worker.stats()["completed"])

    return run


def warm_up_worker(url: str) -> None:
    """One untimed `tenure.Worker` burst run on a queue with no jobs, in a fresh benchmark
    process: the imports and first-call costs of a run (about 150 ms of CPU) are paid here,
    before the barrier, as the hand loops open their stores before it. The timed run still
    opens its own connections and threads."""
    import tenure

    worker = tenure.Worker(url, summary_every=0)

    @worker.handler("tenure-bench-warm-up")
    async def never(ctx: tenure.JobContext) -> None:
        raise AssertionError("the warm-up queue has no jobs")

    worker.run(burst=True, install_signal_handlers=False)


def table_updates(conn: Any, schema: str, table: str) -> tuple[int, int]:
    """``schema.table``'s updates and HOT updates so far (pg_stat_user_tables), read on the
    psycopg connection ``conn`` with a fresh statistics snapshot. Another backend's counts
    show once it has flushed them (PostgreSQL 15 and later flush lazily: see
    ``pg_stat_force_next_flush``)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
        " WHERE schemaname = %s AND relname = %s",
        (schema, table),
    ).fetchone()
    assert row is not None, f"{schema}.{table} has no statistics row"
    return int(row[0]), int(row[1])


def machine_line() -> str:
    return (
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )


def print_report(
    title: str,
    results: Sequence[Result],
    baseline: str,
    *,
    unit: str = "ops/s",
    out: Any = None,
) -> dict[str, float]:
    """Print median rates and each case's ratio to ``baseline``; returns the ratios.

    The ratio is median(case) / median(baseline). Each repetition also gives a paired
    ratio (case and baseline ran in the same window, so slow drifts cancel): their median
    and range are printed too, as a check on the headline and a look at the noise."""
    out = out or sys.stdout
    base = next(result for result in results if result.name == baseline)
    print(f"\n{title}", file=out)
    width = max(12, *(len(result.name) + 1 for result in results))  # names stay in a column
    print(
        f"  {'':<{width}}{'median ' + unit:>17}{'min':>9}{'max':>9}"
        f"   {'ratio':>6}   paired ratios: median [min-max]",
        file=out,
    )
    ratios: dict[str, float] = {}
    for result in results:
        ratio = result.median / base.median
        paired = result.paired(base)
        versus = (
            "(baseline)"
            if result is base
            else f"{ratio:6.1%}   {statistics.median(paired):.1%} "
            f"[{min(paired):.0%}-{max(paired):.0%}]"
        )
        print(
            f"  {result.name:<{width}}{result.median:>17,.0f}{min(result.rates):>9,.0f}"
            f"{max(result.rates):>9,.0f}   {versus}",
            file=out,
        )
        ratios[result.name] = ratio
    return ratios


def sqlite_clock_params() -> dict[str, object]:
    """What the SQLite driver passes to its clock.sql: the wall clock and (Linux) the boot
    clock, for the raw sqlite3 sides that run the driver's statements."""
    import tenure

    boot = tenure.SystemClock().boot()
    if boot is None:
        return {"host_now": time.time(), "boot_id": None, "boot_now": None}
    return {"host_now": time.time(), "boot_id": boot[0], "boot_now": boot[1]}


# -- tenure stores of their own ----------------------------------------------------------


class Cycles:
    """A `Runner` of ``claim_next`` + ``complete`` on one tenure store, ``limit`` cycles a
    step (``owner``'s leases, 60 s each)."""

    def __init__(self, store: Any, owner: str = "bench-worker") -> None:
        self.store = store
        self.owner = owner

    def step(self, limit: int) -> int:
        for done in range(limit):
            lease = self.store.claim_next(self.owner, 60)
            if lease is None:
                return done
            self.store.complete(lease)
        return limit

    def close(self) -> None:
        self.store.close()


def fresh_store(
    store: str, *, folder: str, pg: str, redis_url: str
) -> tuple[str, Callable[[], None], Callable[[], None]]:
    """A tenure URL of a store nobody else uses (``store``: sqlite, postgres or redis: a
    new file in ``folder``, a new schema on ``pg``, a new key prefix on ``redis_url``), and
    two calls: ``analyze()`` (PostgreSQL: VACUUM ANALYZE its jobs once filled; a no-op
    elsewhere) and ``drop()`` (remove the file, schema or keys)."""
    import uuid
    from pathlib import Path

    tag = uuid.uuid4().hex[:10]
    if store == "sqlite":
        path = Path(folder) / f"{tag}.db"
        return f"sqlite:///{path}", lambda: None, path.unlink
    if store == "postgres":
        import psycopg

        def sql(statement: str) -> None:
            with psycopg.connect(pg, autocommit=True) as conn:
                conn.execute(statement)

        url = f"{pg}{'&' if '?' in pg else '?'}schema=bench_{tag}"
        return (
            url,
            lambda: sql(f"VACUUM ANALYZE bench_{tag}.tenure_jobs"),
            lambda: sql(f"DROP SCHEMA bench_{tag} CASCADE"),
        )
    import redis

    def drop() -> None:
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match="{bench-" + tag + "}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()

    url = f"{redis_url}{'&' if '?' in redis_url else '?'}prefix=bench-{tag}"
    return url, lambda: None, drop
