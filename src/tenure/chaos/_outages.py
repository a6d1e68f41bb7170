"""The store faults of a history (``store-restart``, ``store-kill``, ``failover``): when the
store was down, the store calls that failed then, and the re-executions they caused.

Definitions, all read from the history:

* An **outage** is the window of one store fault in host time: from its ``start`` event
  (just before the server was stopped or killed) to its ``end`` event (the server accepted
  connections again; a start without an end lasts to the end of the history).
* An **attempt** is a claim the store granted (an ownership interval of the checker). Its
  **handler ran** if the history has a write it sent or withheld, or a complete, release or
  fail it invoked, for its job, generation and owner.
* An attempt was **lost** if its handler ran and none of its settles (complete, release,
  fail) was accepted, not even as a repeat: the lease ran out under it.
* A **re-execution** is a lost attempt after which a later attempt of the same job (a
  higher generation) ran the handler again. It **finished its work** when a complete of it
  had been invoked (only the completion was lost).
* A re-execution was **caused by a store fault** when the lost attempt's lease (from its
  claim to its last confirmed ``lease_until``, moved onto host time by the run's offset)
  overlaps an outage: the lease was live while the store was down, and was lost; unless
  an accepted cancel or requeue of its job ended it (that one took the lease).

So a run whose outages are shorter than what its leases have left shows none: a settle
that failed while the store was down is retried within the lease and lands once the store
is back. Where other faults overlap an outage (a worker paused across it), the lost lease
is counted against the store fault.

A ``failover`` is an outage from the primary's kill to the replica's promotion; an attempt
whose completion the old primary accepted but the promoted replica never received, run
again on the new primary, is a re-execution too (tenure.chaos._failover).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ._context import CONTROL_OPS, Context
from ._failover import crossed, failovers
from ._nemesis import STORE_FAULTS
from ._verdict import Interval

__all__ = ["Outage", "Reexecution", "count_outages", "outages", "reexecutions"]

SETTLES = ("complete", "release", "fail")


@dataclass(frozen=True)
class Outage:
    kind: str
    start: float  # host time
    end: float  # host time the server was back (inf: it never came back in the history)
    down: float | None  # seconds down, as measured by the nemesis (None if not recorded)


@dataclass(frozen=True)
class Reexecution:
    job: str
    lost: Interval  # the attempt whose lease was lost after its handler ran
    again: Interval  # the first later attempt that ran the handler again
    finished: bool  # the lost attempt had invoked its complete (its work was done)
    outage: Outage | None  # the store fault it is counted against, if any


def outages(ctx: Context) -> list[Outage]:
    """The store faults' windows, in the order they started."""
    found: list[Outage] = []
    opened: dict[str, float] = {}
    events = sorted(ctx.paired.events.get("fault", []), key=lambda e: float(e.get("t", 0.0)))
    for event in events:
        kind = str(event.get("kind"))
        if kind not in STORE_FAULTS:
            continue
        if event.get("phase") == "start":
            opened[kind] = float(event["t"])
        elif event.get("phase") == "end" and kind in opened:
            down = event.get("down_s")
            start = opened.pop(kind)
            found.append(Outage(kind, start, float(event["t"]), _float(down)))
    found += [Outage(kind, start, float("inf"), None) for kind, start in opened.items()]
    return sorted(found, key=lambda o: o.start)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _runs(ctx: Context) -> dict[tuple[str, int, str], dict[str, Any]]:
    """Per attempt (job, generation, owner): whether its handler ran (``ran``), invoked a
    complete (``finished``), had a settle accepted (``settled``), and the store time at
    which a complete of it was accepted (``completed_at``)."""
    runs: dict[tuple[str, int, str], dict[str, Any]] = defaultdict(dict)

    def key(item: dict[str, Any]) -> tuple[str, int, str]:
        return str(item.get("job")), int(item.get("gen") or 0), str(item.get("owner"))

    for op in ctx.paired.of("write"):
        runs[key(op)]["ran"] = True
    for event in ctx.paired.events.get("write-withheld", []):
        runs[key(event)]["ran"] = True
    for op in ctx.paired.of(*SETTLES):
        run = runs[key(op)]
        run["ran"] = True
        if op["f"] == "complete":
            run["finished"] = True
        if op.get("type") == "ok":
            run["settled"] = True
            if op["f"] == "complete":
                at = op.get("store_now")
                run["completed_at"] = float(at if at is not None else op["t"] + ctx.offset)
    return runs


