"""What a PostgreSQL ``failover`` (the primary killed -9, its asynchronous streaming replica
promoted) is allowed to do to a history, and nothing more.

The promoted replica may lack the last commits the old primary acknowledged: claims (a
worker holds a lease the new primary never heard of) and completions (a job done on the
old primary is not done on the new one). So across a failover, and only across it:

* **generations jump**: the new primary's first claim of a job is at least the new
  timeline's base, ``(timeline - 1) << 40`` (sql/_timeline.sql), above every generation
  the old primary issued: the generations between are no I1 gap. Each timeline's
  generations are counted from its base (`missing_generations`).
* **ownership may overlap in store time** (I2): a lease granted by the old primary (a
  generation of an earlier timeline, before the failover ended) can still be live, as its
  holder believes, when the new primary grants the job again (after the failover started),
  also when only a renewal of it was lost with the old primary. The fences keep the
  holders apart (I4: the sink's generations never go down); the overlap is counted
  (``failover_overlaps``), not a violation.
* **a job may be completed twice** (I3): once on the old primary (an accepted completion
  before the failover started, lost with it) and again on the new one, after it. Counted
  as ``completions_lost_failover``, and its attempt as a re-execution caused by the
  failover (tenure.chaos._outages).
* **a submitted job may be gone** (I5): its submit accepted by the old primary before the
  failover started, not replicated, so the new primary does not know the job. Counted as
  ``submits_lost_failover``, not a stranded job.

A failover's window is from its ``start`` event to its ``end`` (the replica promoted), in
host time; store times are moved onto host time by the run's offset.
"""

from __future__ import annotations

import itertools
from typing import Any

from ._context import Context

__all__ = [
    "BASE_BITS",
    "crossed",
    "failovers",
    "lost_completion",
    "lost_submit",
    "missing_generations",
    "on_older_timeline",
]

BASE_BITS = 40  # a timeline's base: (timeline - 1) << 40


def failovers(ctx: Context) -> list[tuple[float, float]]:
    """The failovers' windows (start, end) in store time, in order."""
    found: list[tuple[float, float]] = []
    start: float | None = None
    events = sorted(ctx.paired.events.get("fault", []), key=lambda e: float(e.get("t", 0.0)))
    for event in events:
        if event.get("kind") != "failover":
            continue
        t = float(event.get("t", 0.0)) + ctx.offset
        if event.get("phase") == "start":
            start = t
        elif event.get("phase") == "end" and start is not None:
            found.append((start, t))
            start = None
    if start is not None:
        found.append((start, float("inf")))
    return found


def crossed(windows: list[tuple[float, float]], before: float, after: float) -> bool:
    """Whether a failover lies between store times ``before`` and ``after``, so that
    ``before`` may have been answered by the old primary and ``after`` by the new one. The
    old primary answers until it is dead, which is inside the window (the kill takes tens
    of milliseconds after the window's start) and the new one from its promotion, also
    inside it: so ``before`` is before the window's end and ``after`` after its start."""
    return before < after and any(before < end and after > start for start, end in windows)


def on_older_timeline(older: int, newer: int) -> bool:
    """Whether generation ``older`` was issued on an earlier timeline than ``newer``
    (sql/_timeline.sql): by a primary the one that issued ``newer`` replaced."""
    return older >> BASE_BITS < newer >> BASE_BITS


def missing_generations(granted: set[int], top: int) -> list[int]:
    """The generations up to ``top`` not in ``granted``, counted on each timeline from its
    base (1 on the first), on the timelines that issued any: a failover's jump is no gap."""
    found: list[int] = []
    lines = {g >> BASE_BITS for g in granted} | {top >> BASE_BITS}
    for line in sorted(lines):
        low = max(1, line << BASE_BITS)
        high = max((g for g in granted if g >> BASE_BITS == line), default=low - 1)
        if top >> BASE_BITS == line:
            high = max(high, top)
        found += [g for g in range(low, high + 1) if g not in granted]
    return found


def lost_completion(windows: list[tuple[float, float]], same: list[dict[str, Any]]) -> bool:
    """Whether several accepted completions of one job are explained by failovers: each
    next one came after a failover that started after the one before."""
    times = sorted(float(op["store_now"]) for op in same)
    return bool(windows) and all(crossed(windows, a, b) for a, b in itertools.pairwise(times))


def lost_submit(ctx: Context, job: str, windows: list[tuple[float, float]]) -> bool:
    """Whether ``job``, not in the store after the run, was submitted (accepted) before a
    failover ended and never claimed after it: the promoted replica never received it."""
    final = ctx.finals.get(job, {})
    if final.get("state") != "unknown" or "does not exist" not in str(final.get("error")):
        return False
    accepted = [
        float(op.get("store_now") or float(op.get("t", 0.0)) + ctx.offset)
        for op in ctx.paired.of("submit")
        if op.get("job") == job and op.get("type") == "ok"
    ]
    # Accepted before the failover was over (the old primary answers until it is dead,
    # inside the window), and never claimed once the new primary served.
    last_end = max((end for _, end in windows), default=None)
    claimed_after = any(
        last_end is not None and c.start > last_end for c in ctx.claims.intervals.get(job, [])
    )
    return (
        bool(accepted) and last_end is not None and max(accepted) < last_end and not claimed_after
    )
