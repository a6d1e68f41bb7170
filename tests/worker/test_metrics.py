"""The worker's handler-duration histogram, scraped over HTTP from `serve_metrics` (what
``tenure worker --metrics-port`` serves) and parsed with prometheus_client's parser; the
lost leases by reason, whichever moment a scrape comes."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import pytest

import tenure
from tenure.worker import JobContext, MetricsServer, Stats, WorkerCollector, serve_metrics
from tenure.worker._lease import LeaseHandle
from tenure.worker._settle import note_loss
from tests.worker._support import run_burst

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

MakeWorker = Callable[..., tenure.Worker]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_handler_duration_is_a_histogram_by_queue_and_outcome(
    make_worker: MakeWorker, store: tenure.Store
) -> None:
    worker = make_worker()

    @worker.handler("good")
    def good(ctx: JobContext) -> str:
        return "ok"

    @worker.handler("bad")
    def bad(ctx: JobContext) -> None:
        raise RuntimeError("boom")

    store.submit("g1", queue="good")
    store.submit("g2", queue="good")
    store.submit("b1", queue="bad", max_attempts=1)
    run_burst(worker)
    port = _free_port()
    stop = serve_metrics(worker, port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    finally:
        stop()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    handled = families["tenure_handler_duration_seconds"]
    assert handled.type == "histogram"
    counts = {
        (sample.labels["queue"], sample.labels["outcome"]): sample.value
        for sample in handled.samples
        if sample.name.endswith("_count")
    }
    assert counts == {("good", "ok"): 2, ("bad", "error"): 1}
    infinite = [
        sample.value
        for sample in handled.samples
        if sample.name.endswith("_bucket") and sample.labels["le"] == "+Inf"
    ]
    assert sorted(infinite) == [1, 2]
    for sample in handled.samples:  # bounded labels: no job id, no owner
        assert set(sample.labels) <= {"queue", "outcome", "le"}
    sums = [s.value for s in handled.samples if s.name.endswith("_sum")]
    assert all(0 <= value < 10 for value in sums)


def test_serve_metrics_on_port_0_tells_the_port_it_bound(tmp_path: Path) -> None:
    # A port 0 (the system's pick) was unknown to the caller: serve_metrics returned only
    # how to stop it, and `tenure worker --metrics-port 0` logged http://127.0.0.1:0/metrics.
    worker = tenure.Worker(f"sqlite:///{tmp_path / 'store.db'}")  # not started: no store opened
    served = serve_metrics(worker, 0)
    try:
        assert isinstance(served, MetricsServer)
        assert served.host == "127.0.0.1"
        assert 0 < served.port <= 65535
        assert served.url == f"http://127.0.0.1:{served.port}/metrics"
        with urllib.request.urlopen(served.url, timeout=5) as answer:
            text = answer.read().decode()
    finally:
        served()  # still the stop function it was
    names = {family.name for family in text_string_to_metric_families(text)}
    assert "tenure_worker_claimed" in names
    with pytest.raises(urllib.error.URLError):  # stopped: connection refused
        urllib.request.urlopen(served.url, timeout=1)


class _Scraped(Stats):
    """`Stats` scraped after each of its locked updates: every moment a scrape can see."""

    def __init__(self) -> None:
        super().__init__()
        self.scrapes: list[dict[str, float]] = []

    def incr(self, name: str, amount: int = 1) -> None:
        super().incr(name, amount)
        self._scrape()

    def incr_many(self, *names: str) -> None:
        super().incr_many(*names)
        self._scrape()

    def _scrape(self) -> None:
        worker = SimpleNamespace(stats=self.snapshot)
        [lost] = [m for m in WorkerCollector(worker).collect() if m.name.endswith("leases_lost")]
        self.scrapes.append({sample.labels["reason"]: sample.value for sample in lost.samples})


def test_lost_leases_by_reason_never_go_down_whenever_scraped() -> None:
    # "other" is leases_lost less the known causes: a scrape between counting the total and
    # its cause saw it 1, then 0 (a counter going down). One locked step counts both.
    lease = tenure.Lease("J", "A", 1, 110.0, 10.0, 1, 1010.0, "0" * 48, "store")
    stats = _Scraped()
    kinds = ["renewal_rejected", "deadline_passed", "rejected_by_store", "renewal_rejected"]
    for kind in kinds:
        handle = LeaseHandle(lease, tenure.ManualClock())
        handle.mark_lost(f"lost: {kind}", kind)  # type: ignore[arg-type]
        note_loss(stats, handle)
    for before, after in pairwise(stats.scrapes):
        assert all(after[reason] >= count for reason, count in before.items()), stats.scrapes
    assert len(stats.scrapes) == len(kinds)  # one update per loss
    assert stats.scrapes[-1] == {"renewal_rejected": 2, "deadline_passed": 1, "other": 1}
    assert stats.snapshot()["leases_lost"] == 4


BAD_PORTS: list[object] = ["x", "9322", -1, 65536, 70000, 2.5, 9322.0, True, False, None, b"80"]
BAD_HOSTS: list[object] = ["", " 127.0.0.1", "127.0.0.1\n", "a\x00b", 42, None, b"127.0.0.1"]


@pytest.mark.parametrize("port", BAD_PORTS, ids=repr)
def test_serve_metrics_refuses_a_bad_port_before_binding(tmp_path: Path, port: object) -> None:
    worker = tenure.Worker(f"sqlite:///{tmp_path / 'store.db'}")  # not started: no store opened
    with pytest.raises(tenure.InvalidArgument) as caught:
        serve_metrics(worker, port)  # type: ignore[arg-type]
    assert caught.value.argument == "port"
    assert "65535" in caught.value.rule


@pytest.mark.parametrize("host", BAD_HOSTS, ids=repr)
def test_serve_metrics_refuses_a_bad_host_before_binding(tmp_path: Path, host: object) -> None:
    worker = tenure.Worker(f"sqlite:///{tmp_path / 'store.db'}")
    port = _free_port()
    with pytest.raises(tenure.InvalidArgument) as caught:
        serve_metrics(worker, port, host)  # type: ignore[arg-type]
    assert caught.value.argument == "host"
    with socket.socket() as sock:  # nothing was bound
        sock.bind(("127.0.0.1", port))
