"""What the checker's units share: a history read once (`Context`).

* `Paired`: the operations paired from their invoke and completion events, and the events
  that are not operations;
* `Claims`: the claims the store granted, one ownership `Interval` each, and the claims
  whose outcome is unknown;
* `Leases`: the renewals and settles (complete / release / fail) replayed in store time
  onto those intervals, one `Step` per accepted call or repeat answer, with the lease as
  that call found it;
* `Writes`: what the sink accepted, and which write sent each of its records;
* `Control`: the cancels and requeues (``tenure chaos --faults cancel``): an accepted
  cancel ends the lease it finds (and the generation it took is explained for I1), an
  accepted requeue proves no lease was live then and starts a new life of the job.

Reading counts what it reads (``Context.counts``); the units only judge.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..locks import LOCK_ID_PREFIX
from ._history import Event
from ._verdict import Interval

__all__ = [
    "EPS",
    "HOLDER_OPS",
    "UNKNOWN",
    "CONTROL_OPS",
    "Claims",
    "Context",
    "Control",
    "Leases",
    "Paired",
    "Step",
    "Writes",
]

EPS = 1e-4
HOLDER_OPS = ("renew", "complete", "release", "fail")
CONTROL_OPS = ("cancel", "requeue")
UNKNOWN = ("unknown", "pending")  # no reply recorded: the call may or may not have applied

Op = dict[str, Any]


class Paired:
    """Operations paired from invoke/completion events, and the events that are not ops."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.ops: dict[str, Op] = {}
        self.events: dict[str, list[Event]] = defaultdict(list)
        self.count = 0
        for event in events:
            self.count += 1
            kind = event.get("type")
            if kind == "invoke":
                self.ops[event["op"]] = {**event, "type": "pending", "invoke_t": event.get("t")}
            elif kind in ("ok", "fail", "unknown"):
                op = self.ops.setdefault(event["op"], {})
                op.update(event)
            else:
                self.events[str(event.get("f"))].append(event)

    def of(self, *fs: str) -> list[Op]:
        return [op for op in self.ops.values() if op.get("f") in fs]


@dataclass
class Claims:
    """The claims of a history: what the store granted, and what lost replies may have."""

    intervals: dict[str, list[Interval]] = field(default_factory=dict)  # job -> granted
    unknown: Counter[str] = field(default_factory=Counter)  # job -> claims by id, outcome unknown
    unknown_batch: int = 0  # jobs the claim_next calls with unknown outcome may have taken
    lost_by: set[Any] = field(default_factory=set)  # procs with a claim of unknown outcome

    @classmethod
    def read(cls, paired: Paired, counts: Counter[str]) -> Claims:
        claims = cls()
        intervals: dict[str, list[Interval]] = defaultdict(list)
        for op in paired.of("claim_next", "claim"):
            counts["claim_calls"] += 1
            if op["type"] in UNKNOWN:
                counts["claims_unknown"] += 1
                if op["f"] == "claim_next":  # a lost batch may have taken up to `limit` jobs
                    claims.unknown_batch += int(op.get("limit") or 1)
                else:
                    claims.unknown[op.get("job", "")] += 1
                continue
            if op["type"] != "ok":
                continue
            granted = op.get("claims", []) if op["f"] == "claim_next" else [op]
            for claim in granted:
                interval = _interval(op, claim, intervals)
                if interval is None:
                    continue
                intervals[interval.job].append(interval)
                counts["claims"] += 1
                if str(op.get("proc", "")).startswith("s"):
                    counts["storm_claims"] += 1
        claims.intervals = dict(intervals)
        claims.lost_by = {
            op.get("proc") for op in paired.of("claim_next", "claim") if op["type"] in UNKNOWN
        }
        return claims


def _interval(op: Op, claim: Op, known: dict[str, list[Interval]]) -> Interval | None:
    """The interval a granted claim starts; None for a repeat of one already known.

    A repeat (a claim by id finding its own earlier claim) and a lease found by its secret
    after a claim's reply was lost (``found``, the recorder's `find_leases`) were granted
    by an earlier statement than the one answering: the lease started at its lease_until
    less the claim's TTL, before this answer's store time."""
    job = claim["job"]
    gen = int(claim.get("row_gen", claim.get("gen", 0)) or 0)
    until = float(claim["lease_until"])
    start = float(claim["store_now"])
    if claim.get("repeat") or claim.get("found"):
        if any(c.gen == gen and c.owner == op.get("owner") for c in known.get(job, [])):
            return None
        start = until - float(op.get("ttl") or 0.0)
    return Interval(job, gen, str(op.get("owner")), str(op.get("proc")), op["op"], start, until)


