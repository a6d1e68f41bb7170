"""`run_chaos`: one chaos run, from submitting the jobs to the verdict and the report.

0. With the store faults (``store-restart``, ``store-kill``, ``failover``) on PostgreSQL or
   Redis, start a store server of the run's own (tenure.chaos._servers): the run's store is
   on it, with the options of the URL given, and it is removed at the end. ``failover``
   (PostgreSQL only) adds a streaming replica and a multi-host URL naming both.
1. Submit the jobs (one queue of the run's own, so the store may hold other work). With
   ``workload="locks"`` there are no jobs: the lock takers take one lock of the run's own
   (tenure.chaos._lock_mode). With ``workload="flow"`` the jobs carry priorities and some a
   short timeout of their own, over four queues, two of them limited through the store
   and one rate-limited (tenure.chaos._flow_mode).
2. Start the reference fenced sink (``tenure sink serve``), a TCP proxy in front of a
   server store, the worker processes (`tenure.Worker`), the storm claimers and, for
   SQLite, the lock holder.
3. Run the nemesis for ``duration`` seconds (or until every job has ended); a supervisor
   restarts killed workers as new processes.
4. Heal everything, let the workers drain the queue, stop them (SIGTERM), record every
   job's final state and the sink's ledger, merge the histories, check, report.

Everything lands in ``out``: ``history.jsonl``, ``schedule.json``, ``config.json``,
``report.html`` / ``report.png``, ``sink.db``, ``logs/``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from .._store import Store, connect
from ..errors import InvalidArgument, TenureError
from ..locks import lock_ids
from ._backend import UNSAFE_MODES, chaos_url, install
from ._checker import Verdict, check_history
from ._flow_mode import FlowJob, flow_limits, flow_plan, flow_queues, flow_rates
from ._history import Recorder, merge_histories, read_history
from ._ledger import record_sink
from ._lock_mode import WORKLOADS, check_lock_options, lock_kinds
from ._nemesis import KINDS, STORE_FAULTS, Fault, Nemesis, make_schedule
from ._processes import Echo, Processes
from ._report import run_origin, write_report
from ._servers import OwnedServer, missing_binaries
from ._target import FaultTarget

__all__ = [
    "ChaosOptions",
    "ChaosResult",
    "run_chaos",
    "schedule_for",
    "store_kind",
]


@dataclass
class ChaosOptions:
    """What `run_chaos` does (the options of ``tenure chaos``)."""

    store_url: str
    workers: int = 4
    jobs: int = 200
    ttl: float = 2.0
    duration: float = 20.0
    seed: int = 0
    unsafe: str | None = None
    out: Path = field(default_factory=lambda: Path("tenure-chaos"))
    concurrency: int = 4
    fault_interval: float = 2.0
    storm: int = 6
    work: float = 0.2
    long_jobs: float = 0.1
    drain_timeout: float = 120.0
    faketime: bool = True
    kinds: tuple[str, ...] | None = None
    png: bool = True
    chromium: str | None = None  # the browser for the PNG (default: found on PATH)
    workload: str = "jobs"  # "locks": processes taking one named lock; "flow": priorities,
    # limits and timeouts (tenure.chaos._flow_mode)

    def check(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"--workload must be one of {', '.join(WORKLOADS)}")
        if self.workload == "locks":
            check_lock_options(self.kinds, self.unsafe)
        if self.unsafe is not None and self.unsafe not in UNSAFE_MODES:
            raise ValueError(f"--unsafe must be one of {', '.join(UNSAFE_MODES)}")
        if self.kinds is not None:
            unknown = sorted(set(self.kinds) - set(KINDS))
            if unknown:
                raise ValueError(f"unknown fault kinds: {', '.join(unknown)}")
        self._check_store_faults()

    @property
    def store_faults(self) -> tuple[str, ...]:
        """The store faults named in ``kinds`` (never in the default mix)."""
        return tuple(kind for kind in STORE_FAULTS if kind in (self.kinds or ()))

    def _check_store_faults(self) -> None:
        faults = self.store_faults
        if not faults:
            return
        kind = store_kind(self.store_url)
        if kind == "sqlite" and "store-restart" in faults:
            raise InvalidArgument(
                "--faults",
                "store-restart does not apply to SQLite: there is no server to stop and "
                "start, every process opens the file itself (a writer stalled holding the "
                "lock is store-pause; store-kill kills a writer -9 mid-transaction and "
                "opens the file again)",
            )
        if "failover" in faults and kind != "postgres":
            raise InvalidArgument(
                "--faults",
                f"failover applies to PostgreSQL stores only (this store is {kind}): the run "
                "builds its own primary and streaming replica and promotes the replica; "
                "leave failover out",
            )
        missing = missing_binaries(kind)
        if missing is not None:
            raise InvalidArgument(
                "--faults",
                f"{', '.join(faults)} on {kind}: the store must run on a {kind} server of "
                f"the run's own (chaos never restarts the --store server), and {missing}; "
                f"install it or leave {', '.join(faults)} out",
            )


@dataclass
class ChaosResult:
    verdict: Verdict
    history: Path
    report: Path
    png: Path | None


def store_kind(url: str) -> str:
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgres"
    if scheme in ("redis", "rediss"):
        return "redis"
    raise ValueError(f"tenure chaos does not know the store {scheme}://")


def schedule_for(options: ChaosOptions) -> list[Fault]:
    return make_schedule(
        options.seed,
        store=store_kind(options.store_url),
        workers=options.workers,
        ttl=options.ttl,
        duration=options.duration,
        interval=options.fault_interval,
        kinds=options.kinds if options.workload != "locks" else lock_kinds(options.kinds),
    )


class Harness:
    """One run: its ids, its history recorder and store clients, its processes and the
    nemesis's target on them, and its jobs in the store."""

    def __init__(self, options: ChaosOptions, echo: Echo) -> None:
        self.o = options
        self.echo = echo
        self.kind = store_kind(options.store_url)
        self.out = options.out
        self.run_id = f"{options.seed}-{os.getpid()}-{int(time.time()) % 100000}"
        self.queue = f"chaos-{self.run_id}"
        self.job_ids = [f"chaos-{self.run_id}-{i:05d}" for i in range(1, options.jobs + 1)]
        self.locks = options.workload == "locks"
        self.lock = f"chaos-{self.run_id}"
        if self.locks:  # the lock's job is the run's only job, in the lock's own queue
            job_id, self.queue = lock_ids(self.lock)
            self.job_ids = [job_id]
        self.flow = options.workload == "flow"
        self.queues = flow_queues(self.queue) if self.flow else [self.queue]
        self.fed = threading.Event()  # every job submitted, or the feeder gave up
        # Set by the wind-down when the feeder outlasts its bound (and at shutdown): a retry
        # loop behind a store that never frees must not keep the run from its verdict.
        self.halt_feed = threading.Event()
        self.submitted = 0
        for sub in ("history", "ctl", "logs"):
            (self.out / sub).mkdir(parents=True, exist_ok=True)
        self.rec = Recorder(self.out / "history" / "harness.jsonl", "harness")
        install(self.rec)
        self.processes = Processes(options, echo, self.kind, self.queue, self.rec)
        self.processes.lock_name = self.lock if self.locks else None
        self.processes.queues = self.queues
        self.store: Store = connect(chaos_url(options.store_url))
        self.side: Store = connect(options.store_url)  # the nemesis thread's own client
        self.control: Store = connect(chaos_url(options.store_url))  # cancels, requeues
        self.target = FaultTarget(self.processes, self.side, self.control)

    # -- the jobs ------------------------------------------------------------------------

    def _work(self) -> dict[str, float]:
        """Each job's handler time, from the seed: mostly short, some over several TTLs."""
        rng = random.Random(f"tenure-chaos-work:{self.o.seed}")
        work = {}
        for job_id in self.job_ids:
            if rng.random() < self.o.long_jobs:
                seconds = rng.uniform(1.0, 2.5) * self.o.ttl
            else:
                seconds = rng.uniform(0.02, max(0.02, self.o.work))
            work[job_id] = round(seconds, 3)
        return work

    def _plan(self) -> dict[str, FlowJob]:
        """How each job is submitted: in the run's queue with its work, or (a flow run)
        over the flow's queues with priorities and timeouts."""
        work = self._work()
        if self.flow:
            return flow_plan(self.o.seed, work, self.queue, self.o.ttl)
        return {job_id: FlowJob(self.queue, payload={"work": w}) for job_id, w in work.items()}

    def set_limits(self) -> None:
        """A flow run's queue limits and rates, set through the store and recorded."""
        if not self.flow:
            return
        for queue, limit in flow_limits(self.queue).items():
            self.store.set_queue_limit(queue, limit)
            self.rec.event("queue-limit", queue=queue, limit=limit)
        for queue, (per_second, burst) in flow_rates(self.queue).items():
            self.store.set_queue_rate(queue, per_second, burst=burst)
            self.rec.event("queue-rate", queue=queue, per_second=per_second, burst=burst)

    def submit(self, over: float) -> None:
        """Submit a first batch now and the rest evenly over ``over`` seconds (on a thread
        with a store of its own), so that the workers have work all through the faults.
        A locks run submits nothing (the lock takers create the lock's job)."""
        if self.locks:
            self.fed.set()
            return
        plan = self._plan()
        first = min(len(self.job_ids), self.o.workers * self.o.concurrency * 3)
        for job_id in self.job_ids[:first]:
            _submit(self.store, job_id, plan[job_id])
            self.submitted += 1
        rest = self.job_ids[first:]
        if not rest:
            self.fed.set()
            return

        def halted() -> bool:
            return self.halt_feed.is_set() or self.processes.stopping

        def feed() -> None:
            store = connect(chaos_url(self.o.store_url))
            try:
                start = time.monotonic()
                for n, job_id in enumerate(rest, 1):
                    delay = start + over * n / len(rest) - time.monotonic()
                    if halted() or self.halt_feed.wait(max(0.0, delay)):
                        return
                    for _ in range(20):
                        try:
                            _submit(store, job_id, plan[job_id])
                            self.submitted += 1
                            break
                        except TenureError:
                            self.halt_feed.wait(0.5)  # a store pause: submit is idempotent
                            if halted():
                                return
            finally:
                store.close()
                self.fed.set()

        self.processes.in_thread(feed, "tenure-chaos-feeder")

    def calibrate(self) -> None:
        host = self.rec.now()
        store_now = self.store.now()
        self.rec.event("calibrate", host=host, store_now=store_now, offset=store_now - host)

    def counts(self) -> dict[str, int]:
        found = {}
        for state in ("ready", "leased"):
            found[state] = sum(
                len(self.store.jobs(queue=queue, state=state, limit=1000)) for queue in self.queues
            )
        return found

    def wait_until_fed(self, timeout: float) -> bool:
        """Whether the feeder submitted every job within ``timeout`` seconds. Stopped
        processes are resumed meanwhile: a worker that reached a point armed before the
        heal can stop itself just after the heal's resume pass, and on SQLite one stopped
        holding the write lock makes every submit wait out the store's busy timeout (20
        tries a job)."""
        deadline = time.monotonic() + timeout
        while True:
            self.processes.resume_stopped()
            if self.fed.wait(min(0.25, max(0.0, deadline - time.monotonic()))):
                return True
            if time.monotonic() >= deadline:
                return False

    def wait_until_drained(self, timeout: float) -> bool:
        """Whether the queue drained within ``timeout`` seconds (looked at least once)."""
        deadline = time.monotonic() + timeout
        last = 0.0
        while True:
            self.processes.resume_stopped()
            try:
                counts: dict[str, int] | None = self.counts()
            except TenureError:
                counts = None
            if counts is not None and counts["ready"] == 0 and counts["leased"] == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            if counts is not None and time.monotonic() - last > 10:
                last = time.monotonic()
                self.echo(f"  draining: {counts['ready']} ready, {counts['leased']} leased")
            time.sleep(0.25 if counts is not None else 0.5)

    def all_ended(self) -> bool:
        if self.locks:  # a lock is taken until the run's end
            return False
        try:
            counts = self.counts()
        except TenureError:
            return False
        return counts["ready"] == 0 and counts["leased"] == 0

    def record_finals(self) -> dict[str, int]:
        states: dict[str, int] = {}
        for job_id in self.job_ids:
            try:
                job = self.store.get(job_id)
            except TenureError as exc:
                self.rec.event("final", job=job_id, state="unknown", error=str(exc))
                continue
            states[job.state] = states.get(job.state, 0) + 1
            self.rec.event(
                "final",
                job=job_id,
                state=job.state,
                gen=job.generation,
                owner=job.owner,
                attempts=job.attempts,
                max_attempts=job.max_attempts,
                queue=job.queue,
                result=job.result,
                store_now=job.as_of,
            )
        return states

    def shutdown(self) -> None:
        """Stop every process this run started (also after an error)."""
        self.halt_feed.set()
        self.processes.stop()
        with contextlib.suppress(Exception):
            self.target.heal()
        self.processes.shutdown()
        with contextlib.suppress(Exception):
            self.store.close()
        with contextlib.suppress(Exception):
            self.side.close()
        with contextlib.suppress(Exception):
            self.control.close()
        self.processes.close_logs()


