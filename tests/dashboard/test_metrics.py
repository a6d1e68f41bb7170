"""Prometheus metrics: the store's on the dashboard's /metrics (every store), and a
worker's on ``tenure worker --metrics-port``, scraped over HTTP and read back with
prometheus_client's own parser."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

import tenure
from tenure.dashboard import StoreCollector, create_app
from tenure.worker import WorkerCollector, serve_metrics
from tests.servers import free_port


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _types(text: str) -> dict[str, str]:
    return {family.name: family.type for family in text_string_to_metric_families(text)}


@pytest.fixture
def client(store: tenure.Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as opened:
        yield opened


def test_store_metrics_by_queue_and_state(
    store: tenure.Store, clock: tenure.ManualClock, client: TestClient
) -> None:
    store.submit("a1", queue="alpha")
    store.submit("a2", queue="alpha")
    store.submit("a3", queue="alpha", delay=100)
    store.submit("b1", queue="beta")
    assert store.claim("b1", "w", 3) is not None
    store.submit("c1", queue="gamma")
    lease = store.claim("c1", "w", 30)
    assert lease is not None
    store.complete(lease)
    clock.advance(4)

    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    values = _samples(answer.text)
    assert values[("tenure_store_up", ())] == 1
    assert values[("tenure_store_stats_supported", ())] == 1
    assert _types(answer.text)["tenure_jobs"] == "gauge"
    assert values[("tenure_jobs", (("queue", "alpha"), ("state", "ready")))] == 3
    assert values[("tenure_jobs", (("queue", "alpha"), ("state", "leased")))] == 0
    assert values[("tenure_jobs", (("queue", "beta"), ("state", "leased")))] == 1
    assert values[("tenure_jobs_scheduled", (("queue", "alpha"),))] == 1
    assert values[("tenure_leases_expired", (("queue", "beta"),))] == 1
    assert values[("tenure_leases_expired", (("queue", "alpha"),))] == 0
    assert values[("tenure_oldest_ready_age_seconds", (("queue", "alpha"),))] == pytest.approx(
        4.0, abs=0.01
    )
    # gamma has only a done job: no series; labels never carry a job id
    assert not any(dict(labels).get("queue") == "gamma" for _, labels in values)
    assert not any(
        value in ("a1", "a2", "a3", "b1", "c1") for _, labels in values for _, value in labels
    )


def test_a_lock_nobody_holds_is_no_backlog(
    store: tenure.Store, clock: tenure.ManualClock, client: TestClient
) -> None:
    # A lock is a job of its own queue, ready while nobody holds it: its age grew without
    # end, and a backlog alert on tenure_oldest_ready_age_seconds fired for every idle lock.
    with store.lock("nightly", ttl=30):
        pass  # taken and given back: the lock's job is ready from now on
    store.submit("work", queue="reports")
    clock.advance(600)
    values = _samples(client.get("/metrics").text)
    lock_queue = (("queue", "tenure.lock:nightly"),)
    assert values[("tenure_jobs", (*lock_queue, ("state", "ready")))] == 1  # still counted
    assert values[("tenure_oldest_ready_age_seconds", lock_queue)] == 0
    assert values[("tenure_oldest_ready_age_seconds", (("queue", "reports"),))] == pytest.approx(
        600.0, abs=0.01
    )
    page = client.get("/queues").text
    row = page[page.index("tenure.lock:nightly") :].split("</tr>")[0]
    assert "10 min" not in row  # no age shown for the lock's queue
    assert "—" in row


def test_the_store_collector_for_a_registry_of_your_own(store: tenure.Store) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    store.submit("x", queue="q")
    registry = CollectorRegistry()
    registry.register(StoreCollector(store))  # type: ignore[arg-type]
    values = _samples(generate_latest(registry).decode())
    assert values[("tenure_store_up", ())] == 1


def test_a_store_that_is_down_reports_up_0() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    class Down:
        def queue_stats(self) -> None:
            raise tenure.StoreUnavailable(
                "down for the test", operation="queue_stats", outcome_unknown=False
            )

    registry = CollectorRegistry()
    registry.register(StoreCollector(Down()))  # type: ignore[arg-type]
    assert _samples(generate_latest(registry).decode())[("tenure_store_up", ())] == 0


def test_the_store_collector_answers_up_0_in_time_when_the_store_hangs() -> None:
    # A PostgreSQL store that is away takes 20-30 s to say so: the collector's scrape then
    # outlasted Prometheus' 10 s timeout (tenure_store_up 0 never scraped), and each scrape
    # would hold one more thread while it hangs.
    from prometheus_client import CollectorRegistry, generate_latest

    release = threading.Event()
    calls: list[float] = []

    class Hangs:
        def queue_stats(self) -> None:
            calls.append(time.monotonic())
            release.wait(10)
            return None  # a driver that cannot count: up 1, stats_supported 0

    registry = CollectorRegistry()
    registry.register(StoreCollector(Hangs(), read_timeout=0.2))  # type: ignore[arg-type]
    try:
        for _ in range(3):
            started = time.monotonic()
            values = _samples(generate_latest(registry).decode())
            assert time.monotonic() - started < 2
            assert values[("tenure_store_up", ())] == 0
            assert values[("tenure_store_stats_supported", ())] == 1
        assert len(calls) == 1  # the scrapes while it hung waited on the one read in flight
    finally:
        release.set()
    values = _samples(generate_latest(registry).decode())  # the read in flight, or a new one
    assert values[("tenure_store_up", ())] == 1
    assert values[("tenure_store_stats_supported", ())] == 0


class NoCounts:
    def queue_stats(self) -> None:
        return None


def test_the_store_collector_read_timeout() -> None:
    from tenure.dashboard import _app

    default = StoreCollector(NoCounts())  # type: ignore[arg-type]
    assert default.read_timeout == _app.METRICS_READ_TIMEOUT == 5.0
    assert StoreCollector(NoCounts(), 1).read_timeout == 1.0  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [0, -1, 0.0, float("nan"), float("inf"), 10**400, "5", True, None],
    ids=lambda bad: repr(bad)[:12],
)
def test_the_store_collector_refuses_a_bad_read_timeout(bad: object) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        StoreCollector(NoCounts(), read_timeout=bad)  # type: ignore[arg-type]
    assert caught.value.argument == "read_timeout"
    assert "number" in caught.value.rule


def test_metrics_answers_up_0_in_time_when_the_store_is_slow_to_say_it_is_away(
    store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PostgreSQL store that is away took 20-30 s to say so (its pool waits for a
    # connection): past Prometheus' scrape timeout, tenure_store_up 0 was never scraped.
    from tenure.dashboard import _app

    monkeypatch.setattr(_app, "METRICS_READ_TIMEOUT", 0.2)
    release = threading.Event()

    def hangs() -> None:
        release.wait(10)

    monkeypatch.setattr(store, "queue_stats", hangs)
    try:
        with TestClient(create_app(store)) as client:
            started = time.monotonic()
            scraped = client.get("/metrics")
            took = time.monotonic() - started
    finally:
        release.set()
    assert scraped.status_code == 200
    assert _samples(scraped.text)[("tenure_store_up", ())] == 0
    assert took < 2


# -- worker metrics ---------------------------------------------------------------------


def test_renewal_latency_buckets_are_cumulative() -> None:
    from tenure.worker._stats import Stats

    stats = Stats()
    for latency in (0.003, 0.005, 0.07, 20.0):
        stats.renewal(latency)
    values = stats.snapshot()
    assert values["renew_latency_le_0.005"] == 2
    assert values["renew_latency_le_0.1"] == 3
    assert values["renew_latency_le_10"] == 3  # 20 s is only in +Inf (the count)
    assert values["renewals"] == 4


def test_worker_collector_exports_every_counter() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    class Fake:
        def stats(self) -> dict[str, float]:
            values: dict[str, float] = dict.fromkeys(tenure.worker.COUNTERS, 0)
            values.update(
                claimed=7,
                completed=4,
                failed=2,
                dead=1,
                leases_lost=5,
                lost_renewal_rejected=2,
                lost_deadline_passed=1,
                stale_rejections=3,
                renewals=2,
                renew_latency_sum=0.3,
                in_flight=1,
            )
            values["renew_latency_le_0.1"] = 1
            values["renew_latency_le_0.25"] = 2
            return values

    registry = CollectorRegistry()
    registry.register(WorkerCollector(Fake()))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    values = _samples(text)
    for name in tenure.worker.COUNTERS:
        if not name.startswith("lost_") and name != "leases_lost":
            assert (f"tenure_worker_{name}_total", ()) in values, name
    assert values[("tenure_worker_claimed_total", ())] == 7
    assert values[("tenure_worker_stale_rejections_total", ())] == 3
    lost = {dict(labels)["reason"]: v for (n, labels), v in values.items() if "leases_lost" in n}
    assert lost == {"renewal_rejected": 2, "deadline_passed": 1, "other": 2}
    assert values[("tenure_worker_renewal_latency_seconds_bucket", (("le", "0.1"),))] == 1
    assert values[("tenure_worker_renewal_latency_seconds_bucket", (("le", "+Inf"),))] == 2
    assert values[("tenure_worker_renewal_latency_seconds_count", ())] == 2
    assert values[("tenure_worker_renewal_latency_seconds_sum", ())] == pytest.approx(0.3)
    assert values[("tenure_worker_jobs_in_flight", ())] == 1
    assert _types(text)["tenure_worker_renewal_latency_seconds"] == "histogram"


@pytest.mark.slow
def test_a_real_worker_scraped_over_http(url: str, real_store: tenure.Store) -> None:
    worker = tenure.Worker(url, concurrency=2, ttl=1.0, renew_every=0.2, poll_interval=0.1)

    @worker.handler("work")
    def work(ctx: tenure.JobContext) -> str:
        if ctx.payload == "boom":
            raise RuntimeError("boom")
        if ctx.payload == "slow":
            time.sleep(0.7)  # long enough for renewals
        return "ok"

    real_store.submit("ok", "fine", queue="work")
    real_store.submit("slow", "slow", queue="work")
    real_store.submit("bad", "boom", queue="work", max_attempts=1)
    port = free_port()
    stop = serve_metrics(worker, port)
    try:
        worker.run(burst=True, install_signal_handlers=False)
        answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    finally:
        stop()
    assert answer.status_code == 200
    values = _samples(answer.text)
    assert values[("tenure_worker_claimed_total", ())] == 3
    assert values[("tenure_worker_completed_total", ())] == 2
    assert values[("tenure_worker_failed_total", ())] == 1
    assert values[("tenure_worker_dead_total", ())] == 1
    assert values[("tenure_worker_jobs_in_flight", ())] == 0
    renewals = values[("tenure_worker_renewals_total", ())]
    assert renewals >= 1
    assert values[("tenure_worker_renewal_latency_seconds_count", ())] == renewals
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1)  # stopped


def test_worker_metrics_port_option_is_offered() -> None:
    from click.testing import CliRunner

    from tenure.cli import main

    done = CliRunner().invoke(main, ["worker", "--help"])
    assert "--metrics-port" in done.output
    assert "--metrics-host" in done.output


@pytest.mark.slow
@pytest.mark.parametrize("asked", ["a free port", "port 0"])
def test_tenure_worker_metrics_port(tmp_path: Path, asked: str) -> None:
    (tmp_path / "metrics_app.py").write_text(
        "import tenure\n"
        "worker = tenure.Worker()\n"
        "@worker.handler('w')\n"
        "def handle(ctx):\n"
        "    return ctx.payload\n"
    )
    url = f"sqlite:///{tmp_path / 'worker.db'}"
    with tenure.connect(url) as store:
        store.submit("one", 1, queue="w")
        store.submit("two", 2, queue="w")
    given = free_port() if asked == "a free port" else 0
    command = [sys.executable, "-m", "tenure", "--store", url, "worker", "metrics_app:worker"]
    process = subprocess.Popen(
        [*command, "--metrics-port", str(given), "--poll-interval", "0.1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = process.stdout
    assert output is not None
    lines: list[str] = []  # read as they come: with port 0, only the log line tells the port

    def read() -> None:
        for line in output:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    logged = re.compile(r"worker metrics on http://127\.0\.0\.1:(\d+)/metrics")
    try:
        deadline = time.monotonic() + 30
        while not (said := logged.search("".join(lines))):
            assert time.monotonic() < deadline, f"no metrics log line in 30 s: {lines}"
            assert process.poll() is None, "".join(lines)
            time.sleep(0.05)
        port = int(said.group(1))
        assert port != 0
        if given:
            assert port == given
        values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        while values.get(("tenure_worker_completed_total", ())) != 2:
            assert time.monotonic() < deadline, f"no metrics in 30 s: {values}"
            assert process.poll() is None, "".join(lines)
            with contextlib.suppress(httpx.TransportError):
                values = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text)
            time.sleep(0.1)
        assert values[("tenure_worker_claimed_total", ())] == 2
        assert values[("tenure_worker_jobs_in_flight", ())] == 0
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        reader.join(timeout=30)
    assert process.returncode == 0, "".join(lines)