def reexecutions(ctx: Context) -> list[Reexecution]:
    """Every re-execution of the history (see the module docstring), by job."""
    runs = _runs(ctx)
    spans = outages(ctx)
    windows = failovers(ctx)
    found: list[Reexecution] = []
    for job, granted in sorted(ctx.claims.intervals.items()):
        ran = [
            c
            for c in sorted(granted, key=lambda c: c.gen)
            if runs[(job, c.gen, c.owner)].get("ran")
        ]
        for index, lost in enumerate(ran[:-1]):
            run = runs[(job, lost.gen, lost.owner)]
            again = next((c for c in ran[index + 1 :] if c.gen > lost.gen), None)
            if again is None:
                continue
            start, end = lost.start - ctx.offset, lost.end - ctx.offset
            hit = next((o for o in spans if o.start <= end and start <= o.end), None)
            if _ended_by_control(ctx, lost):
                hit = None  # a cancel (or requeue) took the lease, whatever the store went through
            if run.get("settled"):
                # Only a completion can be lost with the old primary and make its job run
                # again: a release or a fail gives the job (or a lock) back, and the next
                # attempt is its due, as is the next after an accepted requeue of the
                # done job; a completion the new primary accepted, after the promotion,
                # was not lost.
                completed_at = run.get("completed_at")
                if (
                    completed_at is None
                    or not crossed(windows, completed_at, again.start)
                    or ctx.control.lives(job, completed_at) != ctx.control.lives(job, again.start)
                ):
                    continue
                # A settle the old primary accepted, lost with it: a re-run it caused.
                again_at = again.start - ctx.offset
                hit = next(o for o in spans if o.kind == "failover" and start < o.start < again_at)
            found.append(Reexecution(job, lost, again, bool(run.get("finished")), hit))
    return found


def _ended_by_control(ctx: Context, lease: Interval) -> bool:
    """Whether an accepted cancel or requeue of its job ended ``lease``."""
    ender = ctx.paired.ops.get(lease.ended_by) if lease.ended_by is not None else None
    return ender is not None and ender.get("f") in CONTROL_OPS


def count_outages(ctx: Context) -> list[Reexecution]:
    """Count the store faults in ``ctx.counts`` (outages, their longest, the store calls in
    flight during them and those that failed, the re-executions in all and those they
    caused); returns the re-executions."""
    spans = outages(ctx)
    found = reexecutions(ctx)
    counts = ctx.counts
    counts["store_outages"] = len(spans)
    longest = max((o.down for o in spans if o.down is not None), default=0.0)
    counts["store_outage_longest_ms"] = round(longest * 1000)
    ttl = float(ctx.info.get("ttl") or 1.0)
    caught = failed = 0
    for op in ctx.paired.ops.values():
        if op.get("f") in ("write", None):
            continue
        sent, answered = float(op.get("invoke_t") or op.get("t") or 0.0), float(op.get("t", 0.0))
        if any(sent <= o.end and o.start <= answered for o in spans):
            caught += 1  # in flight while the server was stopping, down or starting
        if op.get("type") in ("fail", "unknown") and "error" in op:
            # (or failed on a connection the restart broke, noticed just after)
            failed += any(o.start <= answered <= o.end + ttl for o in spans)
    counts["store_outage_calls"] = caught
    counts["store_outage_errors"] = failed
    counts["reexecutions"] = len(found)
    counts["reexecutions_finished"] = sum(r.finished for r in found)
    counts["reexecutions_store_faults"] = sum(r.outage is not None for r in found)
    counts["failovers"] = sum(o.kind == "failover" for o in spans)
    counts["reexecutions_failover"] = sum(
        r.outage is not None and r.outage.kind == "failover" for r in found
    )
    return found
