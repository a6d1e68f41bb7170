"""Store metrics for Prometheus: a `prometheus_client` collector over `Store.queue_stats`
(one bounded store query per scrape), and the text of one scrape for the dashboard's
``/metrics``.

==================================== ======== ==================================================
name                                 type     what
==================================== ======== ==================================================
``tenure_jobs{queue,state}``         gauge    live jobs by the store's state (``ready``: due or
                                              not; ``leased``: expired leases included)
``tenure_jobs_scheduled{queue}``     gauge    ready jobs not due yet (delay, retry backoff)
``tenure_leases_expired{queue}``     gauge    leased jobs whose lease expired, not claimed again
``tenure_oldest_ready_age_seconds``  gauge    how long the oldest due ready job of ``queue`` has
                                              waited (0 when none is due, and always for a
                                              lock's queue, ``tenure.lock:<name>``: a lock
                                              nobody holds is a ready job, but no work waits)
``tenure_store_up``                  gauge    1 when the store answered this scrape, 0 when
                                              it was unavailable or did not answer within
                                              ``METRICS_READ_TIMEOUT`` seconds
``tenure_store_stats_supported``     gauge    0 when the driver cannot count (no queue_stats)
==================================== ======== ==================================================

Labels carry queue names only (never job ids): as many series as queues.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

from .._queue_stats import StoreStats
from .._store import Store
from .._validate import validate_positive_seconds
from ..errors import StoreUnavailable
from ..locks import LOCK_QUEUE_PREFIX

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

__all__ = [
    "CONTENT_TYPE",
    "METRICS_READ_TIMEOUT",
    "StoreCollector",
    "render_stats",
    "store_families",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds a scrape waits for the store's counts before it answers tenure_store_up 0: within
# Prometheus' default 10 s scrape timeout, which a store that is away can outlast before it
# says so (a PostgreSQL pool waits for a connection, twice: 20-30 s).
METRICS_READ_TIMEOUT = 5.0


def store_families(stats: StoreStats | None, *, up: bool = True) -> list[Metric]:
    """The metric families of one `StoreStats` (None: the store cannot count)."""
    from prometheus_client.core import GaugeMetricFamily

    store_up = GaugeMetricFamily("tenure_store_up", "1 when the store answered, else 0")
    store_up.add_metric([], 1.0 if up else 0.0)
    supported = GaugeMetricFamily(
        "tenure_store_stats_supported",
        "1 when the store counts its live jobs by queue (every built-in store), 0 for a "
        "driver that cannot",
    )
    supported.add_metric([], 0.0 if up and stats is None else 1.0)
    families: list[Metric] = [store_up, supported]
    if stats is None:
        return families
    jobs = GaugeMetricFamily(
        "tenure_jobs", "Live jobs by queue and state", labels=["queue", "state"]
    )
    scheduled = GaugeMetricFamily(
        "tenure_jobs_scheduled", "Ready jobs not due yet, by queue", labels=["queue"]
    )
    expired = GaugeMetricFamily(
        "tenure_leases_expired",
        "Leased jobs whose lease expired and that no claim has taken again yet",
        labels=["queue"],
    )
    oldest = GaugeMetricFamily(
        "tenure_oldest_ready_age_seconds",
        "Seconds the oldest due ready job of the queue has waited, by store time",
        labels=["queue"],
    )
    for queue in stats.queues:
        jobs.add_metric([queue.queue, "ready"], queue.ready + queue.scheduled)
        jobs.add_metric([queue.queue, "leased"], queue.leased + queue.expired)
        scheduled.add_metric([queue.queue], queue.scheduled)
        expired.add_metric([queue.queue], queue.expired)
        # A lock nobody holds waits for no one: its age would only grow, and a backlog
        # alert on this gauge would fire for every idle lock.
        idle_lock = queue.queue.startswith(LOCK_QUEUE_PREFIX)
        oldest.add_metric([queue.queue], 0.0 if idle_lock else queue.oldest_ready_age)
    return [*families, jobs, scheduled, expired, oldest]


class StoreCollector:
    """A `prometheus_client` collector of a blocking `tenure.Store`'s metrics, one
    ``queue_stats`` query per scrape::

        from prometheus_client import REGISTRY, start_http_server
        REGISTRY.register(StoreCollector(tenure.connect(url)))
        start_http_server(9321)

    ``read_timeout``: seconds a scrape waits for the store (a positive finite number;
    `METRICS_READ_TIMEOUT` by default) before it answers ``tenure_store_up 0``.
    """

    def __init__(self, store: Store, read_timeout: float = METRICS_READ_TIMEOUT) -> None:
        seconds = validate_positive_seconds("read_timeout", read_timeout)
        self.store = store
        self.read_timeout = seconds
        self._lock = threading.Lock()
        self._read: Future[StoreStats | None] | None = None

    def collect(self) -> Iterator[Metric]:
        try:
            stats, up = self._reading().result(timeout=self.read_timeout), True
        except (StoreUnavailable, FutureTimeout):
            stats, up = None, False
        yield from store_families(stats, up=up)

    def _reading(self) -> Future[StoreStats | None]:
        """The read in flight, else a new one. A store that hangs holds one thread, not one
        per scrape: scrapes while it hangs wait on that same read (and answer 0 when it
        outlasts their bound), and a new read starts only once it has answered."""
        with self._lock:
            if self._read is None or self._read.done():
                self._read = Future()
                # A daemon thread, not a ThreadPoolExecutor's: those are joined at exit, and
                # a read that hangs would hold the process from exiting.
                threading.Thread(
                    target=self._run, args=(self._read,), name="tenure-store-metrics", daemon=True
                ).start()
            return self._read

    def _run(self, read: Future[StoreStats | None]) -> None:
        try:
            read.set_result(self.store.queue_stats())
        except BaseException as exc:  # any end settles the read, else every later scrape is 0
            read.set_exception(exc)

    def describe(self) -> list[Metric]:
        return []  # no query at registration: families are known at scrape time only


def render_stats(stats: StoreStats | None, *, up: bool = True) -> bytes:
    """The text exposition of one scrape (what ``/metrics`` answers)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.registry import Collector

    families = store_families(stats, up=up)

    class _Once(Collector):
        def collect(self) -> Iterator[Metric]:
            yield from families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Once())
    return generate_latest(registry)