def _submit(store: Store, job_id: str, job: FlowJob) -> None:
    store.submit(
        job_id,
        job.payload,
        queue=job.queue,
        max_attempts=50,
        priority=job.priority,
        timeout=job.timeout,
    )


def _print(text: str) -> None:
    # Flushed: the run's progress must show while it goes, also through a pipe (a run
    # that hangs otherwise shows nothing of where it stopped).
    print(text, flush=True)


def run_chaos(options: ChaosOptions, echo: Echo = _print) -> ChaosResult:
    """Run one chaos run (see the module docstring); the verdict is in the result."""
    options.check()
    schedule = _fresh_out(options)
    given_url = options.store_url
    with _process_log(options.out):
        server = _own_server(options, echo)
        if server is not None:
            options = replace(options, store_url=server.url)
        try:
            _run(options, echo, schedule, given_url, server)
        finally:
            if server is not None:
                server.close(options.out / "logs")
    return _result(options)


def _run(
    options: ChaosOptions,
    echo: Echo,
    schedule: list[Fault],
    given_url: str,
    server: OwnedServer | None,
) -> None:
    """The run itself, from starting its processes to recording the sink's ledger."""
    harness = Harness(options, echo)
    harness.processes.server = server
    nemesis_rec = Recorder(options.out / "history" / "nemesis.jsonl", "nemesis")
    harness.rec.event(
        "config",
        **{k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()},
        store=harness.kind,
        queue=harness.queue,
        faults_scheduled=len(schedule),
        given_store_url=given_url,
        store_server=server.addresses if server is not None else None,
    )
    started = time.monotonic()
    try:
        nemesis = _start(harness, schedule, nemesis_rec)
        _under_faults(harness, nemesis, len(schedule))
        _wind_down(harness, nemesis, len(schedule))
    finally:
        harness.shutdown()
    record_sink(options.out / "sink.db", harness.rec)
    harness.rec.event("run-end", seconds=round(time.monotonic() - started, 3))
    harness.rec.close()
    nemesis_rec.close()