@dataclass
class Step:
    """A renew / complete / release / fail the store accepted or answered as a repeat, and
    its lease as the call found it (before the call changed it)."""

    op: Op
    lease: Interval | None  # None: no recorded claim granted this owner this generation
    until: float  # the lease's last confirmed lease_until then
    end_at: float | None  # when, and by which op, it had been ended by then
    ended_by: str | None
    earlier: list[Op]  # the settles of this lease before it, accepted or with unknown outcome

    @property
    def repeat(self) -> bool:
        return bool(self.op.get("repeat"))

    @property
    def explained(self) -> bool:
        """A repeat answer is true only if an earlier call of the same operation on this
        lease was accepted or has an unknown outcome (a renewal's repeat changes nothing)."""
        f = self.op["f"]
        return f == "renew" or any(e["f"] == f for e in self.earlier)


class Leases:
    """The holder operations replayed in store time: accepted renewals extend their
    interval, accepted settles (and the true repeats of one whose reply was lost) end it."""

    def __init__(
        self, claims: Claims, ops: list[Op], counts: Counter[str], offset: float = 0.0
    ) -> None:
        self._offset = offset  # store time minus host time
        self._holders: dict[tuple[str, int, str], list[Interval]] = defaultdict(list)
        for granted in claims.intervals.values():
            for c in granted:
                self._holders[(c.job, c.gen, c.owner)].append(c)
        self.steps: list[Step] = []
        self.completions: dict[str, list[Op]] = defaultdict(list)  # accepted, by job
        for op in ops:
            if op["type"] in UNKNOWN and op["f"] == "renew":
                unknown = self.interval_of(op)
                if unknown is not None:
                    unknown.unknown_renewals += 1
        settles: dict[tuple[str, int], list[Op]] = defaultdict(list)
        self._replayed: dict[str, Op] = {}
        for op in ops:
            self._replay(op, settles, counts)
            self._replayed[op["op"]] = op

    def interval_of(self, op: Op) -> Interval | None:
        """The interval ``op``'s holder held at its store time (its latest claim by then)."""
        key = (op.get("job", ""), int(op.get("gen") or 0), str(op.get("owner")))
        found = self._holders.get(key)
        if not found:
            return None
        at = float(op.get("store_now") or 0.0)
        earlier = [c for c in found if c.start <= at + EPS]
        return max(earlier or found, key=lambda c: c.start)

    def step_of(self, op_id: str) -> Step:
        return next(step for step in self.steps if step.op["op"] == op_id)

    def _end_live(self, op: Op, top: int | None) -> None:
        """An accepted cancel or requeue of ``op``'s job: the leases still live at its store
        time end then, up to generation ``top`` (None: every one). A lease of a greater
        generation was granted after it, however close in store time (within `EPS`: a
        claim 60 µs after a requeue was taken for one it ended)."""
        t = float(op["store_now"])
        for (job, gen, _owner), found in self._holders.items():
            if job != op.get("job") or (top is not None and gen > top):
                continue
            for lease in found:
                if lease.start <= t + EPS and lease.end_at is None:
                    lease.end_at = t
                    lease.ended_by = op["op"]

    def _replay(
        self, op: Op, settles: dict[tuple[str, int], list[Op]], counts: Counter[str]
    ) -> None:
        f, kind = op["f"], op["type"]
        if f in CONTROL_OPS:
            if kind == "ok":
                # The generation the store answered: a cancel's own (one more than the lease
                # it ended), or the one a requeue found (older histories may lack it).
                found = op.get("row_gen")
                top = int(found or 0) if f == "cancel" or found is not None else None
                self._end_live(op, top)
            return
        lease_key = (str(op.get("job")), int(op.get("gen") or 0))
        if kind in UNKNOWN:
            counts["store_unknown"] += 1
            if f != "renew":
                settles[lease_key].append(op)
                self._settle_sent(op)
            return
        if kind == "fail" and "error" in op:
            # It raised before it reached the store: not a refusal.
            counts["holder_calls_unreached"] += 1
            return
        if kind == "fail":
            counts[f"stale_{_plural(f)}_rejected"] += 1
            if op.get("row_state") == "cancelled":  # a cancelled holder, told so
                counts["holder_calls_refused_cancelled"] += 1
            return
        if op.get("repeat"):
            counts[f"{f}_repeats" if f != "complete" else "completion_repeats"] += 1
            step = self._step(op, settles.get(lease_key, []))
            lease = step.lease
            # A true repeat proves its earlier settle (maybe one whose reply was lost) ended
            # the lease, by this store time at the latest.
            if f != "renew" and step.explained and lease is not None and lease.end_at is None:
                lease.end_at = float(op["store_now"])
                lease.ended_by = op["op"]
            return
        if f == "renew":
            self._reorder(op, counts)
        interval = self._step(op, settles.get(lease_key, [])).lease
        if f != "renew":
            settles[lease_key].append(op)
        counts[_plural(f)] += 1
        if f == "complete":
            self.completions[op["job"]].append(op)
        t = float(op["store_now"])
        if interval is None:
            return
        if f == "renew" and op.get("lease_until") is not None:
            interval.renewals.append((t, float(op["lease_until"])))
            interval.until = max(interval.until, float(op["lease_until"]))
        elif f != "renew" and interval.end_at is None:
            interval.end_at = t
            interval.ended_by = op["op"]

    def _reorder(self, op: Op, counts: Counter[str]) -> None:
        """An accepted renewal whose lease a settle of the same process ended earlier in
        store time, while both calls were in flight at once: the settle was serialized
        after the renewal. A statement reads the store's clock when it starts and takes the
        job's row lock after (PostgreSQL), so calls that overlap may commit in the other
        order than their clock readings; the store proves which came first by accepting
        the renewal (it refuses one for an ended lease). The lease then ended no earlier
        than the renewal's store time, which is where I2 must see its end. Calls that did
        not overlap in the process's own time are not excused: the renewal stays an I3
        violation."""
        lease = self.interval_of(op)
        if lease is None or lease.end_at is None or lease.ended_by is None:
            return
        ender = self._replayed.get(lease.ended_by)
        if ender is None or ender.get("proc") != op.get("proc") or not _overlapped(ender, op):
            return
        lease.end_at = max(lease.end_at, float(op["store_now"]))
        counts["settles_serialized_after_renewal"] += 1

    def _settle_sent(self, op: Op) -> None:
        """A settle without an answer may have ended its lease as soon as it was sent (then
        its job may be claimed again at once: a lock's release)."""
        lease = self.interval_of(op)
        sent = op.get("invoke_t")
        if lease is None or sent is None:
            return
        at = float(sent) + self._offset
        lease.settle_sent = at if lease.settle_sent is None else min(lease.settle_sent, at)

    def _step(self, op: Op, earlier: list[Op]) -> Step:
        lease = self.interval_of(op)
        if lease is None:
            step = Step(op, None, 0.0, None, None, list(earlier))
        else:
            step = Step(op, lease, lease.until, lease.end_at, lease.ended_by, list(earlier))
        self.steps.append(step)
        return step


