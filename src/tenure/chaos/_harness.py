"""`run_chaos`: one chaos run, from submitting the jobs to the verdict and the report.

1. Submit the jobs (one queue of the run's own, so the store may hold other work).
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
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._connect import connect
from .._store import Store
from ..errors import TenureError
from ._backend import UNSAFE_MODES, chaos_url, install
from ._checker import Verdict, check_history
from ._history import Recorder, merge_histories, read_history
from ._nemesis import KINDS, Fault, Nemesis, is_stopped, make_schedule
from ._proxy import Proxy
from ._report import run_origin, write_report

__all__ = ["ChaosOptions", "ChaosResult", "run_chaos", "store_kind"]

Echo = Callable[[str], None]


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

    def check(self) -> None:
        if self.unsafe is not None and self.unsafe not in UNSAFE_MODES:
            raise ValueError(f"--unsafe must be one of {', '.join(UNSAFE_MODES)}")
        if self.kinds is not None:
            unknown = sorted(set(self.kinds) - set(KINDS))
            if unknown:
                raise ValueError(f"unknown fault kinds: {', '.join(unknown)}")


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
        kinds=options.kinds,
    )


def _proxied(url: str, port: int) -> str | None:
    """``url`` with its host and port replaced by the proxy's; None if it has no host."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass
class _Slot:
    number: int
    incarnation: int = 0
    process: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None

    @property
    def name(self) -> str:
        return f"w{self.number}.{self.incarnation}"


