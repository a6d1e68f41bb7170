"""What `check_history` returns: the `Verdict`, its violations, and what the report draws
(each job's ownership intervals and the marks on its timeline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["INVARIANTS", "Interval", "Mark", "Verdict", "Violation"]

INVARIANTS = {
    "I1": "tokens",
    "I2": "exclusivity",
    "I3": "stale rejection",
    "I4": "destinations",
    "I5": "nothing lost",
    "I6": "queue limits",  # only on a history with queue limits or rates (chaos._limits)
}
SHOWN = 25  # violations printed per invariant


@dataclass
class Violation:
    invariant: str
    job: str | None
    message: str
    ops: list[str] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.invariant} {INVARIANTS[self.invariant]}: {self.message}"


@dataclass
class Interval:
    """One holder's ownership of a job: from its claim to its end, in store time."""

    job: str
    gen: int
    owner: str
    proc: str
    op: str
    start: float
    until: float  # last confirmed lease_until
    end_at: float | None = None  # store time of the complete/release/fail that ended it
    ended_by: str | None = None
    unknown_renewals: int = 0
    # Store time (estimated from the host time it was sent) of the first complete / release
    # / fail of this lease whose outcome is unknown: the lease may have ended from then on.
    settle_sent: float | None = None
    renewals: list[tuple[float, float]] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.until if self.end_at is None else min(self.until, self.end_at)


@dataclass
class Mark:
    """Something shown on a job's timeline (stale attempts, writes, pauses)."""

    job: str
    at: float  # store time (host times are moved onto the store's axis)
    kind: str  # rejected-<f>, write-ok, write-stale, write-withheld, pause
    gen: int | None
    proc: str
    detail: str = ""


