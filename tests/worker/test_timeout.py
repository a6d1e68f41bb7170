"""Per-attempt timeouts (``timeout=`` per handler, or the worker's): past it the lease is
no longer renewed, the handler is stopped as at a loss (cancelled, ``ctx.lost``, killed) and
the attempt failed under the retry policy.

The tests of a worker on a store run on every backend (the suite's ``backend``), but the
one of the command line's option (SQLite: it is about the option). Most run with the worker
and the store on one `ManualClock` (the timeout is measured on the worker's clock, so it
passes when the test moves the clock); a few run on the real clock with 0.3 s timeouts.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

import tenure
import tenure.worker._worker as worker_module
from tenure.cli import main
from tenure.worker import JobContext, WorkerCollector, check_token
from tenure.worker._invoke import attempt_timeout
from tests.worker import apps
from tests.worker._support import run_burst, running, wait_until

MakeWorker = Callable[..., tenure.Worker]
TTL = 10.0  # make_worker's: renewals every 2.5-3.33 s of the manual clock
TIMEOUT = 5.0
ERROR = "timeout: handler ran longer than 5 s"


class Hung:
    """A handler of each kind that never returns on its own (bounded at 60 s), and what
    the test sees of it."""

    def __init__(self, tmp_path: Path) -> None:
        self.started = threading.Event()
        self.starts = 0
        self.stopped: list[str] = []
        self.events = tmp_path / "events.jsonl"

    def register(self, worker: tenure.Worker, kind: str, **options: Any) -> None:
        if kind == "process":
            worker.register("q", apps.never_returns, isolation="process", **options)
        elif kind == "async":
            worker.register("q", self.run_async, **options)
        else:
            worker.register("q", self.run_sync, **options)

    def payload(self) -> dict[str, Any]:
        return {"events": str(self.events)}

    def wait_started(self, count: int) -> None:
        wait_until(lambda: self.count() >= count, what=f"handler start {count}")

    def count(self) -> int:
        return max(self.starts, len(apps.read_events(self.events)))

    async def run_async(self, ctx: JobContext) -> None:
        self.starts += 1
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            self.stopped.append(f"cancelled lost={ctx.lost}")
            raise

    def run_sync(self, ctx: JobContext) -> str:
        self.starts += 1
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if ctx.lost:  # a well-behaved sync handler: it looks at ctx.lost
                self.stopped.append(f"saw lost: {ctx.lost_reason}")
                return "stale"
            time.sleep(0.005)
        return "never"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _settled(store: tenure.Store, attempts: int) -> Callable[[], bool]:
    def check() -> bool:
        job = store.get("J")
        return job.attempts == attempts and job.state in ("ready", "dead")

    return check


# -- on the manual clock -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["async", "thread", "process"])
def test_a_hung_handler_is_stopped_and_failed_at_its_timeout_until_dead(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    tmp_path: Path,
    kind: str,
) -> None:
    worker = make_worker(retry=tenure.RetryPolicy(base=4.0, cap=4.0))
    hung = Hung(tmp_path)
    hung.register(worker, kind, timeout=TIMEOUT)
    store.submit("J", hung.payload(), queue="q", max_attempts=2)
    with running(worker):
        hung.wait_started(1)
        clock.advance(3.4)  # one renewal period: the lease is renewed as usual
        wait_until(lambda: worker.stats()["renewals"] >= 1, what="a renewal")
        renewals = worker.stats()["renewals"]
        clock.advance(TIMEOUT - 3.4 - 0.1)  # just before the timeout: nothing happens
        time.sleep(0.2)  # the watchdog looks every 50 ms
        job = store.get("J")
        assert (job.state, job.error, worker.stats()["timeouts"]) == ("leased", None, 0)
        # Past the timeout, with a renewal due at the same moment: it is not sent.
        clock.advance(3.4)
        wait_until(_settled(store, 1), what="the failed attempt")
        job = store.get("J")
        assert (job.state, job.attempts, job.error) == ("ready", 1, ERROR)
        assert worker.stats()["renewals"] == renewals
        if kind == "process":
            pid = apps.read_events(hung.events)[0]["pid"]
            wait_until(lambda: not _alive(pid), what="the killed child")
        # The backoff of the retry policy, then the last attempt times out too: dead.
        clock.advance(4.0)
        hung.wait_started(2)
        clock.advance(TIMEOUT + 0.1)
        wait_until(_settled(store, 2), what="the last attempt")
    job = store.get("J")
    assert (job.state, job.attempts, job.error) == ("dead", 2, ERROR)
    stats = worker.stats()
    assert (stats["timeouts"], stats["failed"], stats["retried"], stats["dead"]) == (2, 2, 1, 1)
    assert (stats["leases_lost"], stats["completed"], stats["completions_refused"]) == (0, 0, 0)
    assert (stats["cancelled_on_loss"], stats["killed_on_loss"]) == (0, 0)
    if kind == "async":
        assert hung.stopped == ["cancelled lost=True"] * 2
    elif kind == "thread":
        assert len(hung.stopped) == 2
        assert "timeout (5 s)" in hung.stopped[0]


def test_a_sync_handler_that_ignores_its_timeout_loses_the_job(
    make_worker: MakeWorker,
    store: tenure.Store,
    open_store: Callable[..., tenure.Store],
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    worker = make_worker(retry=tenure.RetryPolicy(base=1.0, cap=1.0))
    proceed = threading.Event()
    seen: dict[str, Any] = {}

    @worker.handler("q", timeout=timedelta(seconds=2))
    def stubborn(ctx: JobContext) -> str:
        seen["ctx"] = ctx
        assert proceed.wait(10), "the test did not let the handler go on"  # ignores ctx.lost
        seen["lost"] = ctx.lost
        try:
            check_token(ctx)  # a fenced write checks the token first
        except tenure.LeaseLost as exc:
            seen["refused"] = str(exc)
        return "late"

    store.submit("J", queue="q", max_attempts=3)
    with running(worker):
        wait_until(lambda: "ctx" in seen, what="the handler start")
        clock.advance(2.1)
        wait_until(_settled(store, 1), what="the failed attempt")
        job = store.get("J")
        assert (job.state, job.error) == ("ready", "timeout: handler ran longer than 2 s")
        # The thread goes on (it cannot be stopped): it keeps its slot and is reminded.
        assert worker.stats()["in_flight"] == 1
        assert any("thread cannot be stopped" in r.getMessage() for r in caplog.records)
        assert seen["ctx"].lost
        # Another worker takes the job once its backoff is over.
        clock.advance(1.0)
        other = open_store()
        lease = other.claim_next(queues=["q"], owner="other", ttl=TTL)
        assert lease is not None
        assert lease.generation == 2
        # The stuck handler's writes are refused: by the worker's registry, and by the
        # store (its generation is stale).
        proceed.set()
        wait_until(lambda: "refused" in seen, what="the stuck handler's write")
        with pytest.raises(tenure.LeaseLost):
            store.complete(seen["ctx"].lease, "late")
        wait_until(lambda: worker.stats()["in_flight"] == 0, what="the slot freed")
        other.complete(lease, "second")
    job = store.get("J")
    assert (job.state, job.result, job.generation) == ("done", "second", 2)
    assert seen["lost"] is True
    assert "was lost" in seen["refused"]
    assert worker.stats()["completions_refused"] == 0  # nothing was completed with it


def test_a_stopping_worker_does_not_wait_for_a_timed_out_thread_past_its_grace(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    worker = make_worker(grace=0.3)
    started = threading.Event()
    proceed = threading.Event()

    @worker.handler("q", timeout=1)
    def stubborn(ctx: JobContext) -> None:
        started.set()
        proceed.wait(10)  # ignores ctx.lost

    store.submit("J", queue="q")
    try:
        with running(worker, timeout=5):
            assert started.wait(10)
            clock.advance(1.1)
            wait_until(_settled(store, 1), what="the failed attempt")
            assert worker.stats()["in_flight"] == 1
            began = time.monotonic()
        assert time.monotonic() - began < 3  # the grace, not the thread's 10 s
    finally:
        proceed.set()
    assert worker.stats()["in_flight"] == 0
    assert any("grace period over" in r.getMessage() for r in caplog.records)
    assert store.get("J").error == "timeout: handler ran longer than 1 s"


class _FailingFail:
    """A driver whose ``fail`` is unavailable while ``down`` is set (the other calls pass)."""

    def __init__(self, inner: Any, down: threading.Event) -> None:
        self._inner = inner
        self._down = down

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name != "fail":
            return value
        down = self._down

        async def fail(*args: Any, **kwargs: Any) -> Any:
            if down.is_set():
                raise tenure.StoreUnavailable(
                    "fail: the test took the store away", operation="fail", outcome_unknown=False
                )
            return await value(*args, **kwargs)

        return fail


def test_without_the_fail_the_job_is_reclaimable_after_timeout_plus_ttl(
    make_worker: MakeWorker,
    store: tenure.Store,
    open_store: Callable[..., tenure.Store],
    clock: tenure.ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    down = threading.Event()
    real_connect = worker_module.connect_async

    async def connect_async(url: str, **options: Any) -> Any:
        opened = await real_connect(url, **options)
        opened._driver = _FailingFail(opened._driver, down)
        return opened

    monkeypatch.setattr(worker_module, "connect_async", connect_async)
    worker = make_worker()
    proceed = threading.Event()
    seen: dict[str, Any] = {}

    @worker.handler("q", timeout=TIMEOUT)
    def stubborn(ctx: JobContext) -> str:
        seen["ctx"] = ctx
        assert proceed.wait(10), "the test did not let the handler go on"  # ignores ctx.lost
        try:
            check_token(ctx)
        except tenure.LeaseLost:
            seen["refused"] = True
        return "late"

    store.submit("J", queue="q", max_attempts=3)
    other = open_store()
    with running(worker):
        wait_until(lambda: "ctx" in seen, what="the handler start")
        started = clock.monotonic()
        clock.advance(3.4)
        wait_until(lambda: worker.stats()["renewals"] == 1, what="a renewal")
        down.set()  # the timed-out attempt cannot be failed
        clock.advance(TIMEOUT - 3.4 + 0.1)
        wait_until(lambda: worker.stats()["settle_retries"] >= 1, what="the fail retried")
        renewed_until = store.get("J").lease_until
        # Renewals stop at the timeout, while the worker retries the fail.
        for _ in range(3):
            clock.advance(2.5)
            time.sleep(0.1)
            assert other.claim_next(queues=["q"], owner="other", ttl=TTL) is None
        assert worker.stats()["renewals"] == 1
        assert store.get("J").lease_until == renewed_until
        # One ttl after the timeout at the latest, the lease has expired: the job is free.
        clock.advance(started + TIMEOUT + TTL - clock.monotonic())
        wait_until(lambda: worker.stats()["settles_given_up"] == 1, what="the fail given up")
        lease = other.claim_next(queues=["q"], owner="other", ttl=TTL)
        assert lease is not None
        assert (lease.generation, lease.attempt) == (2, 2)
        down.clear()
        proceed.set()
        wait_until(lambda: "refused" in seen, what="the stuck handler's write")
        with pytest.raises(tenure.LeaseLost):
            store.complete(seen["ctx"].lease, "late")
        other.complete(lease, "second")
    job = store.get("J")
    assert (job.state, job.result, job.generation) == ("done", "second", 2)
    assert worker.stats()["timeouts"] == 1


def test_a_handler_that_ends_before_its_timeout_is_unaffected(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    worker = make_worker(timeout=TIMEOUT)  # the worker's default
    proceed = threading.Event()
    started = threading.Event()

    @worker.handler("q", timeout=3 * TTL)  # its own wins
    def long(ctx: JobContext) -> dict[str, Any]:
        started.set()
        assert proceed.wait(10)
        return {"lost": ctx.lost}

    store.submit("J", queue="q")
    with running(worker):
        assert started.wait(10)
        for step in range(1, 7):  # 6 renewal periods, past the worker's default timeout
            clock.advance(TTL / 3)
            wait_until(lambda s=step: worker.stats()["renewals"] >= s, what=f"renewal {step}")
        proceed.set()
        wait_until(lambda: store.get("J").state == "done", what="completion")
    assert store.get("J").result == {"lost": False}
    stats = worker.stats()
    assert (stats["timeouts"], stats["failed"], stats["completed"]) == (0, 0, 1)


def test_the_worker_default_applies_to_handlers_without_one(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    worker = make_worker()
    worker.configure(timeout=1.5)
    started = threading.Event()

    @worker.handler("q")
    async def forever(ctx: JobContext) -> None:
        started.set()
        await anyio.sleep(60)

    store.submit("J", queue="q")
    with running(worker):
        assert started.wait(10)
        clock.advance(1.6)
        wait_until(_settled(store, 1), what="the failed attempt")
    assert store.get("J").error == "timeout: handler ran longer than 1.5 s"


def test_a_jobs_own_timeout_overrides_the_handlers(
    make_worker: MakeWorker, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    # submit(timeout=...) is the job's own (issue #18): shorter or longer than its handler's.
    worker = make_worker(timeout=TIMEOUT, concurrency=2)
    started: list[str] = []

    @worker.handler("q", timeout=TIMEOUT)
    async def forever(ctx: JobContext) -> None:
        started.append(ctx.job_id)
        await anyio.sleep(60)

    store.submit("short", queue="q", timeout=1.5, max_attempts=1)
    store.submit("long", queue="q", timeout=3 * TTL, max_attempts=1)
    with running(worker):
        wait_until(lambda: len(started) == 2, what="both handlers")
        clock.advance(1.6)  # past the short job's own timeout only
        wait_until(lambda: store.get("short").state == "dead", what="the short job's end")
        for step in range(1, 4):  # past the handler's 5 s: the long job's own 30 s holds
            clock.advance(TTL / 3)
            wait_until(lambda s=step: worker.stats()["renewals"] >= s, what=f"renewal {step}")
        assert store.get("long").state == "leased"
        for step in range(4, 10):  # on, renewal by renewal, to past its 30 s
            clock.advance(TTL / 3)
            wait_until(
                lambda s=step: worker.stats()["renewals"] >= s or worker.stats()["timeouts"] == 2,
                what=f"renewal {step}",
            )
        wait_until(lambda: store.get("long").state == "dead", what="the long job's end")
    assert store.get("short").error == "timeout: handler ran longer than 1.5 s"
    assert store.get("long").error == "timeout: handler ran longer than 30 s"
    assert worker.stats()["timeouts"] == 2
    own = worker.handlers["q"]
    none = dataclasses.replace(own, timeout=None)
    plain = store.submit("plain", queue="other")
    assert (attempt_timeout(plain, own, 9.0), attempt_timeout(plain, none, 9.0)) == (5.0, 9.0)
    assert attempt_timeout(plain, none, None) is None
    assert attempt_timeout(store.get("short"), own, 9.0) == 1.5


# -- on the real clock -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["async", "thread", "process"])
def test_real_time_timeouts_fail_each_attempt_after_the_timeout(
    url: str, real_store: tenure.Store, tmp_path: Path, kind: str
) -> None:
    worker = tenure.Worker(
        url, ttl=5, retry=tenure.RetryPolicy(base=0.0), poll_interval=0.02, summary_every=0
    )
    hung = Hung(tmp_path)
    hung.register(worker, kind, timeout=0.3)
    real_store.submit("J", hung.payload(), queue="q", max_attempts=2)
    began = time.monotonic()
    run_burst(worker, timeout=20)
    elapsed = time.monotonic() - began
    job = real_store.get("J")
    assert (job.state, job.attempts, job.error) == (
        "dead",
        2,
        "timeout: handler ran longer than 0.3 s",
    )
    assert 0.6 <= elapsed < 10, elapsed  # two attempts of 0.3 s, not the 60 s they would take
    assert worker.stats()["timeouts"] == 2
    if kind == "process":
        pids = [record["pid"] for record in apps.read_events(hung.events)]
        assert len(pids) == 2
        assert os.getpid() not in pids
        assert not any(_alive(pid) for pid in pids)


# -- counters, options, bad input ----------------------------------------------------------


def test_timeouts_are_a_counter_and_a_metric() -> None:
    worker = tenure.Worker()
    assert worker.stats()["timeouts"] == 0
    assert "timeouts" in tenure.worker.COUNTERS
    pytest.importorskip("prometheus_client")
    names = {metric.name for metric in WorkerCollector(worker).collect()}
    assert "tenure_worker_timeouts" in names


@pytest.mark.parametrize(
    "value", [0, -1, 0.001, "5", True, float("nan"), float("inf"), 400 * 86400]
)
def test_bad_timeouts_are_refused(value: Any) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.Worker(timeout=value)
    assert caught.value.argument == "timeout"
    worker = tenure.Worker()
    with pytest.raises(tenure.InvalidArgument) as caught:
        worker.configure(timeout=value)
    assert caught.value.argument == "timeout"
    with pytest.raises(tenure.InvalidArgument) as caught:
        worker.register("q", apps.return_payload, timeout=value)
    assert caught.value.argument == "timeout"
    with pytest.raises(tenure.InvalidArgument) as caught:
        worker.handler("q", timeout=value)(apps.return_payload)
    assert caught.value.argument == "timeout"
    assert worker.handlers == {}  # nothing registered
    assert worker.stats()["claimed"] == 0


def test_good_timeouts_are_seconds() -> None:
    worker = tenure.Worker(timeout=timedelta(minutes=2))
    worker.register("a", apps.return_payload, timeout=0.5)
    worker.register("b", apps.return_payload)
    assert (worker.handlers["a"].timeout, worker.handlers["b"].timeout) == (0.5, None)
    worker.configure(timeout=None)  # no default timeout again


def test_cli_timeout_option(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'x.db'}"
    done = CliRunner().invoke(
        main, ["--store", store, "worker", "tests.worker.apps:app", "--timeout", "0"]
    )
    assert done.exit_code == 2, done.output
    assert "timeout:" in done.output
    before = apps.app.handlers
    try:
        with tenure.connect(store) as client:
            client.submit("J", {"hold": 30}, queue="sync", max_attempts=1)
            done = CliRunner().invoke(
                main,
                [
                    *("--store", store, "worker", "tests.worker.apps:app", "-q", "sync"),
                    *("--timeout", "0.3", "--burst", "--poll-interval", "0.02"),
                ],
            )
            assert done.exit_code == 0, done.output
            job = client.get("J")
        assert (job.state, job.error) == ("dead", "timeout: handler ran longer than 0.3 s")
    finally:
        apps.app.configure(timeout=None, queues=None)
    assert apps.app.handlers == before
