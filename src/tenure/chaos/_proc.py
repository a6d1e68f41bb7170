"""The processes of a chaos run: ``python -m tenure.chaos._proc ROLE CONFIG NAME``.

* ``worker``: a real `tenure.Worker` (the runtime users run) on the run's queue, with the
  workload handler, a recorded ``chaos+`` store and the nemesis's control (clock, pause
  points). Stops on SIGTERM like any worker.
* ``storm``: a claimer for claim storms. It waits for commands on stdin (one JSON object a
  line: ``{"jobs": [...], "at": <CLOCK_MONOTONIC time>, "window": s}``), then, at ``at``
  together with the other storm processes, claims those few jobs by id over and over for
  ``window`` seconds; a claim it wins runs the workload and completes, as a worker would.
* ``lock-taker`` (``--workload locks``): takes the run's one named lock (`tenure.Lock`,
  blocking, on the recorded ``chaos+`` store and the nemesis's clock) over and over; each
  holding writes to the sink with the lock's token, works a while (a few holdings over
  several TTLs, kept by the lock's renewals) and writes again, then releases. Killed,
  paused and skewed like a worker (it takes a worker's place); stops on SIGTERM, releasing
  the lock it holds.
* ``sqlite-locker``: holds the SQLite store's write lock on command (``lock`` /
  ``unlock`` on stdin; answers ``locked`` / ``unlocked``); the nemesis stops it with
  SIGSTOP while it holds the lock: a SQLite writer stalled mid-transaction. On ``write
  QUEUE`` it also changes the rows of that queue without committing (a small page cache,
  so that the changes spill into the WAL) and answers ``locked``: the nemesis then kills it
  with SIGKILL, a SQLite writer that died mid-transaction.

CONFIG is the run's ``config.json`` (written by the harness).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, SupportsIndex

import httpx

from .._protocol import RetryPolicy
from .._store import connect
from ..errors import StoreLost, StoreUnavailable, TenureError
from ..locks import Lock
from ..models import Lease
from ..stores.sqlite import parse_sqlite_url
from ..worker import JobContext, Worker, default_owner
from ._backend import chaos_url, install, named_url
from ._control import Control
from ._flow_mode import handler_seconds
from ._history import Recorder
from ._workload import SinkClient, work

log = logging.getLogger("tenure.chaos")


def _setup(config: dict[str, Any], name: str) -> tuple[Recorder, Control]:
    out = Path(config["out"])
    recorder = Recorder(
        out / "history" / f"{name}.jsonl",
        name,
        time_offset=float(os.environ.get("TENURE_CHAOS_TIME_OFFSET", "0")),
    )
    control = Control(out / "ctl", name, recorder)
    install(recorder, control, config.get("unsafe"))
    return recorder, control


def run_worker(config: dict[str, Any], name: str) -> None:
    recorder, control = _setup(config, name)
    unsafe = config.get("unsafe")
    ttl = float(config["ttl"])
    owner = default_owner()
    sink = SinkClient(config["sink_url"], recorder, control, unsafe=unsafe)
    url = chaos_url(named_url(config["worker_url"], name))
    own_store = connect(url, clock=control.clock) if unsafe else None
    queues = list(config.get("queues") or [config["queue"]])

    def handle(ctx: JobContext) -> dict[str, Any]:
        payload = ctx.payload if isinstance(ctx.payload, dict) else {}
        token = ctx.token
        check = None if unsafe == "no-fence" else ctx.check
        # A flow run's timed jobs overrun their timeout on their first attempts.
        work(sink, ctx, token, owner, handler_seconds(payload, ctx.attempt), check=check)
        result = {"gen": token.generation, "proc": name, "owner": owner}
        if own_store is not None and unsafe == "no-fence":
            # Unsafe: complete whatever the worker knows about the lease.
            with contextlib.suppress(TenureError):
                own_store.complete(ctx.lease, result)
        return result

    worker = Worker(
        url,
        concurrency=int(config["concurrency"]),
        ttl=ttl,
        grace=ttl,
        poll_interval=float(config.get("poll_interval", 0.25)),
        retry=RetryPolicy(0.1, ttl),
        owner=owner,
        clock=control.clock,
        queues=queues,
    )
    for queue in queues:
        worker.register(queue, handle)
    recorder.event("proc-start", role="worker", owner=owner)
    try:
        worker.run()
    finally:
        recorder.event("proc-stop", role="worker", owner=owner, stats=worker.stats())
        sink.close()
        if own_store is not None:
            own_store.close()
        control.close()
        recorder.close()


def run_storm(config: dict[str, Any], name: str) -> None:
    recorder, control = _setup(config, name)
    ttl = float(config["ttl"])
    owner = f"{name}:{os.getpid()}"
    sink = SinkClient(config["sink_url"], recorder, control, unsafe=config.get("unsafe"))
    store = connect(chaos_url(named_url(config["worker_url"], name)), clock=control.clock)
    rng = random.Random()
    recorder.event("proc-start", role="storm", owner=owner)
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            command = json.loads(line)
            delay = float(command["at"]) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            deadline = time.monotonic() + float(command["window"])
            pending = list(command["jobs"])
            while pending and time.monotonic() < deadline:
                rng.shuffle(pending)
                for job_id in list(pending):
                    try:
                        lease = store.claim(job_id, owner, ttl)
                    except TenureError:
                        continue
                    if lease is not None:
                        pending.remove(job_id)
                        _storm_work(store, sink, lease, control, owner)
                time.sleep(0.1)
            print("done", flush=True)
    finally:
        recorder.event("proc-stop", role="storm", owner=owner)
        store.close()
        sink.close()


def _storm_work(store: Any, sink: SinkClient, lease: Lease, control: Control, owner: str) -> None:
    def check() -> None:
        if control.clock.monotonic() >= lease.local_deadline:
            raise TimeoutError("local deadline passed")

    try:
        work(sink, lease, lease.token, owner, 0.05, check=check)
        result = {"gen": lease.generation, "proc": "storm", "owner": owner}
        while True:  # through a store outage, as a worker would, within the lease
            check()
            try:
                store.complete(lease, result)
                return
            except StoreLost:
                raise
            except StoreUnavailable:
                time.sleep(0.05)
    except (TenureError, TimeoutError):
        pass  # recorded by the store and the sink client; the lease expires


def run_lock_taker(config: dict[str, Any], name: str) -> None:
    recorder, control = _setup(config, name)
    ttl = float(config["ttl"])
    owner = default_owner()
    sink = SinkClient(config["sink_url"], recorder, control)
    store = connect(chaos_url(named_url(config["worker_url"], name)), clock=control.clock)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    rng = random.Random()
    recorder.event("proc-start", role="lock-taker", owner=owner)
    try:
        while not stopping.is_set():
            # A bounded wait, so that a SIGTERM is noticed between two tries.
            lock = Lock(store, config["lock"], ttl, owner=owner, timeout=2 * ttl)
            try:
                if not lock.acquire():
                    continue
            except TenureError:  # the store away (recorded by the driver): try again
                time.sleep(0.1)
                continue
            long = rng.random() < float(config.get("long_jobs", 0.1))
            seconds = ttl * rng.uniform(1.0, 2.5) if long else rng.uniform(0.02, ttl / 4)
            try:
                work(sink, lock.token, lock.token, owner, seconds, check=lock.check)
            except (TenureError, TimeoutError, RuntimeError, httpx.HTTPError):
                pass  # a lost lock, a refused write: recorded by the sink client
            finally:
                with contextlib.suppress(TenureError):
                    lock.release()
            # A while before the next try: a process that takes the lock again at once
            # wins every race with the waiters its release woke, and the others (and the
            # nemesis's pause points armed in them) would seldom get it.
            time.sleep(rng.uniform(0.0, ttl / 4))
    finally:
        recorder.event("proc-stop", role="lock-taker", owner=owner)
        store.close()
        sink.close()
        control.close()
        recorder.close()


def run_sqlite_locker(config: dict[str, Any], name: str) -> None:
    path = parse_sqlite_url(config["store_url"])["path"]
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    conn.execute("PRAGMA cache_size = 2")
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, queue = line.strip().partition(" ")
        try:
            if command == "lock":
                conn.execute("BEGIN IMMEDIATE")
                print("locked", flush=True)
            elif command == "write":
                conn.execute("BEGIN IMMEDIATE")
                # A real change (an unchanged row is not written), never committed.
                conn.execute(
                    "UPDATE tenure_jobs SET payload = payload || ' ' WHERE queue = ?", (queue,)
                )
                print("locked", flush=True)
            elif command == "unlock":
                conn.execute("ROLLBACK")
                print("unlocked", flush=True)
        except sqlite3.Error as exc:
            print(f"error: {exc}", flush=True)
    conn.close()


def _faketime_sleep() -> None:
    """Under libfaketime with only the wall clock faked (FAKETIME_DONT_FAKE_MONOTONIC=1),
    libfaketime 0.9.10 makes ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` fail with
    EINVAL, so ``time.sleep`` raises; timed waits on locks still work. Sleep on one."""
    waiter = threading.Event()
    real_sleep = time.sleep

    def sleep(seconds: float | SupportsIndex) -> None:
        delay = float(seconds)
        if delay > 0:
            waiter.wait(delay)
        else:
            real_sleep(0)

    time.sleep = sleep


def main(argv: list[str]) -> int:
    role, config_path, name = argv
    if os.environ.get("FAKETIME") and os.environ.get("FAKETIME_DONT_FAKE_MONOTONIC") == "1":
        _faketime_sleep()
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    logging.basicConfig(
        level=logging.WARNING,
        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if role == "worker":
        run_worker(config, name)
    elif role == "storm":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        run_storm(config, name)
    elif role == "lock-taker":
        run_lock_taker(config, name)
    elif role == "sqlite-locker":
        run_sqlite_locker(config, name)
    else:
        print(f"unknown role {role!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
