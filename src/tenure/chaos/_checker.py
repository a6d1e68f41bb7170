"""`check_history`: the invariants of docs/design.md §5, verified on a recorded history.

* **I1 tokens**: per job, the claims the store granted have distinct generations that grow
  with store time; a generation no recorded claim explains is allowed only up to the
  number of claims whose outcome is unknown (a lost reply burns one).
* **I2 exclusivity**: per job, ownership intervals never overlap in store time. An interval
  runs from its claim to the earliest of its last confirmed ``lease_until`` and the
  complete / release / fail that ended it.
* **I3 stale rejection**: a renew / complete / release / fail that the store *accepted* was
  made by the current holder: the owner the generation was granted to, no newer generation
  granted before it, its lease not expired and not ended before it. At most one completion
  per job, and a job that ended ``done`` was completed by the generation it shows (a
  rejected operation left nothing behind).
* **I4 destinations**: per job, in the sink's acceptance order, the generation of the lease
  that sent each accepted write never decreases, and no effect key was accepted twice.
* **I5 nothing lost**: every submitted job ended ``done``, ``dead`` after using all its
  attempts, or ``cancelled`` by a recorded cancel no requeue came after; none is left
  ready or leased once the faults stopped.
* **I6 queue limits** (a history with queue limits or rates, ``--workload flow``): per
  limited queue, no moment of store time had more unexpired, unended leases than its
  limit; per rate-limited queue, no window of store time saw more leases start than its
  token bucket allows (tenure.chaos._limits). A worker's timeout is an attempt failed by
  its holder: I1-I5 judge it as any other, and the job must end again.

Cancels and requeues (the ``cancel`` fault): an accepted cancel ends the lease it found
(its holder's later calls must be refused, I3) and the generation it took is no I1 gap; a
requeue starts a new life of the job, which may be completed once more.

The run proves something only if its faults bit: the verdict is ``VALID`` when no invariant
was violated *and* some stale completion, fail, release or write was rejected, or a store fault
(``store-restart``, ``store-kill``, ``failover``) caught store calls in flight and the run
rode it out,
or a cancelled holder's renew / complete / release / fail was refused (``cancel``);
``UNPROVEN`` when nothing was violated but nothing bit either; ``INVALID`` otherwise.

Besides the invariants, the verdict counts the re-executions (a lost lease's handler run
again) and those the store faults caused (tenure.chaos._outages defines both); across a
PostgreSQL failover, what the promoted replica may lack is allowed and counted
(tenure.chaos._failover).

Store times are compared with a tolerance of `EPS` (timestamps round-trip through floats).

The history is read once into a `Context` (tenure.chaos._context); each invariant is a
unit of tenure.chaos._invariants judging it; the report's spans and marks come from
tenure.chaos._timeline.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._context import EPS, Context
from ._history import Event
from ._invariants import UNITS
from ._outages import count_outages
from ._timeline import fault_spans, marks, reexecution_marks
from ._verdict import INVARIANTS, Interval, Mark, Verdict, Violation

__all__ = ["EPS", "INVARIANTS", "Interval", "Mark", "Verdict", "Violation", "check_history"]

# Every count a verdict shows, zero where nothing was counted.
COUNTS = (
    "claims",
    "storm_claims",
    "claim_calls",
    "claims_unknown",
    "renewals",
    "stale_renewals_rejected",
    "completions",
    "completion_repeats",
    "stale_completions_rejected",
    "releases",
    "fails",
    "stale_releases_rejected",
    "stale_fails_rejected",
    "writes_accepted",
    "stale_writes_rejected",
    "writes_duplicate",
    "writes_unknown",
    "writes_withheld",
    "jobs_done",
    "jobs_dead",
    "jobs_cancelled",
    "jobs_stranded",
    "locks",
    "cancels",
    "cancels_refused",
    "cancels_unknown",
    "requeues",
    "requeues_refused",
    "holder_calls_refused_cancelled",
    "pause_points_missed",
    "store_unknown",
    "holder_calls_unreached",
    "store_outages",
    "store_outage_longest_ms",
    "store_outage_calls",
    "store_outage_errors",
    "reexecutions",
    "reexecutions_finished",
    "reexecutions_store_faults",
    "failovers",
    "reexecutions_failover",
    "failover_overlaps",
    "settles_serialized_after_renewal",
    "overlaps_unknown_settle",
    "completions_lost_failover",
    "submits_lost_failover",
    "timeouts",
    "limit_overlaps_failover",
)


def check_history(events: Iterable[Event]) -> Verdict:
    """Check I1-I5 on ``events`` (a history's events, in any order)."""
    ctx = Context(events)
    violations = [violation for unit in UNITS for violation in unit(ctx)]
    faults, spans = fault_spans(ctx)
    timeline = marks(ctx)
    for job, found in reexecution_marks(count_outages(ctx)).items():
        timeline.setdefault(job, []).extend(found)
    counts = ctx.counts
    for key in COUNTS:
        counts.setdefault(key, 0)
    bit = counts["stale_completions_rejected"] + counts["stale_writes_rejected"] > 0
    # A stale holder's fail or release refused is the same bite as a stale completion: it
    # tried to end an attempt whose lease another worker had taken over (I3 at work).
    bit = bit or counts["stale_fails_rejected"] + counts["stale_releases_rejected"] > 0
    bit = bit or counts["store_outage_calls"] > 0  # the store went away under the workers
    bit = bit or counts["holder_calls_refused_cancelled"] > 0  # a cancelled holder refused
    if ctx.info.get("workload") == "locks":  # a lock is never completed: its stale holder's
        # renewal or release refused by the store is what a stale completion is to a job
        bit = bit or counts["stale_renewals_rejected"] + counts["stale_releases_rejected"] > 0
    if violations:
        status = "INVALID"
    elif not bit or not faults:
        status = "UNPROVEN"
    else:
        status = "VALID"
    return Verdict(
        status=status,
        violations=violations,
        counts=dict(counts),
        faults=dict(faults),
        info=ctx.info,
        intervals=dict(ctx.claims.intervals),
        marks=timeline,
        fault_spans=spans,
        offset=ctx.offset,
    )
