"""Counters a worker keeps about itself: dependency-free, thread-safe, cheap to read."""

from __future__ import annotations

import itertools
import threading
from bisect import bisect_left
from typing import Any

__all__ = [
    "COUNTERS",
    "HANDLER_BUCKETS",
    "ON_LOOP",
    "RENEW_BUCKET_KEYS",
    "RENEW_LATENCY_BUCKETS",
    "Durations",
    "Progress",
    "Stats",
]

# name -> what it counts (docs/worker.md lists the same table)
COUNTERS: dict[str, str] = {
    "claimed": "leases taken by this worker",
    "completed": "jobs completed (handler returned, store accepted)",
    "failed": "attempts recorded as failed (handler raised, or its process died)",
    "dead": "failed attempts that used the job's last attempt (job is now dead)",
    "retried": "failed attempts that will run again (the handler raised with attempts left, "
    "or called ctx.retry())",
    "claims_expired": "... of which: leases that arrived past their local deadline (a claim "
    "answered late, after a store outage): no handler started; claimed again once expired",
    "released": "ctx.release() calls recorded",
    "released_at_stop": "leases given back because the worker stopped before the handler ended",
    "leases_lost": "leases lost while a handler ran (not counting those given back at stop)",
    "lost_renewal_rejected": "... of which: the store rejected a renewal",
    "lost_deadline_passed": "... of which: the local deadline passed without a confirmed renewal",
    "timeouts": "attempts stopped at their handler's timeout (and failed: also in failed)",
    "cancelled_on_loss": "async handlers cancelled because their lease was lost",
    "killed_on_loss": "handler processes killed because their lease was lost",
    "completions_refused": "handlers that returned after losing their lease: result discarded",
    "stale_rejections": "complete/fail/release calls the store rejected as stale",
    "store_errors": "store calls that failed with StoreUnavailable (claim, wait, settle; each "
    "failed attempt counts)",
    "settle_retries": "complete/fail/release attempts repeated after StoreUnavailable (within "
    "the lease's local deadline)",
    "settles_given_up": "complete/fail/release calls given up because the store stayed "
    "unavailable until the lease's local deadline, or the deadline came before they could be "
    "sent (the job runs again; also in leases_lost)",
    "outages": "times the store became unavailable (one WARNING line each, one INFO line when "
    "it is back)",
    "renewals": "confirmed renewals",
    "renewal_errors": "renewals that failed without an answer (StoreUnavailable); retried "
    "while the lease's local deadline allows",
}

# Counters only the worker's event loop counts (`Stats.on_loop`).
ON_LOOP = frozenset({"completed"})

# Gauges and sums that are floats, reported next to the counters.
_TIMINGS = ("renew_latency_max", "renew_latency_sum")

# The upper bounds (seconds) of the renewal latency histogram: ``renew_latency_le_<bound>``
# in a snapshot counts the renewals that took at most that long (cumulative, as Prometheus
# histograms are; `tenure.worker.WorkerCollector` exports them).
RENEW_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RENEW_BUCKET_KEYS = tuple(f"renew_latency_le_{bound:g}" for bound in RENEW_LATENCY_BUCKETS)

# The upper bounds (seconds) of the handler duration histogram (handlers run longer than
# renewals take: up to minutes).
HANDLER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# (queue, outcome kind) -> (cumulative counts per bucket of HANDLER_BUCKETS, sum, count)
Durations = dict[tuple[str, str], tuple[list[int], float, int]]