@contextlib.contextmanager
def _process_log(out: Path) -> Iterator[None]:
    """While the run goes, the log lines of this process's own store clients (``tenure``,
    ``psycopg``: a store outage makes them warn) go to ``logs/harness.log``, not the
    terminal, beside the workers' logs."""
    (out / "logs").mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / "logs" / "harness.log")
    handler.setFormatter(
        logging.Formatter("%(asctime)s harness %(levelname)s %(name)s: %(message)s")
    )
    loggers = [logging.getLogger(name) for name in ("tenure", "psycopg")]
    propagate = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, before in zip(loggers, propagate, strict=True):
            logger.removeHandler(handler)
            logger.propagate = before
        handler.close()


def _own_server(options: ChaosOptions, echo: Echo) -> OwnedServer | None:
    """The store server of the run's own, started, when its store faults need one."""
    kind = store_kind(options.store_url)
    if not options.store_faults or kind == "sqlite":
        return None
    failover = "failover" in options.store_faults
    server = OwnedServer(kind, options.store_url, replica=failover)
    try:
        server.start()
    except BaseException:
        server.close(options.out / "logs")
        raise
    echo(
        f"  {', '.join(options.store_faults)}: the store runs on a {kind} server of the "
        f"run's own, {server.address} (removed at the end; --store gave its kind and options)"
        + (f"; its streaming replica 127.0.0.1:{server.replica.port}" if server.replica else "")
    )
    return server


