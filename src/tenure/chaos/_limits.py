"""I6 queue limits (``tenure chaos --workload flow``): no moment of store time had more
leases of a limited queue than its limit, and no window of store time saw more leases of a
rate-limited queue start than its token bucket allows.

A queue's limit is what the run set through the store (a ``queue-limit`` event of the
history); a job's queue is the one it was submitted to. The store counts a lease from its
claim until it is completed, released, failed or cancelled, or expires by store time
(docs/reference.md, queue limits), so the unit replays the same: at each lease's start,
the leases of its queue live then (started, not ended, not expired) must be at most the
limit, the new one included. Each bound is the one the history proves, so that no
interleaving the store may legitimately have seen is flagged:

* a lease starts when the claim granted it: its ``lease_until`` less the claim's TTL (on
  PostgreSQL a limited queue's claim reads its time after the queue's lock, later than the
  statement's own clock reading, which is the claim's ``store_now``);
* it expires at the ``lease_until`` of its claim, or of a renewal the store accepted whose
  answer came back before that moment (a renewal reads the store's clock before it
  commits: one still in flight, stopped with its store backend say, may not have been
  counted by a claim that came between);
* it ends at the store time of the settle (or cancel) that ended it, or as soon as a
  settle whose answer was lost was sent (it may have applied at once).

A claim whose answer was lost took leases the history does not know: they are not
counted (the check can only miss a violation for it, never make one up). Across a
PostgreSQL failover the promoted replica may not know the old primary's leases: a lease
that a failover lies between is not counted either (``limit_overlaps_failover``).

The unit also records each limited queue's peak (the most leases live at once) in the
verdict's ``info["limits"]``: a queue that never reached its limit tested nothing.

A rate (a ``queue-rate`` event: ``per_second`` and ``burst``) is a token bucket by store
time that starts full (docs/reference.md, queue rates): however the leases of the queue
fall, the ones started in any window of store time ``[s, e]`` are at most ``burst +
per_second * (e - s)``. The unit checks every window that starts and ends at a lease's
start (the fullest ones), with each start as the claim granted it (its ``lease_until``
less the claim's TTL), and records the queue's fullest draw, the most tokens a window took
beyond what it refilled, against the burst. A lease whose claim did not answer with its
``lease_until`` is not counted, nor a window a failover lies in (the promoted replica's
bucket may be behind the old primary's).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ._context import EPS, Context
from ._failover import crossed, failovers
from ._verdict import Interval, Violation

__all__ = ["SLACK", "queue_limits"]

# Seconds: how far a store time estimated from a host time (an answer's arrival, moved by
# the run's calibrated offset) may be off.
SLACK = 0.1
# Seconds: the stores count a token due within 10 µs as there (docs/reference.md, queue
# rates), so a window may refill that much early at each end.
TOKEN_EARLY = 10e-6


@dataclass
class _Lease:
    lease: Interval
    start: float  # when the claim granted it, in store time
    until: float  # the claim's lease_until
    exact: bool  # start from the claim's lease_until and TTL, not from a host time
    renewals: list[tuple[float, float]] = field(default_factory=list)  # (answered, until)

    def end_by(self, t: float, offset: float) -> float:
        """When this lease ended or expired, as far as the history proves it by ``t``."""
        until = self.until
        for answered, renewed in self.renewals:
            if answered + offset <= t - SLACK:
                until = max(until, renewed)
        end = until
        if self.lease.end_at is not None:
            end = min(end, self.lease.end_at)
        if self.lease.settle_sent is not None:
            end = min(end, self.lease.settle_sent - SLACK)
        return end


def _limits(ctx: Context) -> dict[str, int]:
    found: dict[str, int] = {}
    for event in ctx.paired.events.get("queue-limit", []):
        if event.get("queue") is not None and event.get("limit") is not None:
            found[str(event["queue"])] = int(event["limit"])
    return found


def _rates(ctx: Context) -> dict[str, tuple[float, int]]:
    found: dict[str, tuple[float, int]] = {}
    for event in ctx.paired.events.get("queue-rate", []):
        if event.get("queue") is not None and event.get("per_second") is not None:
            found[str(event["queue"])] = (float(event["per_second"]), int(event["burst"]))
    return found


def _queues(ctx: Context) -> dict[str, str]:
    """Each job's queue: from its submit, else its final state."""
    queue_of = {
        str(e["job"]): str(e["queue"])
        for e in ctx.finals.values()
        if e.get("job") is not None and e.get("queue") is not None
    }
    for op in ctx.paired.of("submit"):
        if op.get("job") is not None and op.get("queue") is not None:
            queue_of[str(op["job"])] = str(op["queue"])
    return queue_of


def _granted(ctx: Context, lease: Interval) -> _Lease:
    """The lease as its claim granted it (start and lease_until)."""
    op = ctx.paired.ops.get(lease.op, {})
    ttl = float(op.get("ttl") or 0.0)
    until: Any = None
    if op.get("f") == "claim":
        until = op.get("lease_until")
    else:
        for claim in op.get("claims", []):
            gen = int(claim.get("row_gen", claim.get("gen", 0)) or 0)
            if claim.get("job") == lease.job and gen == lease.gen:
                until = claim.get("lease_until")
    if until is None or ttl <= 0:
        return _Lease(lease, lease.start, lease.until, exact=False)
    return _Lease(lease, max(lease.start, float(until) - ttl), float(until), exact=True)


