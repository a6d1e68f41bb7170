"""A worker's counters for Prometheus: `WorkerCollector` reads `Worker.stats` at each scrape
(nothing is added to the hot path; the counters are the ones `Stats` keeps anyway).

Every counter of `COUNTERS` is ``tenure_worker_<name>_total``, except the causes of a lost
lease, which are the ``reason`` label of ``tenure_worker_leases_lost_total``
(``renewal_rejected``, ``deadline_passed``, ``other``); renewal latency is the histogram
``tenure_worker_renewal_latency_seconds``; jobs in flight the gauge
``tenure_worker_jobs_in_flight``; how long handlers ran the histogram
``tenure_handler_duration_seconds`` with the labels ``queue`` (the worker's handlers'
queues) and ``outcome`` (how the handler ended: ``ok``, ``error``, ``release``, ``retry``,
``lost``, ``abandoned``, ``died``). No job id or owner is a label.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ._stats import COUNTERS, HANDLER_BUCKETS, RENEW_BUCKET_KEYS, RENEW_LATENCY_BUCKETS, Durations

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

__all__ = ["MetricsServer", "WorkerCollector", "serve_metrics"]

_LOSS_REASONS = {
    "lost_renewal_rejected": "renewal_rejected",
    "lost_deadline_passed": "deadline_passed",
}


class WorkerCollector:
    """A `prometheus_client` collector of one worker (anything with ``stats()``, as
    `tenure.Worker` has)::

        from prometheus_client import REGISTRY, start_http_server
        REGISTRY.register(WorkerCollector(worker))
        start_http_server(9322)
    """

    def __init__(self, worker: Any) -> None:
        self.stats: Callable[[], dict[str, float]] = worker.stats
        self.durations: Callable[[], Durations] = getattr(worker, "handler_durations", dict)

    def describe(self) -> list[Metric]:
        return list(self.collect())

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        values = self.stats()
        for name, text in COUNTERS.items():
            if name in _LOSS_REASONS or name == "leases_lost":
                continue
            yield CounterMetricFamily(f"tenure_worker_{name}", text, value=values.get(name, 0))
        lost = CounterMetricFamily(
            "tenure_worker_leases_lost",
            "Leases lost while a handler ran, by reason",
            labels=["reason"],
        )
        explained = 0.0
        for counter, reason in _LOSS_REASONS.items():
            lost.add_metric([reason], values.get(counter, 0))
            explained += values.get(counter, 0)
        lost.add_metric(["other"], max(0.0, values.get("leases_lost", 0) - explained))
        yield lost
        latency = HistogramMetricFamily(
            "tenure_worker_renewal_latency_seconds",
            "Seconds from sending a renewal to its confirmation",
        )
        buckets = [
            (f"{bound:g}", values.get(key, 0))
            for bound, key in zip(RENEW_LATENCY_BUCKETS, RENEW_BUCKET_KEYS, strict=True)
        ]
        buckets.append(("+Inf", values.get("renewals", 0)))
        latency.add_metric([], buckets, sum_value=values.get("renew_latency_sum", 0.0))
        yield latency
        yield GaugeMetricFamily(
            "tenure_worker_jobs_in_flight",
            "Jobs whose handler is running now",
            value=values.get("in_flight", 0),
        )
        yield self._durations(HistogramMetricFamily)

    def _durations(self, family: Any) -> Metric:
        handled = family(
            "tenure_handler_duration_seconds",
            "Seconds a handler ran, by queue and how it ended",
            labels=["queue", "outcome"],
        )
        for (queue, outcome), (cumulative, total, count) in sorted(self.durations().items()):
            buckets = [
                (f"{bound:g}", n) for bound, n in zip(HANDLER_BUCKETS, cumulative, strict=True)
            ]
            buckets.append(("+Inf", count))
            handled.add_metric([queue, outcome], buckets, sum_value=total)
        return handled  # type: ignore[no-any-return]


class MetricsServer:
    """What `serve_metrics` started: ``host``, ``port`` (the one bound: the system's pick
    when 0 was asked for) and ``url`` of its ``/metrics``; call it (or `stop`) to stop."""

    def __init__(self, server: Any, thread: threading.Thread, host: str) -> None:
        self._server = server
        self._thread = thread
        self.host = host
        self.port = int(server.server_address[1])
        address = f"[{host}]" if ":" in host else host
        self.url = f"http://{address}:{self.port}/metrics"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __call__(self) -> None:
        self.stop()  # serve_metrics returned a bare stop function before: still one

    def __repr__(self) -> str:
        return f"MetricsServer({self.url!r})"


def serve_metrics(worker: Any, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``worker``'s metrics on ``http://host:port/metrics`` (a thread of
    prometheus_client's); returns the `MetricsServer` (call it to stop it). ``port``: an int
    from 0 to 65535 (0: one the system picks, then read ``.port``); ``host``: the address to
    listen on."""
    _check_address(port, host)
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as exc:
        raise ImportError(
            "worker metrics need prometheus_client: pip install 'tenure[metrics]'",
            name=exc.name,
        ) from exc
    registry = CollectorRegistry()
    registry.register(WorkerCollector(worker))
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(server, thread, host)


def _check_address(port: object, host: object) -> None:
    """`InvalidArgument` for a ``port`` that is not an int from 0 to 65535 (a bool is not
    one) or a ``host`` that is not a non-empty str without control characters: refused
    here rather than by the socket (gaierror, OverflowError, a TypeError)."""
    if isinstance(port, bool) or not isinstance(port, int):
        raise InvalidArgument("port", f"must be an int from 0 to 65535, not {type(port).__name__}")
    if not 0 <= port <= 65535:
        raise InvalidArgument("port", f"must be from 0 to 65535, got {port}")
    if not isinstance(host, str):
        raise InvalidArgument(
            "host", f"must be a str (an address to listen on), not {type(host).__name__}"
        )
    if not host or not host.isprintable() or host != host.strip():
        raise InvalidArgument(
            "host", f"must be a host name or address to listen on (e.g. '127.0.0.1'), got {host!r}"
        )