class Harness:
    """The processes of one run, and what the nemesis can do to them."""

    def __init__(self, options: ChaosOptions, echo: Echo) -> None:
        self.o = options
        self.echo = echo
        self.kind = store_kind(options.store_url)
        self.out = options.out
        self.run_id = f"{options.seed}-{os.getpid()}-{int(time.time()) % 100000}"
        self.queue = f"chaos-{self.run_id}"
        self.job_ids = [f"chaos-{self.run_id}-{i:05d}" for i in range(1, options.jobs + 1)]
        self._lock = threading.Lock()
        self._stopping = False
        self.slots = [_Slot(n) for n in range(1, options.workers + 1)]
        self.storms: list[subprocess.Popen[str]] = []
        self.locker: subprocess.Popen[str] | None = None
        self.sink: subprocess.Popen[str] | None = None
        self.sink_url = ""
        self.proxy: Proxy | None = None
        self.worker_url = options.store_url
        self.stopped_backends: set[int] = set()
        self._threads: list[threading.Thread] = []
        self.fed = threading.Event()  # every job submitted
        self._locker_busy = threading.Lock()
        self._logs: list[IO[bytes]] = []
        self._rng = random.Random(f"tenure-chaos-harness:{options.seed}")
        self.faketime = libfaketime() if options.faketime else None
        for sub in ("history", "ctl", "logs"):
            (self.out / sub).mkdir(parents=True, exist_ok=True)
        self.rec = Recorder(self.out / "history" / "harness.jsonl", "harness")
        # Workers started with a clock off (faketime, --unsafe client-clock): faults the
        # checker counts that are not in the schedule.
        self.started_skewed = 0
        install(self.rec)
        self.store: Store = connect(chaos_url(options.store_url))
        self.side: Store = connect(options.store_url)  # the nemesis thread's own client

    # -- setting up ----------------------------------------------------------------------

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

    def submit(self, over: float) -> None:
        """Submit a first batch now and the rest evenly over ``over`` seconds (on a thread
        with a store of its own), so that the workers have work all through the faults."""
        work = self._work()
        first = min(len(self.job_ids), self.o.workers * self.o.concurrency * 3)
        for job_id in self.job_ids[:first]:
            self.store.submit(job_id, {"work": work[job_id]}, queue=self.queue, max_attempts=50)
        rest = self.job_ids[first:]
        if not rest:
            self.fed.set()
            return

        def feed() -> None:
            store = connect(chaos_url(self.o.store_url))
            try:
                start = time.monotonic()
                for n, job_id in enumerate(rest, 1):
                    if self._stopping:
                        return
                    delay = start + over * n / len(rest) - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    for _ in range(20):
                        try:
                            store.submit(
                                job_id, {"work": work[job_id]}, queue=self.queue, max_attempts=50
                            )
                            break
                        except TenureError:
                            time.sleep(0.5)  # a store pause: submit is idempotent, retry
            finally:
                store.close()
                self.fed.set()

        thread = threading.Thread(target=feed, name="tenure-chaos-feeder", daemon=True)
        thread.start()
        self._threads.append(thread)

    def start_sink(self) -> None:
        db = self.out / "sink.db"
        log = open(self.out / "logs" / "sink.log", "wb")  # noqa: SIM115 - closed at the end
        self._logs.append(log)
        self.sink = subprocess.Popen(
            [*_python("tenure"), "sink", "serve", "--port", "0", "--db", str(db), "--json"],
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert self.sink.stdout is not None
        line = self.sink.stdout.readline()
        try:
            self.sink_url = json.loads(line)["url"]
        except (ValueError, KeyError, TypeError):
            raise RuntimeError(
                f"the fenced sink did not start (see {self.out / 'logs' / 'sink.log'}): "
                f"{line.strip()!r}"
            ) from None

    def start_proxy(self) -> None:
        if self.kind == "sqlite":
            return
        parts = urlsplit(self.o.store_url)
        if not parts.hostname:
            self.echo("no host in the store URL: no proxy, so no proxy faults")
            return
        default = 5432 if self.kind == "postgres" else 6379
        self.proxy = Proxy(parts.hostname, parts.port or default)
        proxied = _proxied(self.o.store_url, self.proxy.port)
        if proxied is not None:
            self.worker_url = proxied

    def write_config(self) -> Path:
        path = self.out / "config.json"
        config = {
            "out": str(self.out),
            "store_url": self.o.store_url,
            "worker_url": self.worker_url,
            "sink_url": self.sink_url,
            "queue": self.queue,
            "ttl": self.o.ttl,
            "concurrency": self.o.concurrency,
            "poll_interval": min(0.25, self.o.ttl / 4),
            "unsafe": self.o.unsafe,
        }
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        self.config_path = path
        return path

    def _log(self, name: str) -> IO[bytes]:
        log = open(self.out / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - closed at the end
        self._logs.append(log)
        return log

    def _spawn_worker(self, slot: _Slot) -> None:
        slot.incarnation += 1
        name = slot.name
        command = [*_python(PROC), "worker", str(self.config_path), name]
        env = dict(os.environ)
        if self.o.unsafe == "client-clock":
            # Unsafe: this worker's clock runs ahead, so live leases look expired to it.
            offset = round(self._rng.uniform(10.0, 60.0) * self.o.ttl, 3)
            self.set_control(name, clock={"offset": offset, "rate": 1.0}, arm=None)
            self.rec.event("fault", kind="skew", phase="start", target=name, offset=offset)
            self.started_skewed += 1
        elif self.faketime and self.kind != "sqlite" and slot.number % 2 == 0:
            # The whole process (libpq, redis-py) sees a clock minutes to an hour off. Not on
            # SQLite, whose store clock is the host clock of whichever process writes. The
            # library is preloaded directly (not through the faketime program, which would
            # stand between the nemesis's signals and the worker).
            offset = round(self._rng.choice((-1, 1)) * self._rng.uniform(60, 3600))
            env["LD_PRELOAD"] = " ".join(filter(None, [self.faketime, env.get("LD_PRELOAD")]))
            env["FAKETIME"] = f"{offset:+d}s"
            # Wall time only: with CLOCK_MONOTONIC faked too, Python's timed waits
            # (threading's Condition/Event.wait) never time out under libfaketime, and the
            # worker's renewer and watchdog would sleep until woken.
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            env["TENURE_CHAOS_TIME_OFFSET"] = str(offset)
            self.rec.event("fault", kind="faketime", phase="start", target=name, offset=offset)
            self.started_skewed += 1
        slot.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log(name),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        slot.restart_at = None

    def start_workers(self) -> None:
        for slot in self.slots:
            self._spawn_worker(slot)
        thread = threading.Thread(target=self._supervise, name="tenure-chaos-supervisor")
        thread.daemon = True
        thread.start()
        self._threads.append(thread)

    def _supervise(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
                now = time.monotonic()
                for slot in self.slots:
                    process = slot.process
                    if process is None or process.poll() is None:
                        continue
                    if slot.restart_at is None:  # it died without the nemesis
                        slot.restart_at = now + 0.2
                        self.rec.event(
                            "worker-exit", target=slot.name, returncode=process.returncode
                        )
                    if now >= slot.restart_at:
                        old = slot.name
                        self._spawn_worker(slot)
                        self.rec.event(
                            "fault", kind="kill", phase="end", target=old, restarted=slot.name
                        )
            time.sleep(0.05)

    def start_storms(self) -> None:
        for n in range(1, self.o.storm + 1):
            process = subprocess.Popen(
                [*_python(PROC), "storm", str(self.config_path), f"s{n}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log(f"s{n}"),
                text=True,
                start_new_session=True,
            )
            self.storms.append(process)
        for process in self.storms:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a storm process did not start (see {self.out / 'logs'})")

    def start_locker(self) -> None:
        if self.kind != "sqlite":
            return
        self.locker = subprocess.Popen(
            [*_python(PROC), "sqlite-locker", str(self.config_path), "locker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log("locker"),
            text=True,
            start_new_session=True,
        )
        assert self.locker.stdout is not None
        self.locker.stdout.readline()

    def calibrate(self) -> None:
        host = self.rec.now()
        store_now = self.store.now()
        self.rec.event("calibrate", host=host, store_now=store_now, offset=store_now - host)

    # -- the nemesis's target ------------------------------------------------------------

    def worker(self, number: int) -> tuple[str, int] | None:
        with self._lock:
            slot = self.slots[number - 1]
            if slot.process is None or slot.process.poll() is not None:
                return None
            return slot.name, slot.process.pid

    def set_control(
        self, name: str, *, clock: dict[str, float] | None, arm: dict[str, Any] | None
    ) -> None:
        path = self.out / "ctl" / f"{name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"clock": clock, "arm": arm}), encoding="utf-8")
        os.replace(tmp, path)

    def hit(self, name: str) -> int | None:
        try:
            return int((self.out / "ctl" / f"{name}.hit").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def kill(self, number: int, restart_after: float) -> tuple[str, int] | None:
        with self._lock:
            slot = self.slots[number - 1]
            process = slot.process
            if process is None or process.poll() is not None:
                return None
            slot.restart_at = time.monotonic() + restart_after
            with contextlib.suppress(OSError):
                process.kill()
            return slot.name, process.pid

    def _stopped_pids(self) -> set[int]:
        with self._lock:
            return {
                s.process.pid
                for s in self.slots
                if s.process is not None and is_stopped(s.process.pid)
            }

    def storm(self, jobs: int, window: float, holder: int | None = None) -> dict[str, Any] | None:
        """Release the storm processes together onto ``jobs`` jobs: those held by stopped
        workers (only worker ``holder``'s when given) first, then ready and leased ones."""
        if not self.storms:
            return None
        stopped = {holder} if holder is not None else self._stopped_pids()
        targets: list[str] = []
        held = 0
        if stopped:
            for job in self.side.jobs(queue=self.queue, state="leased", limit=1000):
                pid = (job.owner or "").split(":")[-2:-1]
                if pid and pid[0].isdigit() and int(pid[0]) in stopped and len(targets) < jobs:
                    targets.append(job.job_id)
                    held += 1
        for state in ("ready", "leased"):
            if len(targets) >= jobs or holder is not None:
                break
            found = [j.job_id for j in self.side.jobs(queue=self.queue, state=state, limit=50)]
            found = [j for j in found if j not in targets]
            self._rng.shuffle(found)
            targets += found[: jobs - len(targets)]
        if not targets:
            return None
        command = json.dumps({"jobs": targets, "at": time.monotonic() + 0.2, "window": window})
        for process in self.storms:
            if process.poll() is None and process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.write(command + "\n")
                    process.stdin.flush()
        return {"jobs": targets, "processes": len(self.storms), "held_by_stopped": held}

    def proxy_delay(self, lag: float, hold: float) -> bool:
        if self.proxy is None:
            return False
        self.proxy.delay(lag, hold)
        return True

    def proxy_drop(self, window: float) -> bool:
        if self.proxy is None:
            return False
        self.proxy.drop_replies(window)
        return True

    def store_pause(self, duration: float) -> dict[str, Any] | None:
        if self.kind == "sqlite":
            return self._pause_sqlite(duration)
        if self.kind == "postgres":
            return self._pause_postgres(duration)
        return self._pause_redis(duration)

    def _in_thread(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name="tenure-chaos-store-pause", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _pause_sqlite(self, duration: float) -> dict[str, Any] | None:
        locker = self.locker
        if locker is None or locker.stdin is None or locker.stdout is None:
            return None
        stdin, stdout = locker.stdin, locker.stdout
        if not self._locker_busy.acquire(blocking=False):
            return None  # the previous store pause is still on

        def hold() -> None:
            try:
                stdin.write("lock\n")
                stdin.flush()
                if stdout.readline().strip() != "locked":
                    return
                os.kill(locker.pid, signal.SIGSTOP)
                time.sleep(duration)
                os.kill(locker.pid, signal.SIGCONT)
                stdin.write("unlock\n")
                stdin.flush()
                stdout.readline()
            except OSError as exc:
                self.rec.event("fault-error", kind="store-pause", error=str(exc))
            finally:
                self._locker_busy.release()

        self._in_thread(hold)
        return {"how": "sqlite-writer-stopped", "target_pid": locker.pid}

    def _pause_postgres(self, duration: float) -> dict[str, Any] | None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(_libpq_url(self.o.store_url), autocommit=True) as conn:
            pids = [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name LIKE "
                    "'tenure-chaos-%%' AND pid <> pg_backend_pid() ORDER BY pid"
                )
            ]
        if pids:
            pid = self._rng.choice(pids)
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass  # not ours to signal (another host or user): lock the table instead
            else:
                self.stopped_backends.add(pid)

                def resume() -> None:
                    time.sleep(duration)
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGCONT)
                    self.stopped_backends.discard(pid)

                self._in_thread(resume)
                return {"how": "backend-stopped", "backend_pid": pid}

        from ..stores.postgres import parse_postgres_url

        schema = parse_postgres_url(self.o.store_url).schema

        def lock() -> None:
            with psycopg.connect(_libpq_url(self.o.store_url)) as conn:
                conn.execute(
                    sql.SQL("LOCK TABLE {}.tenure_jobs IN ACCESS EXCLUSIVE MODE").format(
                        sql.Identifier(schema)
                    )
                )
                time.sleep(duration)
                conn.rollback()

        self._in_thread(lock)
        return {"how": "table-locked"}

    def _pause_redis(self, duration: float) -> dict[str, Any] | None:
        import redis

        client = redis.Redis.from_url(_redis_url(self.o.store_url))
        try:
            client.execute_command("CLIENT", "PAUSE", int(duration * 1000), "ALL")  # type: ignore[no-untyped-call]
        finally:
            client.close()
        return {"how": "client-pause"}

    # -- running -------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        found = {}
        for state in ("ready", "leased"):
            found[state] = len(self.store.jobs(queue=self.queue, state=state, limit=1000))
        return found

    def wait_until_drained(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        last = 0.0
        while time.monotonic() < deadline:
            self._resume_stopped()
            try:
                counts = self.counts()
            except TenureError:
                time.sleep(0.5)
                continue
            if counts["ready"] == 0 and counts["leased"] == 0:
                return True
            if time.monotonic() - last > 10:
                last = time.monotonic()
                self.echo(f"  draining: {counts['ready']} ready, {counts['leased']} leased")
            time.sleep(0.25)
        return False

    def all_ended(self) -> bool:
        try:
            counts = self.counts()
        except TenureError:
            return False
        return counts["ready"] == 0 and counts["leased"] == 0

    def _resume_stopped(self) -> None:
        """After the faults: any process still stopped (a late self-stop) is resumed."""
        with self._lock:
            pids = [s.process.pid for s in self.slots if s.process is not None]
        pids += [process.pid for process in self.storms]
        for pid in pids:
            if is_stopped(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
        for pid in list(self.stopped_backends):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)

    def heal(self) -> None:
        if self.proxy is not None:
            self.proxy.heal()
        with self._lock:
            names = [s.name for s in self.slots]
        for name in names:
            self.set_control(name, clock=None, arm=None)
        if self.kind == "redis":
            with contextlib.suppress(Exception):
                import redis

                client = redis.Redis.from_url(_redis_url(self.o.store_url))
                client.execute_command("CLIENT", "UNPAUSE")  # type: ignore[no-untyped-call]
                client.close()
        self._resume_stopped()

    def stop_workers(self) -> None:
        with self._lock:
            self._stopping = True
            processes = [s.process for s in self.slots if s.process is not None]
        self._resume_stopped()
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(OSError):
                    process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.o.ttl * 2 + 10
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            if process.poll() is None:
                process.kill()
                process.wait()

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
                result=job.result,
                store_now=job.as_of,
            )
        return states

    def record_sink(self) -> None:
        from ..fence.sink import MAX_PAGE, Sink

        sink = Sink(self.out / "sink.db")
        try:
            after = 0
            while True:
                records = sink.records(None, after, MAX_PAGE)
                for r in records:
                    self.rec.event(
                        "sink-record",
                        record=r["id"],
                        job=r["job_id"],
                        gen=r["generation"],
                        key=r["effect_key"],
                        accepted_at=r["accepted_at"],
                    )
                if len(records) < MAX_PAGE:
                    break
                after = records[-1]["id"]
            after = 0
            while True:
                refused = sink.rejections(None, after, MAX_PAGE)
                for r in refused:
                    self.rec.event(
                        "sink-rejection",
                        rejection=r["id"],
                        kind=r["kind"],
                        status=r["status"],
                        job=r["job_id"],
                        presented=r["presented_generation"],
                        current=r["current_generation"],
                        key=r["effect_key"],
                        rejected_at=r["rejected_at"],
                    )
                if len(refused) < MAX_PAGE:
                    break
                after = refused[-1]["id"]
        finally:
            sink.close()

    def shutdown(self) -> None:
        """Stop every process this run started (also after an error)."""
        with self._lock:
            self._stopping = True
        self._resume_stopped()
        with contextlib.suppress(Exception):
            self.heal()
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is None:
                slot.process.kill()
                slot.process.wait()
        for process in [*self.storms, *([self.locker] if self.locker else [])]:
            if process.poll() is None:
                with contextlib.suppress(OSError):
                    os.kill(process.pid, signal.SIGCONT)
                    if process.stdin is not None:
                        process.stdin.close()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(5)
                if process.poll() is None:
                    process.kill()
                    process.wait()
        if self.sink is not None and self.sink.poll() is None:
            self.sink.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.sink.wait(10)
            if self.sink.poll() is None:
                self.sink.kill()
                self.sink.wait()
        for thread in self._threads:
            thread.join(10)
        if self.proxy is not None:
            self.proxy.close()
        with contextlib.suppress(Exception):
            self.store.close()
        with contextlib.suppress(Exception):
            self.side.close()
        for log in self._logs:
            log.close()


PROC = "tenure.chaos._proc"
FAKETIME_LIBRARIES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


def libfaketime() -> str | None:
    """libfaketime's path when Debian's faketime (or a local build) is installed."""
    if shutil.which("faketime") is None:
        return None
    return next((path for path in FAKETIME_LIBRARIES if os.path.exists(path)), None)


def _python(module: str) -> list[str]:
    return [sys.executable, "-m", module]


def _libpq_url(url: str) -> str:
    """A PostgreSQL URL without tenure's own options (for a plain psycopg connection)."""
    own = {"schema", "pool_min", "pool_max", "pool_timeout", "auto_migrate", "listen"}
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in own]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _redis_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=""))


def run_chaos(options: ChaosOptions, echo: Echo = print) -> ChaosResult:
    """Run one chaos run (see the module docstring); the verdict is in the result."""
    options.check()
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
    harness = Harness(options, echo)
    nemesis_rec = Recorder(out / "history" / "nemesis.jsonl", "nemesis")
    harness.rec.event(
        "config",
        **{k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()},
        store=harness.kind,
        queue=harness.queue,
        faults_scheduled=len(schedule),
    )
    started = time.monotonic()
    try:
        echo(
            f"chaos: {options.jobs} jobs on {harness.kind} ({options.store_url}), "
            f"{options.workers} workers x {options.concurrency}, ttl {options.ttl:g} s, "
            f"seed {options.seed}" + (f", UNSAFE {options.unsafe}" if options.unsafe else "")
        )
        harness.start_sink()
        harness.start_proxy()
        harness.write_config()
        harness.start_locker()
        harness.start_storms()
        harness.calibrate()
        harness.submit(over=options.duration * 0.8)
        harness.start_workers()
        echo(
            f"  sink {harness.sink_url}; {len(schedule)} faults over {options.duration:g} s"
            + (f" (proxy :{harness.proxy.port})" if harness.proxy else "")
        )
        nemesis = Nemesis(schedule, harness, nemesis_rec)
        nemesis.start()
        end = nemesis.start_time + options.duration
        last = time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.25)
            if time.monotonic() - last >= 10:
                last = time.monotonic()
                echo(
                    f"  t={last - nemesis.start_time:.0f} s: {nemesis.injected_count()} of "
                    f"{len(schedule)} faults injected so far"
                )
            if harness.fed.is_set() and harness.all_ended():
                echo("  every job has ended: stopping the faults early")
                break
        nemesis.stop()
        nemesis.heal()
        harness.heal()
        harness.fed.wait()
        drained = harness.wait_until_drained(options.drain_timeout)
        if not drained:
            echo(f"  not drained after {options.drain_timeout:g} s: the checker will say which")
        harness.calibrate()
        harness.stop_workers()
        # After the last worker start (a killed worker restarted while draining counts too).
        for line in _fault_summary(nemesis, len(schedule), harness.started_skewed):
            echo(line)
        states = harness.record_finals()
        echo("  final states: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    finally:
        harness.shutdown()
    harness.record_sink()
    harness.rec.event("run-end", seconds=round(time.monotonic() - started, 3))
    harness.rec.close()
    nemesis_rec.close()
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