def _overlapped(a: Op, b: Op) -> bool:
    """Whether two calls of one process were in flight at once (by its host time)."""
    times = (a.get("invoke_t"), a.get("t"), b.get("invoke_t"), b.get("t"))
    if any(value is None for value in times):
        return False
    a_start, a_end, b_start, b_end = map(float, times)  # type: ignore[arg-type]
    return a_start <= b_end and b_start <= a_end


def _plural(f: str) -> str:
    return {
        "renew": "renewals",
        "complete": "completions",
        "release": "releases",
        "fail": "fails",
    }[f]


@dataclass
class Writes:
    """The writes of a history: who sent each record the sink accepted, in its order."""

    ops: list[Op]  # every write call, in history order
    sender: dict[int, Op]  # sink record id -> the accepted write that made it
    records: list[dict[str, Any]]  # the sink's ledger (the writers' view if there is none)

    @classmethod
    def read(cls, paired: Paired, counts: Counter[str]) -> Writes:
        ops = paired.of("write")
        sender: dict[int, Op] = {}
        for op in ops:
            kind = op["type"]
            if kind == "ok":
                if op.get("duplicate"):
                    counts["writes_duplicate"] += 1
                else:
                    counts["writes_accepted"] += 1
                    if op.get("record") is not None:
                        sender.setdefault(int(op["record"]), op)
            elif kind == "fail":
                if op.get("status") == 409:
                    counts["stale_writes_rejected"] += 1
                else:
                    counts["writes_refused_other"] += 1
            else:
                counts["writes_unknown"] += 1
        counts["writes_withheld"] = len(paired.events.get("write-withheld", []))
        records = [
            {"record": int(e["record"]), "job": e["job"], "gen": e["gen"], "key": e.get("key")}
            for e in paired.events.get("sink-record", [])
        ]
        if not records:  # no ledger in this history: the writers' own view
            records = [
                {"record": r, "job": op["job"], "gen": op["gen"], "key": op.get("key")}
                for r, op in sender.items()
            ]
        return cls(ops, sender, records)