@dataclass
class Verdict:
    status: str  # VALID, INVALID, UNPROVEN
    violations: list[Violation]
    counts: dict[str, int]
    faults: dict[str, int]
    info: dict[str, Any]
    intervals: dict[str, list[Interval]] = field(default_factory=dict)
    marks: dict[str, list[Mark]] = field(default_factory=dict)
    fault_spans: list[dict[str, Any]] = field(default_factory=list)
    offset: float = 0.0  # store time minus host time

    @property
    def valid(self) -> bool:
        return self.status == "VALID"

    @property
    def locks(self) -> bool:
        """A run of ``--workload locks`` (one named lock instead of a queue of jobs)."""
        return self.info.get("workload") == "locks"

    @property
    def limits(self) -> list[dict[str, Any]]:
        """The limited queues of the run (``--workload flow``): queue, limit, peak, leases;
        and its rate-limited ones: queue, per_second, burst, drawn, leases."""
        found = self.info.get("limits")
        return list(found) if isinstance(found, list) else []

    def shown_invariants(self) -> dict[str, str]:
        """The invariants a verdict lists: I1-I5, and I6 when the run had queue limits."""
        limited = bool(self.limits) or any(v.invariant == "I6" for v in self.violations)
        return {k: name for k, name in INVARIANTS.items() if k != "I6" or limited}

    def limits_line(self) -> str | None:
        """Each limited queue's limit and peak, each rate-limited queue's rate and fullest
        draw, and the timeouts (None without limits or rates)."""
        if not self.limits:
            return None
        queues = ", ".join(
            f"{q['queue']} at most {q['limit']} (peak {q['peak']} over {q['leases']} leases)"
            if "limit" in q
            else f"{q['queue']} at most {q['per_second']:g}/s, burst {q['burst']} "
            f"(drew {q['drawn']:g} of {q['burst']} over {q['leases']} leases)"
            for q in self.limits
        )
        return (
            f"limits: {queues}; timeouts: {self.counts.get('timeouts', 0)} attempts failed "
            "at their job's timeout"
        )

    def top_token(self) -> int:
        """The greatest generation (token) a recorded claim was granted."""
        return max((i.gen for found in self.intervals.values() for i in found), default=0)

    def by_invariant(self) -> dict[str, list[Violation]]:
        found: dict[str, list[Violation]] = {key: [] for key in INVARIANTS}
        for violation in self.violations:
            found[violation.invariant].append(violation)
        return found

    def headline(self) -> str:
        """The verdict line (with the store faults' outcome when the run had some)."""
        c = self.counts
        if self.status == "VALID" and self.locks:
            line = (
                f"VALID: I1-I5 held on {c.get('locks', 0)} lock over {c['claims']} holdings "
                f"(tokens up to {self.top_token()}); faults bit: {c['stale_writes_rejected']} "
                f"stale writes rejected by the sink, {c['stale_renewals_rejected']} stale "
                f"renewals and {c['stale_releases_rejected']} stale releases refused"
            )
        elif self.status == "VALID":
            held = "I1-I6" if self.limits else "I1-I5"
            line = (
                f"VALID: {held} held on {c['jobs_submitted']} jobs; faults bit: "
                f"{c['stale_completions_rejected']} stale completions and "
                f"{c['stale_writes_rejected']} stale writes rejected"
            )
            ends = c.get("stale_fails_rejected", 0) + c.get("stale_releases_rejected", 0)
            if ends:
                line += f", {ends} stale fails or releases refused"
        elif self.status == "UNPROVEN" and self.locks:
            line = (
                "UNPROVEN: no invariant was violated, but no stale write, renewal or release "
                "was rejected either: the faults did not bite, so this run proves nothing"
            )
        elif self.status == "UNPROVEN":
            line = (
                "UNPROVEN: no invariant was violated, but no stale completion, fail, release "
                "or write was rejected either: the faults did not bite, so this run proves "
                "nothing"
            )
        else:
            kinds = ", ".join(f"{key} x{len(v)}" for key, v in self.by_invariant().items() if v)
            line = f"INVALID: {len(self.violations)} violation(s) ({kinds})"
        if c.get("store_outages"):
            line += (
                f"; {c['store_outages']} store outages caught {c['store_outage_calls']} "
                f"store calls in flight, {c['reexecutions_store_faults']} re-executions "
                "caused by them"
            )
        if c.get("failovers"):
            line += (
                f"; {c['failovers']} failover(s): {c['reexecutions_failover']} re-executions "
                f"caused by them, {c.get('submits_lost_failover', 0)} submits and "
                f"{c.get('completions_lost_failover', 0)} completions lost with the old primary"
            )
        if c.get("cancels"):
            line += (
                f"; {c['cancels']} cancels, {c.get('holder_calls_refused_cancelled', 0)} calls "
                "of cancelled holders refused"
            )
        return line

    def store_line(self) -> str | None:
        """What the store faults did (None when the run had none)."""
        c = self.counts
        if not c.get("store_outages"):
            return None
        return (
            f"store outages: {c['store_outages']} (longest "
            f"{c['store_outage_longest_ms'] / 1000:g} s down), {c['store_outage_calls']} "
            f"store calls in flight during them ({c['store_outage_errors']} failed); "
            f"re-executions: {c['reexecutions_store_faults']} caused by store faults, "
            f"{c['reexecutions']} in all ({c['reexecutions_finished']} after the handler "
            "had finished)"
            + (
                f"; failovers: {c['failovers']}, {c['reexecutions_failover']} re-executions "
                f"caused by them, {c.get('completions_lost_failover', 0)} completions and "
                f"{c.get('submits_lost_failover', 0)} submits lost with the old primary, "
                f"{c.get('failover_overlaps', 0)} leases of the old primary overlapped by the "
                "new one's (fenced)"
                if c.get("failovers")
                else ""
            )
        )

    def lines(self) -> list[str]:
        c, info = self.counts, self.info
        out = []
        head = ", ".join(
            f"{k} {info[k]}" for k in ("store", "workers", "ttl", "seed") if info.get(k) is not None
        )
        if info.get("unsafe"):
            head += f", UNSAFE {info['unsafe']}"
        out.append(f"history: {c['events']} events" + (f" ({head})" if head else ""))
        if self.locks:
            out.append(
                f"locks: {c.get('locks', 0)} lock, {c['claims']} holdings, tokens up to "
                f"{self.top_token()}"
            )
        else:
            out.append(
                f"jobs: {c['jobs_submitted']} submitted, {c['jobs_done']} done, "
                f"{c['jobs_dead']} dead, {c['jobs_cancelled']} cancelled, "
                f"{c['jobs_stranded']} stranded"
            )
        limits = self.limits_line()
        if limits is not None:
            out.append(limits)
        if c["cancels"] or c["requeues"] or c["cancels_unknown"]:
            out.append(
                f"control: {c['cancels']} cancels accepted ({c['cancels_refused']} refused, "
                f"{c['cancels_unknown']} unknown), {c['requeues']} requeues accepted "
                f"({c['requeues_refused']} refused); {c['holder_calls_refused_cancelled']} "
                "calls of cancelled holders refused"
            )
        out.append(
            f"claims: {c['claims']} granted ({c['storm_claims']} in claim storms), "
            f"{c['claim_calls']} claim calls, {c['claims_unknown']} with unknown outcome"
        )
        out.append(
            f"renewals: {c['renewals']} accepted, {c['stale_renewals_rejected']} stale rejected"
            + (
                f" ({c['settles_serialized_after_renewal']} committed before a settle of the "
                "same worker that read the store's clock first)"
                if c.get("settles_serialized_after_renewal")
                else ""
            )
        )
        out.append(
            f"completions: {c['completions']} accepted ({c['completion_repeats']} repeats "
            f"answered as done), {c['stale_completions_rejected']} stale rejected; "
            f"releases {c['releases']} / fails {c['fails']} accepted, "
            f"{c['stale_releases_rejected'] + c['stale_fails_rejected']} stale rejected"
        )
        out.append(
            f"writes: {c['writes_accepted']} accepted, {c['stale_writes_rejected']} stale "
            f"rejected by the sink, {c['writes_duplicate']} duplicates, "
            f"{c['writes_unknown']} unknown, {c['writes_withheld']} withheld by their worker"
        )
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"
        out.append(f"faults: {sum(self.faults.values())} injected ({faults})")
        store = self.store_line()
        if store is not None:
            out.append(store)
        if c["pause_points_missed"]:
            out.append(f"  {c['pause_points_missed']} armed pause points were not reached")
        for key, name in self.shown_invariants().items():
            found = self.by_invariant()[key]
            label = f"{key} {name}"
            out.append(f"{label:<22} {'ok' if not found else f'VIOLATED x{len(found)}'}")
            for violation in found[:SHOWN]:
                out.append(f"    - {violation.message}")
            if len(found) > SHOWN:
                out.append(f"    ... and {len(found) - SHOWN} more (see the report)")
        return out
