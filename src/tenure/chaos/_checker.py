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
* **I5 nothing lost**: every submitted job ended ``done``, or ``dead`` after using all its
  attempts; none is left ready or leased once the faults stopped.

The run proves something only if its faults bit: the verdict is ``VALID`` when no invariant
was violated *and* some stale completion or stale write was rejected; ``UNPROVEN`` when
nothing was violated but nothing stale was caught either; ``INVALID`` otherwise.

Store times are compared with a tolerance of `EPS` (timestamps round-trip through floats).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._history import Event

__all__ = ["EPS", "INVARIANTS", "Verdict", "Violation", "check_history"]

EPS = 1e-4
INVARIANTS = {
    "I1": "tokens",
    "I2": "exclusivity",
    "I3": "stale rejection",
    "I4": "destinations",
    "I5": "nothing lost",
}
HOLDER_OPS = ("renew", "complete", "release", "fail")
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

    def by_invariant(self) -> dict[str, list[Violation]]:
        found: dict[str, list[Violation]] = {key: [] for key in INVARIANTS}
        for violation in self.violations:
            found[violation.invariant].append(violation)
        return found

    def headline(self) -> str:
        c = self.counts
        if self.status == "VALID":
            return (
                f"VALID: I1-I5 held on {c['jobs_submitted']} jobs; faults bit: "
                f"{c['stale_completions_rejected']} stale completions and "
                f"{c['stale_writes_rejected']} stale writes rejected"
            )
        if self.status == "UNPROVEN":
            return (
                "UNPROVEN: no invariant was violated, but no stale completion or stale write "
                "was rejected either: the faults did not bite, so this run proves nothing"
            )
        kinds = ", ".join(f"{key} x{len(v)}" for key, v in self.by_invariant().items() if v)
        return f"INVALID: {len(self.violations)} violation(s) ({kinds})"

    def lines(self) -> list[str]:
        c, info = self.counts, self.info
        out = []
        head = ", ".join(
            f"{k} {info[k]}" for k in ("store", "workers", "ttl", "seed") if info.get(k) is not None
        )
        if info.get("unsafe"):
            head += f", UNSAFE {info['unsafe']}"
        out.append(f"history: {c['events']} events" + (f" ({head})" if head else ""))
        out.append(
            f"jobs: {c['jobs_submitted']} submitted, {c['jobs_done']} done, "
            f"{c['jobs_dead']} dead, {c['jobs_stranded']} stranded"
        )
        out.append(
            f"claims: {c['claims']} granted ({c['storm_claims']} in claim storms), "
            f"{c['claim_calls']} claim calls, {c['claims_unknown']} with unknown outcome"
        )
        out.append(
            f"renewals: {c['renewals']} accepted, {c['stale_renewals_rejected']} stale rejected"
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
        if c["pause_points_missed"]:
            out.append(f"  {c['pause_points_missed']} armed pause points were not reached")
        for key, name in INVARIANTS.items():
            found = self.by_invariant()[key]
            label = f"{key} {name}"
            out.append(f"{label:<22} {'ok' if not found else f'VIOLATED x{len(found)}'}")
            for violation in found[:SHOWN]:
                out.append(f"    - {violation.message}")
            if len(found) > SHOWN:
                out.append(f"    ... and {len(found) - SHOWN} more (see the report)")
        return out


def _desc(op: dict[str, Any]) -> str:
    """How an operation is named in messages: process, what, op id, job, gen, store time."""
    parts = [f"{op.get('proc', '?')} {op.get('f', '?')}"]
    if op.get("gen") is not None:
        parts.append(f"gen {op['gen']}")
    if op.get("store_now") is not None:
        parts.append(f"at store time {float(op['store_now']):.6f}")
    parts.append(f"[op {op.get('op', '?')}]")
    return " ".join(parts)


class _History:
    """Operations paired from invoke/completion events, and the events that are not ops."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.ops: dict[str, dict[str, Any]] = {}
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

    def of(self, *fs: str) -> list[dict[str, Any]]:
        return [op for op in self.ops.values() if op.get("f") in fs]


def check_history(events: Iterable[Event]) -> Verdict:
    """Check I1-I5 on ``events`` (a history's events, in any order)."""
    h = _History(events)
    violations: list[Violation] = []
    counts: Counter[str] = Counter()
    counts["events"] = h.count
    config = h.events.get("config", [{}])[-1]
    info = {k: config.get(k) for k in ("store", "workers", "ttl", "seed", "unsafe", "jobs")}
    calibrations = [e["offset"] for e in h.events.get("calibrate", []) if "offset" in e]
    offset = sum(calibrations) / len(calibrations) if calibrations else 0.0

    # -- claims ------------------------------------------------------------------------
    claims: dict[str, list[Interval]] = defaultdict(list)
    unknown_claims: Counter[str] = Counter()  # job -> claims by id with unknown outcome
    unknown_claim_next = 0
    for op in h.of("claim_next", "claim"):
        counts["claim_calls"] += 1
        if op["type"] in ("unknown", "pending"):
            counts["claims_unknown"] += 1
            if op["f"] == "claim_next":  # a lost batch may have taken up to `limit` jobs
                unknown_claim_next += int(op.get("limit") or 1)
            else:
                unknown_claims[op.get("job", "")] += 1
            continue
        if op["type"] != "ok":
            continue
        granted = op.get("claims", []) if op["f"] == "claim_next" else [op]
        for claim in granted:
            job = claim["job"]
            gen = int(claim.get("row_gen", claim.get("gen", 0)) or 0)
            until = float(claim["lease_until"])
            start = float(claim["store_now"])
            if claim.get("repeat"):
                if any(c.gen == gen and c.owner == op.get("owner") for c in claims[job]):
                    continue
                start = until - float(op.get("ttl") or 0.0)
            interval = Interval(
                job, gen, str(op.get("owner")), str(op.get("proc")), op["op"], start, until
            )
            claims[job].append(interval)
            counts["claims"] += 1
            if str(op.get("proc", "")).startswith("s"):
                counts["storm_claims"] += 1

    # I1: distinct generations, growing with store time; gaps explained by unknown claims.
    unexplained_gaps: list[tuple[str, list[int]]] = []
    finals = {e["job"]: e for e in h.events.get("final", []) if "job" in e}
    for job, granted in claims.items():
        by_gen: dict[int, list[Interval]] = defaultdict(list)
        for c in granted:
            by_gen[c.gen].append(c)
        for gen, same in sorted(by_gen.items()):
            if len(same) > 1:
                violations.append(
                    Violation(
                        "I1",
                        job,
                        f"job {job}: generation {gen} was granted {len(same)} times: "
                        + "; ".join(
                            f"to {c.owner} ({c.proc}, store time {c.start:.6f}) [op {c.op}]"
                            for c in same
                        ),
                        [c.op for c in same],
                    )
                )
        ordered = sorted(granted, key=lambda c: (c.start, c.gen))
        for a, b in itertools.pairwise(ordered):
            if b.gen < a.gen and b.start > a.start + EPS:
                violations.append(
                    Violation(
                        "I1",
                        job,
                        f"job {job}: generation {b.gen} was granted at store time "
                        f"{b.start:.6f} [op {b.op}], after generation {a.gen} at "
                        f"{a.start:.6f} [op {a.op}]: generations went backwards",
                        [a.op, b.op],
                    )
                )
        top = max(by_gen)
        final = finals.get(job)
        if final is not None and final.get("gen") is not None:
            if int(final["gen"]) < top:
                violations.append(
                    Violation(
                        "I1",
                        job,
                        f"job {job}: the store shows generation {final['gen']} after the run, "
                        f"lower than generation {top} it granted [op {by_gen[top][0].op}]",
                        [by_gen[top][0].op],
                    )
                )
            top = max(top, int(final["gen"]))
        missing = [g for g in range(1, top + 1) if g not in by_gen]
        if missing and len(missing) > unknown_claims[job]:
            unexplained_gaps.append((job, missing))
    gap_total = sum(len(m) for _, m in unexplained_gaps)
    if gap_total > unknown_claim_next:
        for job, missing in unexplained_gaps:
            violations.append(
                Violation(
                    "I1",
                    job,
                    f"job {job}: generation(s) {', '.join(map(str, missing[:10]))} were never "
                    f"granted by a recorded claim ({gap_total} such generations in all; claims "
                    f"whose outcome is unknown explain at most {unknown_claim_next})",
                )
            )

    # -- holder operations, in store time ----------------------------------------------
    holders: dict[tuple[str, int, str], list[Interval]] = defaultdict(list)
    for granted in claims.values():
        for c in granted:
            holders[(c.job, c.gen, c.owner)].append(c)
    procs_with_lost_claims = {
        op.get("proc") for op in h.of("claim_next", "claim") if op["type"] in ("unknown", "pending")
    }

    def interval_of(op: dict[str, Any]) -> Interval | None:
        found = holders.get((op.get("job", ""), int(op.get("gen") or 0), str(op.get("owner"))))
        if not found:
            return None
        at = float(op.get("store_now") or 0.0)
        earlier = [c for c in found if c.start <= at + EPS]
        return max(earlier or found, key=lambda c: c.start)

    holder_ops = sorted(
        (op for op in h.of(*HOLDER_OPS)),
        key=lambda op: (float(op.get("store_now") or 0.0), op.get("seq", 0)),
    )
    for op in holder_ops:
        if op["type"] in ("unknown", "pending") and op["f"] == "renew":
            unknown = interval_of(op)
            if unknown is not None:
                unknown.unknown_renewals += 1
    completions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    # The settles (complete/release/fail) that may have ended each lease: accepted, or with
    # their outcome unknown. A "repeat" answer is only true when one of the same kind did.
    settles: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for op in holder_ops:
        f, kind = op["f"], op["type"]
        lease_key = (str(op.get("job")), int(op.get("gen") or 0))
        if kind in ("unknown", "pending"):
            counts["store_unknown"] += 1
            if f != "renew":
                settles[lease_key].append(op)
            continue
        if kind == "fail":
            counts[f"stale_{_plural(f)}_rejected"] += 1
            continue
        if op.get("repeat"):
            counts[f"{f}_repeats" if f != "complete" else "completion_repeats"] += 1
            earlier = settles.get(lease_key, [])
            if f != "renew" and not any(e["f"] == f for e in earlier):
                ended = (
                    f"the lease was ended by {earlier[0]['f']} [op {earlier[0]['op']}]"
                    if earlier
                    else f"no earlier {f} of this lease was accepted or left unknown"
                )
                violations.append(
                    Violation(
                        "I3",
                        lease_key[0],
                        f"job {lease_key[0]}: {_desc(op)} was answered as a repeat of an "
                        f"earlier {f}, but {ended}",
                        [op["op"], *(e["op"] for e in earlier[:1])],
                    )
                )
            elif f != "renew":
                # The repeat proves its earlier settle (maybe one whose reply was lost)
                # ended the lease, by this store time at the latest.
                settled = interval_of(op)
                if settled is not None and settled.end_at is None:
                    settled.end_at = float(op["store_now"])
                    settled.ended_by = op["op"]
            continue
        if f != "renew":
            settles[lease_key].append(op)
        counts[_plural(f)] += 1
        if f == "complete":
            completions[op["job"]].append(op)
        job, gen, t = op["job"], int(op.get("gen") or 0), float(op["store_now"])
        found = interval_of(op)
        if found is None:
            same_gen = [c for c in claims.get(job, []) if c.gen == gen]
            if same_gen:
                violations.append(
                    Violation(
                        "I3",
                        job,
                        f"job {job}: {_desc(op)} was accepted for owner {op.get('owner')}, "
                        f"but generation {gen} was granted to {same_gen[0].owner} "
                        f"[op {same_gen[0].op}]",
                        [op["op"], same_gen[0].op],
                    )
                )
            elif op.get("proc") not in procs_with_lost_claims:
                violations.append(
                    Violation(
                        "I3",
                        job,
                        f"job {job}: {_desc(op)} was accepted for a lease no recorded claim "
                        "granted",
                        [op["op"]],
                    )
                )
            continue
        interval = found
        newer = [c for c in claims[job] if c.gen > gen and c.start < t - EPS]
        if newer:
            first = min(newer, key=lambda c: c.start)
            violations.append(
                Violation(
                    "I3",
                    job,
                    f"job {job}: stale {_desc(op)} was accepted, but generation {first.gen} "
                    f"had been granted to {first.owner} at store time {first.start:.6f} "
                    f"[op {first.op}]",
                    [op["op"], first.op],
                )
            )
        elif interval.end_at is not None and interval.end_at < t - EPS:
            violations.append(
                Violation(
                    "I3",
                    job,
                    f"job {job}: {_desc(op)} was accepted after its lease had ended "
                    f"({interval.ended_by}) at store time {interval.end_at:.6f}",
                    [op["op"], str(interval.ended_by)],
                )
            )
        elif t > interval.until + EPS and not interval.unknown_renewals:
            violations.append(
                Violation(
                    "I3",
                    job,
                    f"job {job}: {_desc(op)} was accepted {t - interval.until:.3f} s after its "
                    f"lease expired (lease_until {interval.until:.6f}, claim [op {interval.op}])",
                    [op["op"], interval.op],
                )
            )
        if f == "renew" and op.get("lease_until") is not None:
            interval.renewals.append((t, float(op["lease_until"])))
            interval.until = max(interval.until, float(op["lease_until"]))
        elif f != "renew" and interval.end_at is None:
            interval.end_at = t
            interval.ended_by = op["op"]

    for job, done in completions.items():
        if len(done) > 1:
            violations.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} was completed {len(done)} times: "
                    + "; ".join(_desc(op) for op in done),
                    [op["op"] for op in done],
                )
            )

    # The final state must come from an accepted completion (a rejected one changed nothing).
    unknown_completes = {
        (op.get("job"), int(op.get("gen") or 0))
        for op in h.of("complete")
        if op["type"] in ("unknown", "pending")
    }
    for job, final in finals.items():
        if final.get("state") != "done":
            continue
        gen = int(final.get("gen") or 0)
        done = completions.get(job, [])
        result = final.get("result")
        result_gen = result.get("gen") if isinstance(result, dict) else None
        matching = [op for op in done if int(op.get("gen") or 0) == gen]
        if done and not matching:
            violations.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} ended done at generation {gen}, but the completion the store "
                    f"accepted was {_desc(done[0])}",
                    [op["op"] for op in done],
                )
            )
        elif not done and (job, gen) not in unknown_completes:
            violations.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} ended done at generation {gen} without any accepted "
                    "completion: a rejected operation changed it",
                )
            )
        elif result_gen is not None and result_gen != gen:
            violations.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} ended done at generation {gen} with the result of generation "
                    f"{result_gen}",
                )
            )

    # I2: ownership intervals never overlap in store time.
    for job, granted in claims.items():
        ordered = sorted(granted, key=lambda c: (c.start, c.gen))
        latest: Interval | None = None
        for c in ordered:
            if latest is not None and c.start < latest.end - EPS:
                violations.append(
                    Violation(
                        "I2",
                        job,
                        f"job {job}: generation {c.gen} ({c.owner}, claimed at store time "
                        f"{c.start:.6f}) [op {c.op}] overlaps generation {latest.gen} "
                        f"({latest.owner}), held until {latest.end:.6f} [op {latest.op}] "
                        f"by {latest.end - c.start:.3f} s",
                        [latest.op, c.op],
                    )
                )
            if latest is None or c.end > latest.end:
                latest = c

    # -- I4: the destination ------------------------------------------------------------
    writes = h.of("write")
    writer: dict[int, dict[str, Any]] = {}
    for op in writes:
        kind = op["type"]
        if kind == "ok":
            if op.get("duplicate"):
                counts["writes_duplicate"] += 1
            else:
                counts["writes_accepted"] += 1
                if op.get("record") is not None:
                    writer.setdefault(int(op["record"]), op)
        elif kind == "fail":
            if op.get("status") == 409:
                counts["stale_writes_rejected"] += 1
            else:
                counts["writes_refused_other"] += 1
        else:
            counts["writes_unknown"] += 1
    counts["writes_withheld"] = len(h.events.get("write-withheld", []))
    records = [
        {"record": int(e["record"]), "job": e["job"], "gen": e["gen"], "key": e.get("key")}
        for e in h.events.get("sink-record", [])
    ]
    if not records:  # no ledger in this history: the writers' own view
        records = [
            {"record": r, "job": op["job"], "gen": op["gen"], "key": op.get("key")}
            for r, op in writer.items()
        ]
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_job[record["job"]].append(record)
    for job, accepted in by_job.items():
        accepted.sort(key=lambda r: r["record"])
        highest: dict[str, Any] | None = None
        keys: dict[str, int] = {}
        for record in accepted:
            sent = writer.get(record["record"])
            gen = int(sent["gen"]) if sent is not None else int(record["gen"])
            who = f"[op {sent['op']}] by {sent.get('proc')}" if sent else "(writer not recorded)"
            if highest is not None and gen < highest["gen"]:
                violations.append(
                    Violation(
                        "I4",
                        job,
                        f"job {job}: the sink accepted a write of generation {gen} (record "
                        f"{record['record']}, {who}) after one of generation {highest['gen']} "
                        f"(record {highest['record']} {highest['who']})",
                        [x for x in (sent and sent["op"], highest.get("op")) if x],
                    )
                )
            if highest is None or gen > highest["gen"]:
                highest = {
                    "gen": gen,
                    "record": record["record"],
                    "who": who,
                    "op": sent["op"] if sent else None,
                }
            key = record.get("key")
            if key is not None:
                if key in keys:
                    violations.append(
                        Violation(
                            "I4",
                            job,
                            f"job {job}: effect key {key!r} was accepted twice (records "
                            f"{keys[key]} and {record['record']})",
                        )
                    )
                keys[key] = record["record"]

    # -- I5: nothing lost ---------------------------------------------------------------
    submitted = {op["job"] for op in h.of("submit") if op["type"] == "ok"} | set(finals)
    counts["jobs_submitted"] = len(submitted)
    if submitted and not finals:
        violations.append(
            Violation("I5", None, "the history has no final job states: nothing to check")
        )
    for job in sorted(submitted):
        final = finals.get(job)
        if final is None:
            if finals:
                violations.append(Violation("I5", job, f"job {job}: no final state recorded"))
            continue
        state = final.get("state")
        if state == "done":
            counts["jobs_done"] += 1
        elif state == "dead":
            counts["jobs_dead"] += 1
            attempts, most = final.get("attempts"), final.get("max_attempts")
            if attempts is not None and most is not None and attempts < most:
                violations.append(
                    Violation(
                        "I5",
                        job,
                        f"job {job} is dead after {attempts} of its {most} attempts",
                    )
                )
        else:
            counts["jobs_stranded"] += 1
            violations.append(
                Violation(
                    "I5",
                    job,
                    f"job {job} is stranded: {state} after the run (generation "
                    f"{final.get('gen')}, owner {final.get('owner')})",
                )
            )

    # -- faults -------------------------------------------------------------------------
    faults: Counter[str] = Counter()
    spans: dict[tuple[str, str], dict[str, Any]] = {}
    fault_spans: list[dict[str, Any]] = []
    for event in sorted(h.events.get("fault", []), key=lambda e: e.get("t", 0.0)):
        kind, phase = str(event.get("kind")), event.get("phase")
        key = (kind, str(event.get("target", event.get("pid", ""))))
        if phase == "start":
            faults[kind] += 1
            span = {"kind": kind, "target": event.get("target"), "start": event["t"], "end": None}
            span["detail"] = {
                k: v
                for k, v in event.items()
                if k not in ("seq", "t", "proc", "pid", "type", "f", "kind", "phase")
            }
            spans[key] = span
            fault_spans.append(span)
        elif phase == "end" and key in spans:
            spans.pop(key)["end"] = event["t"]
        elif phase == "missed":
            counts["pause_points_missed"] += 1

    # -- timeline marks -----------------------------------------------------------------
    marks: dict[str, list[Mark]] = defaultdict(list)
    for op in holder_ops:
        if op["type"] == "fail" and op.get("store_now") is not None:
            marks[op["job"]].append(
                Mark(
                    op["job"],
                    float(op["store_now"]),
                    f"rejected-{op['f']}",
                    op.get("gen"),
                    str(op.get("proc")),
                    f"store rejected {op['f']} of generation {op.get('gen')}: the job was at "
                    f"generation {op.get('row_gen')} ({op.get('row_state')})",
                )
            )
    for op in writes:
        at = float(op.get("t", 0.0)) + offset
        if op["type"] == "ok" and not op.get("duplicate"):
            marks[op["job"]].append(
                Mark(
                    op["job"], at, "write-ok", op.get("gen"), str(op.get("proc")), op.get("key", "")
                )
            )
        elif op["type"] == "fail" and op.get("status") == 409:
            marks[op["job"]].append(
                Mark(
                    op["job"],
                    at,
                    "write-stale",
                    op.get("gen"),
                    str(op.get("proc")),
                    f"sink refused generation {op.get('gen')}: generation {op.get('current')} "
                    "already wrote",
                )
            )
    for event in h.events.get("write-withheld", []):
        marks[event["job"]].append(
            Mark(
                event["job"],
                float(event["t"]) + offset,
                "write-withheld",
                event.get("gen"),
                str(event.get("proc")),
                "the worker knew its lease was lost and did not send",
            )
        )
    for event in h.events.get("fault", []):
        if event.get("phase") == "hit" and event.get("job"):
            marks[event["job"]].append(
                Mark(
                    event["job"],
                    float(event["t"]) + offset,
                    "pause",
                    event.get("gen"),
                    str(event.get("proc")),
                    f"{event.get('kind')}: process stopped for {event.get('duration')} s",
                )
            )

    for key in (
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
        "jobs_stranded",
        "pause_points_missed",
        "store_unknown",
    ):
        counts.setdefault(key, 0)
    bit = counts["stale_completions_rejected"] + counts["stale_writes_rejected"] > 0
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
        info=info,
        intervals=dict(claims),
        marks=dict(marks),
        fault_spans=fault_spans,
        offset=offset,
    )


def _plural(f: str) -> str:
    return {
        "renew": "renewals",
        "complete": "completions",
        "release": "releases",
        "fail": "fails",
    }[f]
