"""Counters a worker keeps about itself: dependency-free, thread-safe, cheap to read."""

from __future__ import annotations

import threading

__all__ = ["COUNTERS", "Stats"]

# name -> what it counts (docs/worker.md lists the same table)
COUNTERS: dict[str, str] = {
    "claimed": "leases taken by this worker",
    "completed": "jobs completed (handler returned, store accepted)",
    "failed": "attempts recorded as failed (handler raised, or its process died)",
    "dead": "failed attempts that used the job's last attempt (job is now dead)",
    "retried": "ctx.retry() calls recorded",
    "released": "ctx.release() calls recorded",
    "released_at_stop": "leases given back because the worker stopped before the handler ended",
    "leases_lost": "leases lost while a handler ran (not counting those given back at stop)",
    "lost_renewal_rejected": "... of which: the store rejected a renewal",
    "lost_deadline_passed": "... of which: the local deadline passed without a confirmed renewal",
    "cancelled_on_loss": "async handlers cancelled because their lease was lost",
    "killed_on_loss": "handler processes killed because their lease was lost",
    "completions_refused": "handlers that returned after losing their lease: result discarded",
    "stale_rejections": "complete/fail/release calls the store rejected as stale",
    "store_errors": "store calls that failed with StoreUnavailable (claim, settle)",
    "renewals": "confirmed renewals",
    "renewal_errors": "renewals that failed without an answer (StoreUnavailable); retried",
}

# Gauges and sums that are floats, reported next to the counters.
_TIMINGS = ("renew_latency_max", "renew_latency_sum")


class Stats:
    """Thread-safe counters of one `tenure.Worker`; `snapshot` returns a plain dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._timings: dict[str, float] = dict.fromkeys(_TIMINGS, 0.0)

    def incr(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[name] += amount

    def renewal(self, latency: float) -> None:
        with self._lock:
            self._counts["renewals"] += 1
            self._timings["renew_latency_sum"] += latency
            if latency > self._timings["renew_latency_max"]:
                self._timings["renew_latency_max"] = latency

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            values: dict[str, float] = dict(self._counts)
            values.update(self._timings)
        renewals = values["renewals"]
        values["renew_latency_avg"] = values["renew_latency_sum"] / renewals if renewals else 0.0
        return values
