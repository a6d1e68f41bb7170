"""What a worker says at the default log level: one line per failed attempt, the traceback
once when a job dies, periodic progress lines, a short final line, and the store it opened."""

from __future__ import annotations

import io
import json
import logging
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

import tenure
from tenure.cli._worker import _Formatter, _LiveProgress, _rich_console
from tenure.worker import JobContext
from tenure.worker._stats import Progress
from tests.backends import POSTGRES
from tests.worker._support import run_burst

MakeWorker = Callable[..., tenure.Worker]


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tenure" and r.levelno == level]


def test_a_failed_attempt_is_one_line_and_the_traceback_comes_once_when_the_job_dies(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tenure")
    worker = make_worker(retry=tenure.RetryPolicy(base=5, cap=5))

    @worker.handler("q")
    def broken(ctx: JobContext) -> None:
        raise ValueError(f"boom on attempt {ctx.attempt}")

    store.submit("J", queue="q", max_attempts=2)
    run_burst(worker)
    (warning,) = _records(caplog, logging.WARNING)
    message = warning.getMessage()
    assert message.startswith("job J: attempt 1 of 2 failed: ValueError: boom on attempt 1; ")
    assert "next attempt in " in message
    assert "\n" not in message
    assert warning.exc_info is None
    assert (warning.attempt, warning.error) == (1, "ValueError: boom on attempt 1")  # type: ignore[attr-defined]
    # The traceback is there for whoever asks for DEBUG.
    (debug,) = [r for r in _records(caplog, logging.DEBUG) if r.exc_info]
    assert debug.getMessage() == "traceback of job J"
    assert worker.stats()["retried"] == 1  # a failed attempt that will run again

    caplog.clear()
    clock.advance(10)
    run_burst(worker)
    assert not _records(caplog, logging.WARNING)
    (error,) = _records(caplog, logging.ERROR)
    assert error.getMessage() == "job J dead: attempt 2 of 2 failed: ValueError: boom on attempt 2"
    assert error.exc_info is not None
    # The traceback starts in the handler: tenure's own frames are cut from it.
    frames = traceback.extract_tb(error.exc_info[2])
    assert frames[0].name == "broken", [f.name for f in frames]
    assert not [r for r in _records(caplog, logging.DEBUG) if r.exc_info]
    stats = worker.stats()
    assert (stats["failed"], stats["retried"], stats["dead"]) == (2, 1, 1)
    assert store.get("J").state == "dead"


def test_an_idle_worker_names_the_store_it_looked_in(
    make_worker: MakeWorker, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    worker = make_worker()
    worker.register("q", lambda ctx: None)
    run_burst(worker)
    messages = [r.getMessage() for r in _records(caplog, logging.INFO)]
    messages = messages[[m.startswith("worker started on ") for m in messages].index(True) :]
    (idle,) = [m for m in messages if m.startswith("no job to claim")]
    store_url = idle.removeprefix("no job to claim in ").split(" (queues")[0]
    assert messages[0].startswith(f"worker started on {store_url}: queues q")
    assert idle.endswith("(queues q): exiting (burst mode)")


def test_a_burst_says_how_many_jobs_it_leaves_for_later(
    make_worker: MakeWorker, store: tenure.Store, caplog: pytest.LogCaptureFixture
) -> None:
    # "Run it until the queues are empty (--burst)": a burst exits while jobs wait out a
    # delay or a retry's backoff, and says so rather than look like it ran everything.
    caplog.set_level(logging.INFO, logger="tenure")
    store.submit("later-1", queue="q", delay=600)
    store.submit("later-2", queue="q", delay=600)
    store.submit("elsewhere", queue="other", delay=600)  # not a queue of this worker
    worker = make_worker()
    worker.register("q", lambda ctx: None)
    run_burst(worker)
    (idle,) = [m for m in (r.getMessage() for r in caplog.records) if "no job to claim" in m]
    assert idle.endswith(
        "exiting (burst mode); 2 job(s) of these queues are not due yet (a delay or a "
        "retry's backoff) and are left for a later run"
    ), idle


def test_the_store_url_is_logged_without_its_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    with POSTGRES.isolated_url(tmp_path) as url:  # the test server trusts: any password works
        with_password = url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
        assert "s3cret" in with_password
        worker = tenure.Worker(with_password, poll_interval=0.02)
        worker.register("q", lambda ctx: None)
        run_burst(worker)
    messages = [r.getMessage() for r in caplog.records]
    (started,) = [m for m in messages if m.startswith("worker started on ")]
    assert started.startswith("worker started on postgresql://postgres@127.0.0.1")
    assert not [m for m in messages if "s3cret" in m]
    assert not [r for r in caplog.records if "s3cret" in str(vars(r))]


class _Waiter(logging.Handler):
    """Sets ``seen`` once a record whose message starts with ``prefix`` and holds ``part``."""

    def __init__(self, prefix: str, part: str) -> None:
        super().__init__(logging.INFO)
        self.prefix, self.part = prefix, part
        self.seen = threading.Event()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(self.prefix):
            self.lines.append(message)
            if self.part in message:
                self.seen.set()


def test_a_running_worker_logs_progress_lines_and_a_short_final_line(
    make_worker: MakeWorker, store: tenure.Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    waiter = _Waiter("progress: ", "1 done")
    logging.getLogger("tenure").addHandler(waiter)
    worker = make_worker(concurrency=1, summary_every=0.02)

    @worker.handler("q")
    def handle(ctx: JobContext) -> None:
        if ctx.job_id == "second":  # runs until a progress line has counted the first
            assert waiter.seen.wait(10), "no progress line"

    try:
        store.submit("first", queue="q")
        store.submit("second", queue="q")
        run_burst(worker)
    finally:
        logging.getLogger("tenure").removeHandler(waiter)
    line = next(m for m in waiter.lines if "1 done" in m)
    assert line.startswith("progress: 1 done, 0 failed, 0 retried, 0 dead, 0 lost, 0 released, ")
    assert line.endswith(" jobs/s")
    final = [r for r in caplog.records if r.getMessage().startswith("worker stopped")]
    (record,) = final
    assert record.getMessage().startswith("worker stopped after ")
    assert ": 2 done, 0 failed, 0 retried, 0 dead, 0 lost, 0 released; " in record.getMessage()
    assert len(record.getMessage()) < 160
    assert record.counters["completed"] == 2  # type: ignore[attr-defined]
    # One field for the counters, which `tenure worker` prints in --json only: the line a
    # person reads stays short.
    assert not hasattr(record, "renew_latency_avg")
    text = _Formatter(json_mode=False).format(record)
    assert text.endswith(f"{record.getMessage()}  owner={worker.owner} store={record.store}")  # type: ignore[attr-defined]
    assert json.loads(_Formatter(json_mode=True).format(record))["counters"]["completed"] == 2


def test_progress_lines_say_nothing_when_nothing_changed() -> None:
    progress = Progress(started=100.0)
    values = {"completed": 0.0, "failed": 0.0, "in_flight": 0.0, "claimed": 0.0}
    assert progress.line(values, 110.0) is None  # idle from the start: silent
    values.update(completed=20, claimed=22, in_flight=2, failed=1, retried=1)
    line = progress.line(values, 120.0)
    assert line == (
        "progress: 20 done, 1 failed, 1 retried, 0 dead, 0 lost, 0 released, 2 in flight; 1 jobs/s"
    )
    assert progress.line(values, 130.0) is None  # nothing changed since
    values.update(completed=25, in_flight=0)
    assert progress.line(values, 135.0) == (
        "progress: 25 done, 1 failed, 1 retried, 0 dead, 0 lost, 0 released, 0 in flight; "
        "0.333 jobs/s"
    )
    assert progress.final(values, 150.0) == (
        "worker stopped after 50.0 s: 25 done, 1 failed, 1 retried, 0 dead, 0 lost, "
        "0 released; 0.5 jobs/s on average"
    )
    # A handler that gives its job back again and again completes nothing: the lines say so.
    values.update(released=7)
    assert progress.line(values, 140.0) == (
        "progress: 25 done, 1 failed, 1 retried, 0 dead, 0 lost, 7 released, 0 in flight; 0 jobs/s"
    )


def test_summary_every_is_validated() -> None:
    with pytest.raises(tenure.InvalidArgument, match="summary_every"):
        tenure.Worker(summary_every=-1)
    with pytest.raises(tenure.InvalidArgument, match="summary_every"):
        tenure.Worker(summary_every=0.001)
    tenure.Worker(summary_every=0)  # no progress lines


def test_the_live_line_on_a_terminal_shows_the_counters() -> None:
    from rich.console import Console

    worker = tenure.Worker()
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    console.print(_LiveProgress(worker))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "0 done" in text
    assert "0 in flight" in text
    assert "jobs/s" in text
    # Not a terminal (tests, pipes, --json): no live line.
    assert _rich_console(json_mode=False) is None
    assert _rich_console(json_mode=True) is None


def test_the_live_line_runs_beside_a_worker_on_a_terminal(
    make_worker: MakeWorker, store: tenure.Store
) -> None:
    from rich.console import Console

    from tenure.cli._worker import _live_progress

    worker = make_worker(summary_every=0)
    worker.register("q", lambda ctx: None)
    store.submit("J", queue="q")
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    with _live_progress(worker, console):
        run_burst(worker)
    assert "done" in console.file.getvalue()  # type: ignore[attr-defined]
    assert worker.stats()["completed"] == 1
