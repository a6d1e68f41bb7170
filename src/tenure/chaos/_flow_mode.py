"""``tenure chaos --workload flow``: the jobs workload with the flow controls of issue #18.

Everything of the jobs workload (the same workers, handlers, sink, storms and faults), and:

* **priorities**: every job is submitted with one of five priorities (-2 to 2, from the
  seed), so the workers' claims order them (highest first, the oldest within one);
* **queue limits and rates**: the jobs are spread over four queues of the run's own: the
  run's queue (no limit), two set with `Store.set_queue_limit` before the workers start,
  ``<queue>-limit1`` (at most 1 leased at once, fleet-wide) and ``<queue>-limit3`` (at most
  3), and one set with `Store.set_queue_rate`, ``<queue>-rate`` (at most 4 jobs started a
  second, fleet-wide, in bursts of at most 2); the storms and cancels pick jobs of all
  four;
* **timeouts**: some jobs carry a short timeout of their own (``submit(timeout=)``, less
  than half a TTL) and a handler that overruns it on its first attempt (or its first two):
  the worker's timeout path fires (the lease no longer renewed, the attempt failed while
  the store still holds it) under the faults, and the job's next attempt, short, must end
  it. A timed-out attempt is an ended attempt: I1-I5 apply to it as to any other.

The checker adds **I6 queue limits** (tenure.chaos._limits): for each limited queue, no
moment of store time had more than its limit of unexpired, unended leases; for each
rate-limited queue, no window of store time saw more leases start than its bucket allows
(its burst, plus its rate times the window's length).

Priorities are not checked: under concurrency and retries a priority is a preference of
each claim among the jobs ready then (docs/design.md §7), and which jobs were ready at a
claim's store time (backoffs, expiries, other claims in flight skipping locked rows) is
not in the history. The run puts them under the faults (every claim of the run orders by
them); benchmarks/priority_cost.py measures what they cost.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LIMITS",
    "PRIORITIES",
    "FlowJob",
    "flow_limits",
    "flow_plan",
    "flow_queues",
    "flow_rates",
    "handler_seconds",
]

PRIORITIES = (-2, -1, 0, 1, 2)
LIMITS = (("-limit1", 1), ("-limit3", 3))  # queue suffix, fleet-wide limit
RATES = (("-rate", 4.0, 2),)  # queue suffix, jobs started a second, burst (fleet-wide)
SHARES = (0.15, 0.2, 0.15)  # the share of the jobs in each limited queue, then rated one
TIMED = 0.2  # the share of the jobs with a timeout of their own (short jobs only)


@dataclass(frozen=True)
class FlowJob:
    """How one job is submitted: its queue, priority and timeout, and its payload."""

    queue: str
    priority: int = 0
    timeout: float | None = None
    payload: dict[str, Any] | None = None


def flow_queues(queue: str) -> list[str]:
    """The run's queues: its own, then the limited ones, then the rate-limited one."""
    return [queue, *(queue + suffix for suffix, _ in LIMITS), *flow_rates(queue)]


def flow_limits(queue: str) -> dict[str, int]:
    """The limited queues of the run and their limits."""
    return {queue + suffix: limit for suffix, limit in LIMITS}


def flow_rates(queue: str) -> dict[str, tuple[float, int]]:
    """The rate-limited queues of the run: jobs started a second, and burst."""
    return {queue + suffix: (per_second, burst) for suffix, per_second, burst in RATES}


def flow_plan(seed: int, work: dict[str, float], queue: str, ttl: float) -> dict[str, FlowJob]:
    """Each job's queue, priority and timeout, from the seed. The queue limited to 1 gets
    short jobs only (a long one, kept by renewals over several TTLs, goes to the queue
    limited to 3). A timed job is a short one (``work`` below its timeout) whose first
    attempt, or first two, overrun it by half a TTL."""
    rng = random.Random(f"tenure-chaos-flow:{seed}")
    limited = flow_queues(queue)[1:]
    timeout = round(max(0.05, 0.4 * ttl), 3)
    plan = {}
    for job_id, seconds in work.items():
        pick, into = rng.random(), queue
        for name, share in zip(limited, SHARES, strict=True):
            if pick < share:
                into = name
                break
            pick -= share
        if into == limited[0] and seconds >= ttl:  # a long job would hold the one place
            into = limited[1]  # for seconds: it holds one of three instead
        priority = rng.choice(PRIORITIES)
        payload: dict[str, Any] = {"work": seconds}
        job_timeout = None
        if rng.random() < TIMED and seconds < ttl:
            job_timeout = timeout
            payload = {
                "work": round(min(seconds, timeout / 3), 3),
                "overrun": 1 if rng.random() < 0.7 else 2,
                "overrun_work": round(timeout + 0.5 * ttl, 3),
            }
        plan[job_id] = FlowJob(into, priority, job_timeout, payload)
    return plan


def handler_seconds(payload: Any, attempt: int) -> float:
    """How long the workload's handler works on this attempt: past the job's timeout on
    its first ``overrun`` attempts, its ``work`` otherwise."""
    if not isinstance(payload, dict):
        return 0.1
    if attempt <= int(payload.get("overrun") or 0):
        return float(payload.get("overrun_work", 0.1))
    return float(payload.get("work", 0.1))