@dataclass
class Control:
    """The cancels and requeues of a history, per job: the accepted ones (in store time)
    and the cancels whose outcome is unknown."""

    cancels: dict[str, list[Op]] = field(default_factory=dict)
    requeues: dict[str, list[Op]] = field(default_factory=dict)
    unknown_cancels: Counter[str] = field(default_factory=Counter)

    @classmethod
    def read(cls, paired: Paired, counts: Counter[str]) -> Control:
        control = cls()
        accepted: dict[str, dict[str, list[Op]]] = {"cancel": {}, "requeue": {}}
        for op in sorted(paired.of(*CONTROL_OPS), key=_store_time):
            f, kind, job = op["f"], op["type"], str(op.get("job"))
            if kind == "ok":
                counts[f"{f}s"] += 1
                accepted[f].setdefault(job, []).append(op)
            elif kind in UNKNOWN:
                counts[f"{f}s_unknown"] += 1
                if f == "cancel":
                    control.unknown_cancels[job] += 1
            else:
                counts[f"{f}s_refused"] += 1
        control.cancels, control.requeues = accepted["cancel"], accepted["requeue"]
        return control

    def taken(self, job: str) -> set[int]:
        """The generations the accepted cancels of ``job`` moved it to."""
        return {int(op.get("row_gen") or 0) for op in self.cancels.get(job, [])}

    def lives(self, job: str, at: float) -> int:
        """How many accepted requeues of ``job`` came before store time ``at``."""
        return sum(float(op["store_now"]) < at for op in self.requeues.get(job, []))


def _store_time(op: Op) -> tuple[float, int]:
    return float(op.get("store_now") or 0.0), int(op.get("seq", 0))


class Context:
    """A history read once for the units: its operations, claims, leases, writes and final
    job states, and the counts of what was read."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.paired = h = Paired(events)
        self.counts: Counter[str] = Counter()
        self.counts["events"] = h.count
        config = h.events.get("config", [{}])[-1]
        self.info = {
            k: config.get(k)
            for k in ("store", "workers", "ttl", "seed", "unsafe", "jobs", "workload")
        }
        calibrations = [e["offset"] for e in h.events.get("calibrate", []) if "offset" in e]
        self.offset = sum(calibrations) / len(calibrations) if calibrations else 0.0
        self.claims = Claims.read(h, self.counts)
        self.finals: dict[str, Event] = {
            e["job"]: e for e in h.events.get("final", []) if "job" in e
        }
        self.holder_ops = sorted(h.of(*HOLDER_OPS), key=_store_time)
        self.control = Control.read(h, self.counts)
        replayed = sorted(self.holder_ops + h.of(*CONTROL_OPS), key=_store_time)
        self.leases = Leases(self.claims, replayed, self.counts, self.offset)
        self.writes = Writes.read(h, self.counts)
        self.submitted = {op["job"] for op in h.of("submit") if op["type"] == "ok"} | set(
            self.finals
        )
        self._count_jobs()

    def _count_jobs(self) -> None:
        self.counts["jobs_submitted"] = len(self.submitted)
        for job in sorted(self.submitted):
            final = self.finals.get(job)
            if final is None:
                continue
            if job.startswith(LOCK_ID_PREFIX):  # a lock's job is never meant to end
                self.counts["locks"] += 1
                self.counts["jobs_submitted"] -= 1
                continue
            state = final.get("state")
            key = {"done": "jobs_done", "dead": "jobs_dead", "cancelled": "jobs_cancelled"}.get(
                str(state), "jobs_stranded"
            )
            self.counts[key] += 1
