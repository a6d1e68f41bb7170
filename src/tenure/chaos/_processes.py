"""The processes of one chaos run, started and stopped: the reference fenced sink, the
TCP proxy in front of a server store, the worker processes (restarted by a supervisor
when killed), the storm claimers and, for SQLite, the lock holder (started again when the
nemesis kills it); and each worker's control file (its clock, its armed pause point). The
store server of the run's own, when it has one (`server`), is started and removed by the
harness."""

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
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ._control import write_atomically
from ._history import Recorder
from ._nemesis import is_stopped
from ._proxy import Proxy
from ._servers import OwnedServer

if TYPE_CHECKING:
    from ._harness import ChaosOptions

__all__ = [
    "PROC",
    "Echo",
    "libfaketime",
    "Processes",
]

Echo = Callable[[str], None]
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


@dataclass
class _Slot:
    number: int
    incarnation: int = 0
    process: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None

    @property
    def name(self) -> str:
        return f"w{self.number}.{self.incarnation}"


class Processes:
    """What one run started, and the threads it runs beside them (joined at `shutdown`)."""

    def __init__(
        self, options: ChaosOptions, echo: Echo, kind: str, queue: str, rec: Recorder
    ) -> None:
        self.o = options
        self.echo = echo
        self.kind = kind
        self.out = options.out
        self.queue = queue
        self.queues = [queue]  # a flow run's are several (tenure.chaos._flow_mode)
        self.rec = rec
        # Held while workers are spawned or looked up; `stopping` is set under it, so no
        # worker is restarted once they are being stopped.
        self.lock = threading.Lock()
        self.stopping = False
        self.slots = [_Slot(n) for n in range(1, options.workers + 1)]
        self.storms: list[subprocess.Popen[str]] = []
        self.locker: subprocess.Popen[str] | None = None
        self.sink: subprocess.Popen[str] | None = None
        self.sink_url = ""
        self.proxy: Proxy | None = None
        self.server: OwnedServer | None = None  # the store server the run owns, if any
        self.worker_url = options.store_url
        self.lock_name: str | None = (
            None  # the lock's name, in a locks run (lock takers, no workers)
        )
        self.stopped_backends: set[int] = set()
        self.config_path = self.out / "config.json"
        # One generator for every random choice of the run (worker clocks, storm targets,
        # stopped backends), so that a seed gives one sequence.
        self.rng = random.Random(f"tenure-chaos-harness:{options.seed}")
        self.faketime = libfaketime() if options.faketime else None
        # Workers started with a clock off (faketime, --unsafe client-clock): faults the
        # checker counts that are not in the schedule.
        self.started_skewed = 0
        self._threads: list[threading.Thread] = []
        self._logs: list[IO[bytes]] = []

    def in_thread(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def set_control(
        self, name: str, *, clock: dict[str, float] | None, arm: dict[str, Any] | None
    ) -> None:
        path = self.out / "ctl" / f"{name}.json"
        write_atomically(path, json.dumps({"clock": clock, "arm": arm}))

    # -- starting ------------------------------------------------------------------------

    def start_sink(self) -> None:
        db = self.out / "sink.db"
        self.sink = subprocess.Popen(
            [*_python("tenure"), "sink", "serve", "--port", "0", "--db", str(db), "--json"],
            stdout=subprocess.PIPE,
            stderr=self._log("sink", "wb"),
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
        if "," in parts.netloc:  # a primary and its replica (failover): libpq picks one
            self.echo("several hosts in the store URL: no proxy, so no proxy faults")
            return
        if not parts.hostname:
            self.echo("no host in the store URL: no proxy, so no proxy faults")
            return
        default = 5432 if self.kind == "postgres" else 6379
        self.proxy = Proxy(parts.hostname, parts.port or default)
        proxied = self.proxy.through(self.o.store_url)
        if proxied is not None:
            self.worker_url = proxied

    def write_config(self) -> Path:
        config = {
            "out": str(self.out),
            "store_url": self.o.store_url,
            "worker_url": self.worker_url,
            "sink_url": self.sink_url,
            "queue": self.queue,
            "queues": self.queues,
            "ttl": self.o.ttl,
            "concurrency": self.o.concurrency,
            "poll_interval": min(0.25, self.o.ttl / 4),
            "unsafe": self.o.unsafe,
            "workload": self.o.workload,
            "lock": self.lock_name,
            "long_jobs": self.o.long_jobs,
        }
        self.config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        return self.config_path

    def _log(self, name: str, mode: str = "ab") -> IO[bytes]:
        path = self.out / "logs" / f"{name}.log"
        log = open(path, mode)  # noqa: SIM115 - closed at the end
        self._logs.append(log)
        return log

    def spawn_workers(self) -> None:
        """Start every worker (and the supervisor that restarts a killed one); `wait_ready`
        waits for them."""
        for slot in self.slots:
            self._spawn_worker(slot)
        self.in_thread(self._supervise, "tenure-chaos-supervisor")

    def wait_ready(self, *, within: float = 30.0) -> None:
        """Return once every storm process has said it is ready (an error if one did not)
        and each worker has sent its first store call, or after ``within`` seconds for the
        workers. The nemesis's schedule starts after this: a worker takes about a second to
        import and connect, several on a loaded machine, and a fault aimed at one before it
        is up would miss (a pause point never reached)."""
        for process in self.storms:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a storm process did not start (see {self.out / 'logs'})")
        deadline = time.monotonic() + within
        waiting = [slot.name for slot in self.slots]
        while waiting and time.monotonic() < deadline:
            waiting = [name for name in waiting if not self._started(name)]
            if waiting:
                time.sleep(0.02)

    def _started(self, name: str) -> bool:
        """Whether process ``name`` has recorded a store call (its history's lines are
        compact JSON: `Recorder.write`)."""
        try:
            with open(self.out / "history" / f"{name}.jsonl", "rb") as history:
                return b'"type":"invoke"' in history.read()
        except OSError:
            return False

    def _spawn_worker(self, slot: _Slot) -> None:
        slot.incarnation += 1
        name = slot.name
        role = "worker" if self.lock_name is None else "lock-taker"
        command = [*_python(PROC), role, str(self.config_path), name]
        env = dict(os.environ)
        if self.o.unsafe == "client-clock":
            # Unsafe: this worker's clock runs ahead, so live leases look expired to it.
            offset = round(self.rng.uniform(10.0, 60.0) * self.o.ttl, 3)
            self.set_control(name, clock={"offset": offset, "rate": 1.0}, arm=None)
            self.rec.event("fault", kind="skew", phase="start", target=name, offset=offset)
            self.started_skewed += 1
        elif self.faketime and self.kind != "sqlite" and slot.number % 2 == 0:
            self._fake_time(name, self.faketime, env)
        slot.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log(name),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        slot.restart_at = None

    def _fake_time(self, name: str, library: str, env: dict[str, str]) -> None:
        # The whole process (libpq, redis-py) sees a clock minutes to an hour off. Not on
        # SQLite, whose store clock is the host clock of whichever process writes. The
        # library is preloaded directly (not through the faketime program, which would
        # stand between the nemesis's signals and the worker).
        offset = round(self.rng.choice((-1, 1)) * self.rng.uniform(60, 3600))
        env["LD_PRELOAD"] = " ".join(filter(None, [library, env.get("LD_PRELOAD")]))
        env["FAKETIME"] = f"{offset:+d}s"
        # Wall time only: with CLOCK_MONOTONIC faked too, Python's timed waits
        # (threading's Condition/Event.wait) never time out under libfaketime, and the
        # worker's renewer and watchdog would sleep until woken.
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        env["TENURE_CHAOS_TIME_OFFSET"] = str(offset)
        self.rec.event("fault", kind="faketime", phase="start", target=name, offset=offset)
        self.started_skewed += 1

    def _supervise(self) -> None:
        while True:
            with self.lock:
                if self.stopping:
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

    def spawn_storms(self) -> None:
        """Start the claim storm processes; `wait_ready` waits for them (they import while
        the workers do: on two cores, one wave of starts, not two)."""
        for n in range(1, self.o.storm + 1):
            self.storms.append(self._helper("storm", f"s{n}"))

    def start_locker(self) -> None:
        """The SQLite lock holder (again, after the nemesis killed the last one)."""
        if self.kind != "sqlite":
            return
        locker = self._helper("sqlite-locker", "locker")
        assert locker.stdout is not None
        locker.stdout.readline()
        self.locker = locker

    def _helper(self, role: str, name: str) -> subprocess.Popen[str]:
        """A process of tenure.chaos._proc spoken to over its stdin and stdout."""
        return subprocess.Popen(
            [*_python(PROC), role, str(self.config_path), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log(name),
            text=True,
            start_new_session=True,
        )

    # -- stopping ------------------------------------------------------------------------

    def resume_stopped(self) -> None:
        """After the faults: any process still stopped (a late self-stop) is resumed."""
        with self.lock:
            pids = [s.process.pid for s in self.slots if s.process is not None]
        pids += [process.pid for process in self.storms]
        for pid in pids:
            if is_stopped(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
        for pid in list(self.stopped_backends):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)

    def stop_workers(self) -> None:
        with self.lock:
            self.stopping = True
            processes = [s.process for s in self.slots if s.process is not None]
        self.resume_stopped()
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

    def stop(self) -> None:
        """No more restarts, and nothing left stopped (also after an error)."""
        with self.lock:
            self.stopping = True
        self.resume_stopped()

    def shutdown(self) -> None:
        """Kill what still runs, join the threads, close the proxy."""
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

    def close_logs(self) -> None:
        for log in self._logs:
            log.close()