def _fresh_out(options: ChaosOptions) -> list[Fault]:
    """The output folder emptied of a previous run's files; the schedule written in it."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    # A previous run in the same directory must not leak into this one (its control files
    # would look like hits of this run's armed points, its sink records like its writes).
    for sub in ("history", "ctl", "logs"):
        if (out / sub).is_dir():
            shutil.rmtree(out / sub)
    for name in ("sink.db", "sink.db-wal", "sink.db-shm", "history.jsonl"):
        (out / name).unlink(missing_ok=True)
    schedule = schedule_for(options)
    (out / "schedule.json").write_text(
        json.dumps([f.as_json() for f in schedule], indent=1), encoding="utf-8"
    )
    return schedule


def _start(harness: Harness, schedule: list[Fault], nemesis_rec: Recorder) -> Nemesis:
    """Every process of the run started, the jobs being fed, the nemesis started."""
    options, echo, processes = harness.o, harness.echo, harness.processes
    what = (
        f"one lock ({harness.lock}) on {harness.kind} ({options.store_url}), "
        f"{options.workers} lock takers"
        if harness.locks
        else f"{options.jobs} jobs on {harness.kind} ({options.store_url}), "
        f"{options.workers} workers x {options.concurrency}"
    )
    if harness.flow:
        limits = ", ".join(
            [f"{q} at most {n}" for q, n in flow_limits(harness.queue).items()]
            + [
                f"{q} at most {rate:g}/s (burst {burst})"
                for q, (rate, burst) in flow_rates(harness.queue).items()
            ]
        )
        what += f"; priorities -2..2, some jobs with a timeout of their own; limits: {limits}"
    echo(
        f"chaos: {what}, ttl {options.ttl:g} s, "
        f"seed {options.seed}" + (f", UNSAFE {options.unsafe}" if options.unsafe else "")
    )
    processes.start_sink()
    processes.start_proxy()
    processes.write_config()
    processes.start_locker()
    if not harness.locks:
        processes.spawn_storms()
    harness.calibrate()
    harness.set_limits()
    harness.submit(over=options.duration * 0.8)
    processes.spawn_workers()
    processes.wait_ready()
    echo(
        f"  sink {processes.sink_url}; {len(schedule)} faults over {options.duration:g} s"
        + (f" (proxy :{processes.proxy.port})" if processes.proxy else "")
    )
    nemesis = Nemesis(schedule, harness.target, nemesis_rec)
    nemesis.start()
    return nemesis


def _under_faults(harness: Harness, nemesis: Nemesis, scheduled: int) -> None:
    """Until the run's duration is over, or every job has ended once all were submitted."""
    end = nemesis.start_time + harness.o.duration
    last = time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.25)
        if time.monotonic() - last >= 10:
            last = time.monotonic()
            harness.echo(
                f"  t={last - nemesis.start_time:.0f} s: {nemesis.injected_count()} of "
                f"{scheduled} faults injected so far"
            )
        if harness.fed.is_set() and harness.all_ended():
            harness.echo("  every job has ended: stopping the faults early")
            break