class Stats:
    """Thread-safe counters of one `tenure.Worker`; `snapshot` returns a plain dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)  # those of ON_LOOP stay 0
        # The counters of `ON_LOOP`, written by the worker's event loop alone, once per job:
        # ``stats.on_loop[name] += 1`` without the lock (a ``+=`` on one key is not atomic
        # between threads, but no other thread writes these); `snapshot` copies them over
        # their places in ``_counts``, in `COUNTERS`' order. `incr` refuses them.
        self.on_loop: dict[str, int] = dict.fromkeys(ON_LOOP, 0)
        self._timings: dict[str, float] = dict.fromkeys(_TIMINGS, 0.0)
        self._renew_buckets = [0] * len(RENEW_LATENCY_BUCKETS)  # not cumulative here
        # (queue, outcome) -> [per-bucket counts (not cumulative; one more for +Inf), sum]:
        # bounded, as queues are the worker's handlers' and outcomes the kinds of `Outcome`.
        self._handled: dict[tuple[str, str], list[Any]] = {}

    def incr(self, name: str, amount: int = 1) -> None:
        assert name not in ON_LOOP, f"{name} is counted in Stats.on_loop"
        with self._lock:
            self._counts[name] += amount

    def incr_many(self, *names: str) -> None:
        """Add one to each of ``names`` in one step: no `snapshot` sees some and not the
        others (a total and its "... of which" counter, say)."""
        assert ON_LOOP.isdisjoint(names), f"{names} has counters of Stats.on_loop"
        with self._lock:
            for name in names:
                self._counts[name] += 1

    def renewal(self, latency: float) -> None:
        with self._lock:
            self._counts["renewals"] += 1
            self._timings["renew_latency_sum"] += latency
            if latency > self._timings["renew_latency_max"]:
                self._timings["renew_latency_max"] = latency
            slot = bisect_left(RENEW_LATENCY_BUCKETS, latency)
            if slot < len(self._renew_buckets):
                self._renew_buckets[slot] += 1

    def handled(self, queue: str, outcome: str, seconds: float) -> None:
        """A handler of ``queue`` ended with ``outcome`` after ``seconds``: on the worker's
        event loop alone, once per job, so without the lock (as `on_loop`); a reader on
        another thread copies each list in one step (`durations`). The count is the
        buckets' total, worked out when read."""
        slot = bisect_left(HANDLER_BUCKETS, seconds)  # past the last bound: the +Inf slot
        entry = self._handled.get((queue, outcome))
        if entry is None:
            with self._lock:  # a new key: `durations` copies the map under the lock
                entry = self._handled[(queue, outcome)] = [[0] * (len(HANDLER_BUCKETS) + 1), 0.0]
        entry[0][slot] += 1
        entry[1] += seconds

    def durations(self) -> Durations:
        """The handler durations so far, by (queue, outcome), with cumulative buckets (the
        sum may lag its buckets by a handler that is being counted right now)."""
        with self._lock:
            entries = list(self._handled.items())
        durations: Durations = {}
        for key, (buckets, total) in entries:
            counts = list(buckets)  # one step: never half of a `handled`'s increment
            durations[key] = (list(itertools.accumulate(counts[:-1])), total, sum(counts))
        return durations

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            values: dict[str, float] = dict(self._counts)
            values.update(self.on_loop)
            values.update(self._timings)
            buckets = list(itertools.accumulate(self._renew_buckets))
        values.update(zip(RENEW_BUCKET_KEYS, buckets, strict=True))
        renewals = values["renewals"]
        values["renew_latency_avg"] = values["renew_latency_sum"] / renewals if renewals else 0.0
        return values


# What a progress line counts, in order: (counter, word).
_PROGRESS = (
    ("completed", "done"),
    ("failed", "failed"),
    ("retried", "retried"),
    ("dead", "dead"),
    ("leases_lost", "lost"),
    # A handler that gives its job back (ctx.release) in a loop completes nothing: counted
    # here, such a worker's lines say what it does instead of going quiet.
    ("released", "released"),
    ("in_flight", "in flight"),
)


class Progress:
    """The one-line summaries of a running worker: `line` says what the counters are and how
    fast jobs complete since the previous line, or None when nothing changed."""

    def __init__(self, started: float) -> None:
        self.started = started
        self._last_time = started
        self._last: dict[str, float] = {}

    def line(self, values: dict[str, float], now: float) -> str | None:
        current = {name: values.get(name, 0) for name, _ in _PROGRESS}
        current["claimed"] = values.get("claimed", 0)
        if current == self._last or (not self._last and not any(current.values())):
            return None
        done_before = self._last.get("completed", 0)
        elapsed = now - self._last_time
        self._last, self._last_time = current, now
        rate = (current["completed"] - done_before) / elapsed if elapsed > 0 else 0.0
        return f"progress: {_counts(current)}; {_rate(rate)}"

    def final(self, values: dict[str, float], now: float) -> str:
        elapsed = now - self.started
        rate = values.get("completed", 0) / elapsed if elapsed > 0 else 0.0
        counts = {
            name: values.get(name, 0)
            for name, _ in _PROGRESS
            if name not in ("in_flight", "released")  # (released: with those at stop, below)
        }
        released = values.get("released", 0) + values.get("released_at_stop", 0)
        return (
            f"worker stopped after {elapsed:.1f} s: {_counts(counts)}, {released:g} released; "
            f"{_rate(rate)} on average"
        )


def _counts(values: dict[str, float]) -> str:
    return ", ".join(f"{values[name]:g} {word}" for name, word in _PROGRESS if name in values)


def _rate(per_second: float) -> str:
    return f"{per_second:.3g} jobs/s" if per_second < 1000 else f"{per_second:.0f} jobs/s"