def _leases(ctx: Context, jobs: set[str]) -> list[_Lease]:
    found = [_granted(ctx, c) for job in jobs for c in ctx.claims.intervals.get(job, [])]
    by_interval = {id(f.lease): f for f in found}
    for op in ctx.holder_ops:
        if op.get("f") != "renew" or op["type"] != "ok" or op.get("repeat"):
            continue
        if op.get("job") not in jobs or op.get("lease_until") is None:
            continue
        interval = ctx.leases.interval_of(op)
        lease = by_interval.get(id(interval)) if interval is not None else None
        if lease is not None:
            lease.renewals.append((float(op.get("t") or 0.0), float(op["lease_until"])))
    return sorted(found, key=lambda f: (f.start, f.lease.job, f.lease.gen))


def _over(queue: str, limit: int, t: float, live: list[_Lease]) -> Violation:
    held = "; ".join(
        f"job {f.lease.job} gen {f.lease.gen} ({f.lease.owner}, from {f.start:.6f}) "
        f"[op {f.lease.op}]"
        for f in live[:10]
    )
    return Violation(
        "I6",
        live[-1].lease.job,
        f"queue {queue} (at most {limit} leased): {len(live)} leases were live at store "
        f"time {t:.6f}: {held}",
        [f.lease.op for f in live],
    )


def _check_queue(
    ctx: Context, queue: str, limit: int, leases: list[_Lease], windows: list[tuple[float, float]]
) -> tuple[list[Violation], int]:
    """The violations of one queue, and its peak."""
    found: list[Violation] = []
    peak = 0
    active: list[_Lease] = []
    for new in leases:
        t = new.start
        active = [f for f in active if f.lease.end > t + EPS]  # an upper bound of its end
        active.append(new)
        live = [f for f in active if f.end_by(t, ctx.offset) > t + EPS or f is new]
        if len(live) > limit and windows:
            kept = [f for f in live if f is new or not crossed(windows, f.start, t)]
            ctx.counts["limit_overlaps_failover"] += len(kept) <= limit
            live = kept
        peak = max(peak, len(live))
        if len(live) > limit:
            found.append(_over(queue, limit, t, live))
    return found, peak


def _too_fast(queue: str, rate: tuple[float, int], window: list[_Lease]) -> Violation:
    per_second, burst = rate
    first, last = window[0], window[-1]
    return Violation(
        "I6",
        last.lease.job,
        f"queue {queue} (at most {per_second:g} started a second, burst {burst}): "
        f"{len(window)} leases started in {last.start - first.start:.6f} s of store time, "
        f"from {first.start:.6f} (job {first.lease.job} gen {first.lease.gen}) to "
        f"{last.start:.6f} (job {last.lease.job} gen {last.lease.gen})",
        [f.lease.op for f in window],
    )


def _check_rate(
    queue: str, rate: tuple[float, int], leases: list[_Lease], windows: list[tuple[float, float]]
) -> tuple[list[Violation], float]:
    """The violations of one rate-limited queue, and its fullest draw (tokens taken in a
    window beyond what the window refilled)."""
    per_second, burst = rate
    starts = [f for f in leases if f.exact]
    found: list[Violation] = []
    drawn = 0.0
    for j, last in enumerate(starts):
        worst: list[_Lease] | None = None
        for i in range(j + 1):
            first = starts[i]
            if windows and crossed(windows, first.start, last.start):
                continue
            taken = (j - i + 1) - per_second * (last.start - first.start + 2 * TOKEN_EARLY)
            drawn = max(drawn, taken)
            if taken > burst + EPS and worst is None:
                worst = starts[i : j + 1]
        if worst is not None:
            found.append(_too_fast(queue, rate, worst))
    return found, drawn


def queue_limits(ctx: Context) -> list[Violation]:
    """I6: per limited queue, at most its limit of leases live at any store time; per
    rate-limited queue, no more leases started in any window than its bucket allows."""
    limits, rates = _limits(ctx), _rates(ctx)
    fails = [op for op in ctx.holder_ops if op.get("f") == "fail" and op["type"] == "ok"]
    ctx.counts["timeouts"] = sum(
        str(op.get("reason", "")).startswith("timeout:") and not op.get("repeat") for op in fails
    )
    if not limits and not rates:
        return []
    jobs: dict[str, set[str]] = defaultdict(set)
    for job, queue in _queues(ctx).items():
        jobs[queue].add(job)
    windows = failovers(ctx)
    found: list[Violation] = []
    summary = []
    for queue, limit in sorted(limits.items()):
        leases = _leases(ctx, jobs.get(queue, set()))
        violations, peak = _check_queue(ctx, queue, limit, leases, windows)
        found += violations
        summary.append({"queue": queue, "limit": limit, "peak": peak, "leases": len(leases)})
    for queue, rate in sorted(rates.items()):
        leases = _leases(ctx, jobs.get(queue, set()))
        violations, drawn = _check_rate(queue, rate, leases, windows)
        found += violations
        summary.append(
            {
                "queue": queue,
                "per_second": rate[0],
                "burst": rate[1],
                "drawn": round(drawn, 3),
                "leases": len(leases),
            }
        )
    ctx.info["limits"] = summary
    return found