def _wind_down(harness: Harness, nemesis: Nemesis, scheduled: int) -> None:
    """Faults stopped and healed, the queue drained, the workers stopped, the final states
    recorded. Feeding and draining share ``drain_timeout``; past it the run goes on to
    stop the workers and record what the store holds, for the checker to judge."""
    echo, timeout = harness.echo, harness.o.drain_timeout
    nemesis.stop()
    nemesis.heal()
    harness.target.heal()
    drained_by = time.monotonic() + timeout
    if not harness.wait_until_fed(timeout):
        harness.halt_feed.set()
        echo(
            f"  jobs still being submitted after {timeout:g} s ({harness.submitted} of "
            f"{len(harness.job_ids)} submitted): feeding stopped"
        )
    if harness.locks:
        # No queue to drain: the takers go on holding the lock a while with no faults (the
        # lock must still be taken once they stopped), then release it as they stop.
        time.sleep(min(2 * harness.o.ttl, 3.0))
        harness.processes.resume_stopped()
    elif not harness.wait_until_drained(max(0.0, drained_by - time.monotonic())):
        echo(f"  not drained after {timeout:g} s: the checker will say which")
    harness.calibrate()
    harness.processes.stop_workers()
    # After the last worker start (a killed worker restarted while draining counts too).
    for line in _fault_summary(nemesis, scheduled, harness.processes.started_skewed):
        echo(line)
    states = harness.record_finals()
    echo("  final states: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))


def _result(options: ChaosOptions) -> ChaosResult:
    """The histories merged, checked and drawn."""
    out = options.out
    history = out / "history.jsonl"
    merge_histories(sorted((out / "history").glob("*.jsonl")), history)
    events = list(read_history(history))
    verdict = check_history(events)
    report, png = write_report(
        verdict,
        out / "report.html",
        png=options.png,
        origin=run_origin(events),
        browser=options.chromium,
    )
    return ChaosResult(verdict, history, report, png)


def _fault_summary(nemesis: Nemesis, scheduled: int, skewed_starts: int) -> list[str]:
    """How many scheduled faults were injected, and why each other one was not; the
    faults outside the schedule are counted too, so the total is the checker's."""
    missing = nemesis.not_injected()
    line = f"  faults: {scheduled - len(missing)} of {scheduled} scheduled injected"
    if nemesis.followups:
        line += f", plus {nemesis.followups} claim storm(s) on paused workers' jobs"
    if skewed_starts:
        line += f", plus {skewed_starts} worker(s) started with a clock off (faketime/unsafe)"
    lines = [line + (":" if missing else "")]
    lines += [f"    not injected: {f.kind} at {f.at:g} s: {why}" for f, why in missing]
    return lines
