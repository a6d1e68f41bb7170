"""The checker's units: one function per invariant (or per rule of one), each judging a
`Context` and returning what it violates. docs/reliability.md says what each means.

* I1 `tokens`;
* I2 `exclusivity`, on the intervals as the holder operations left them;
* I3 `stale_rejection`: per `Step` in store time, `current_holder` for a call the store
  accepted, `repeat_answer` for one it answered as a repeat; then `one_completion` and
  `done_by_its_completion`;
* I4 `destinations`;
* I5 `nothing_lost`;
* I6 `queue_limits` (tenure.chaos._limits), on a history with queue limits or rates
  (``--workload flow``).

Cancels and requeues (the ``cancel`` fault) enter through the `Context`: a generation an
accepted cancel took is no I1 gap, the lease a cancel ended is ended for I2 and I3 (so a
completion accepted after it is flagged), a requeue starts a new life of the job (one
completion per life), and a job left cancelled counts as ended for I5.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..locks import LOCK_ID_PREFIX
from ._context import EPS, UNKNOWN, Context, Step
from ._failover import (
    crossed,
    failovers,
    lost_completion,
    lost_submit,
    missing_generations,
    on_older_timeline,
)
from ._limits import queue_limits
from ._verdict import Interval, Violation

__all__ = [
    "UNITS",
    "current_holder",
    "describe",
    "destinations",
    "done_by_its_completion",
    "exclusivity",
    "nothing_lost",
    "one_completion",
    "queue_limits",
    "repeat_answer",
    "stale_rejection",
    "tokens",
]

Unit = Callable[[Context], list[Violation]]
# Seconds: how far a store time estimated from a host time (a call's send, moved by the
# run's calibrated offset) may be off.
SETTLE_SLACK = 0.1


def describe(op: dict[str, Any]) -> str:
    """How an operation is named in messages: process, what, op id, job, gen, store time."""
    parts = [f"{op.get('proc', '?')} {op.get('f', '?')}"]
    if op.get("gen") is not None:
        parts.append(f"gen {op['gen']}")
    if op.get("store_now") is not None:
        parts.append(f"at store time {float(op['store_now']):.6f}")
    parts.append(f"[op {op.get('op', '?')}]")
    return " ".join(parts)


# -- I1 tokens ---------------------------------------------------------------------------


def tokens(ctx: Context) -> list[Violation]:
    """I1: per job, distinct generations growing with store time, none lower after the run;
    the generations no claim explains are at most what the lost claims could have taken."""
    found: list[Violation] = []
    unexplained: list[tuple[str, list[int]]] = []
    for job, granted in ctx.claims.intervals.items():
        by_gen: dict[int, list[Interval]] = defaultdict(list)
        for c in granted:
            by_gen[c.gen].append(c)
        found += _granted_twice(job, by_gen)
        found += _backwards(job, granted)
        top = max(by_gen)
        final = ctx.finals.get(job)
        if final is not None and final.get("gen") is not None:
            if int(final["gen"]) < top:
                first = by_gen[top][0].op
                found.append(
                    Violation(
                        "I1",
                        job,
                        f"job {job}: the store shows generation {final['gen']} after the run, "
                        f"lower than generation {top} it granted [op {first}]",
                        [first],
                    )
                )
            top = max(top, int(final["gen"]))
        # A generation an accepted cancel took (a leased job's moves on) is no gap; a
        # cancel whose outcome is unknown may have taken one, as a lost claim may.
        taken = ctx.control.taken(job)
        # Per timeline (tenure.chaos._failover): a failover's jump to the next base is no gap.
        missing = missing_generations(set(by_gen) | taken, top)
        lost = ctx.claims.unknown[job] + ctx.control.unknown_cancels[job]
        if missing and len(missing) > lost:
            unexplained.append((job, missing))
    gaps = sum(len(m) for _, m in unexplained)
    if gaps > ctx.claims.unknown_batch:
        for job, missing in unexplained:
            found.append(
                Violation(
                    "I1",
                    job,
                    f"job {job}: generation(s) {', '.join(map(str, missing[:10]))} were never "
                    f"granted by a recorded claim ({gaps} such generations in all; claims "
                    f"whose outcome is unknown explain at most {ctx.claims.unknown_batch})",
                )
            )
    return found


def _granted_twice(job: str, by_gen: dict[int, list[Interval]]) -> list[Violation]:
    return [
        Violation(
            "I1",
            job,
            f"job {job}: generation {gen} was granted {len(same)} times: "
            + "; ".join(
                f"to {c.owner} ({c.proc}, store time {c.start:.6f}) [op {c.op}]" for c in same
            ),
            [c.op for c in same],
        )
        for gen, same in sorted(by_gen.items())
        if len(same) > 1
    ]


def _backwards(job: str, granted: list[Interval]) -> list[Violation]:
    ordered = sorted(granted, key=lambda c: (c.start, c.gen))
    return [
        Violation(
            "I1",
            job,
            f"job {job}: generation {b.gen} was granted at store time {b.start:.6f} "
            f"[op {b.op}], after generation {a.gen} at {a.start:.6f} [op {a.op}]: "
            "generations went backwards",
            [a.op, b.op],
        )
        for a, b in itertools.pairwise(ordered)
        if b.gen < a.gen and b.start > a.start + EPS
    ]


# -- I2 exclusivity ------------------------------------------------------------------------


def exclusivity(ctx: Context) -> list[Violation]:
    """I2: per job, no interval starts before the latest-ending earlier one has ended."""
    found: list[Violation] = []
    windows = failovers(ctx)
    for job, granted in ctx.claims.intervals.items():
        latest: Interval | None = None
        for c in sorted(granted, key=lambda c: (c.start, c.gen)):
            if (
                latest is not None
                and c.start < latest.end - EPS
                and on_older_timeline(latest.gen, c.gen)
                and crossed(windows, latest.start, c.start)
            ):
                # The new primary never heard of the old one's lease (tenure.chaos._failover).
                ctx.counts["failover_overlaps"] += 1
            elif (
                latest is not None
                and latest.settle_sent is not None
                and c.start >= latest.settle_sent - SETTLE_SLACK
            ):
                # The older lease's release (or complete, fail) was sent before this claim
                # and its answer was lost: it may have ended the lease first (a lock's
                # release makes it claimable at once), so no overlap is proven.
                ctx.counts["overlaps_unknown_settle"] += c.start < latest.end - EPS
            elif latest is not None and c.start < latest.end - EPS:
                found.append(
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
    return found


# -- I3 stale rejection -------------------------------------------------------------------


def stale_rejection(ctx: Context) -> list[Violation]:
    """I3 on each accepted renew / complete / release / fail and each repeat answer."""
    found = (
        repeat_answer(step) if step.repeat else current_holder(ctx, step)
        for step in ctx.leases.steps
    )
    return [violation for violation in found if violation is not None]


def repeat_answer(step: Step) -> Violation | None:
    """A settle answered as a repeat that no earlier call of the same operation explains."""
    if step.explained:
        return None
    op, earlier = step.op, step.earlier
    f, job = op["f"], str(op.get("job"))
    ended = (
        f"the lease was ended by {earlier[0]['f']} [op {earlier[0]['op']}]"
        if earlier
        else f"no earlier {f} of this lease was accepted or left unknown"
    )
    return Violation(
        "I3",
        job,
        f"job {job}: {describe(op)} was answered as a repeat of an earlier {f}, but {ended}",
        [op["op"], *(e["op"] for e in earlier[:1])],
    )


def current_holder(ctx: Context, step: Step) -> Violation | None:
    """An accepted call not made by the current holder: another owner, no claim at all, a
    newer generation granted before it, its lease ended or expired before it."""
    op = step.op
    job, gen, t = op["job"], int(op.get("gen") or 0), float(op["store_now"])
    lease = step.lease
    if lease is None:
        same_gen = [c for c in ctx.claims.intervals.get(job, []) if c.gen == gen]
        if same_gen:
            return Violation(
                "I3",
                job,
                f"job {job}: {describe(op)} was accepted for owner {op.get('owner')}, "
                f"but generation {gen} was granted to {same_gen[0].owner} "
                f"[op {same_gen[0].op}]",
                [op["op"], same_gen[0].op],
            )
        if op.get("proc") not in ctx.claims.lost_by:
            return Violation(
                "I3",
                job,
                f"job {job}: {describe(op)} was accepted for a lease no recorded claim granted",
                [op["op"]],
            )
        return None
    newer = [c for c in ctx.claims.intervals[job] if c.gen > gen and c.start < t - EPS]
    if newer:
        first = min(newer, key=lambda c: c.start)
        return Violation(
            "I3",
            job,
            f"job {job}: stale {describe(op)} was accepted, but generation {first.gen} "
            f"had been granted to {first.owner} at store time {first.start:.6f} "
            f"[op {first.op}]",
            [op["op"], first.op],
        )
    if step.end_at is not None and step.end_at < t - EPS:
        return Violation(
            "I3",
            job,
            f"job {job}: {describe(op)} was accepted after its lease had ended "
            f"({step.ended_by}) at store time {step.end_at:.6f}",
            [op["op"], str(step.ended_by)],
        )
    if t > step.until + EPS and not lease.unknown_renewals:
        return Violation(
            "I3",
            job,
            f"job {job}: {describe(op)} was accepted {t - step.until:.3f} s after its "
            f"lease expired (lease_until {step.until:.6f}, claim [op {lease.op}])",
            [op["op"], lease.op],
        )
    return None


def one_completion(ctx: Context) -> list[Violation]:
    """I3: at most one accepted completion per job and life (an accepted requeue of a done
    job starts a new life, which may be completed once more)."""
    found: list[Violation] = []
    windows = failovers(ctx)
    for job, done in ctx.leases.completions.items():
        lives: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for op in done:
            lives[ctx.control.lives(job, float(op["store_now"]))].append(op)
        for life, same in sorted(lives.items()):
            if len(same) < 2:
                continue
            if lost_completion(windows, same):
                ctx.counts["completions_lost_failover"] += len(same) - 1
                continue
            since = f" since its requeue number {life}" if life else ""
            found.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} was completed {len(same)} times{since}: "
                    + "; ".join(describe(op) for op in same),
                    [op["op"] for op in same],
                )
            )
    return found


def done_by_its_completion(ctx: Context) -> list[Violation]:
    """I3: a job that ended done shows the generation and result of the completion the
    store accepted (a rejected one changed nothing)."""
    unknown = {
        (op.get("job"), int(op.get("gen") or 0))
        for op in ctx.paired.of("complete")
        if op["type"] in UNKNOWN
    }
    found: list[Violation] = []
    for job, final in ctx.finals.items():
        if final.get("state") != "done":
            continue
        gen = int(final.get("gen") or 0)
        done = ctx.leases.completions.get(job, [])
        result = final.get("result")
        result_gen = result.get("gen") if isinstance(result, dict) else None
        matching = [op for op in done if int(op.get("gen") or 0) == gen]
        if done and not matching:
            found.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} ended done at generation {gen}, but the completion the store "
                    f"accepted was {describe(done[0])}",
                    [op["op"] for op in done],
                )
            )
        elif not done and (job, gen) not in unknown:
            found.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} ended done at generation {gen} without any accepted "
                    "completion: a rejected operation changed it",
                )
            )
        elif result_gen is not None and result_gen != gen:
            found.append(
                Violation(
                    "I3",
                    job,
                    f"job {job} ended done at generation {gen} with the result of generation "
                    f"{result_gen}",
                )
            )
    return found


# -- I4 destinations ----------------------------------------------------------------------


def destinations(ctx: Context) -> list[Violation]:
    """I4: per job, in the sink's order, the senders' generations never decrease and no
    effect key was accepted twice."""
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in ctx.writes.records:
        by_job[record["job"]].append(record)
    found: list[Violation] = []
    for job, accepted in by_job.items():
        accepted.sort(key=lambda r: r["record"])
        highest: dict[str, Any] | None = None
        keys: dict[str, int] = {}
        for record in accepted:
            sent = ctx.writes.sender.get(record["record"])
            gen = int(sent["gen"]) if sent is not None else int(record["gen"])
            who = f"[op {sent['op']}] by {sent.get('proc')}" if sent else "(writer not recorded)"
            if highest is not None and gen < highest["gen"]:
                found.append(
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
                    found.append(
                        Violation(
                            "I4",
                            job,
                            f"job {job}: effect key {key!r} was accepted twice (records "
                            f"{keys[key]} and {record['record']})",
                        )
                    )
                keys[key] = record["record"]
    return found


# -- I5 nothing lost ----------------------------------------------------------------------


def nothing_lost(ctx: Context) -> list[Violation]:
    """I5: every submitted job ended done, dead after all its attempts, or cancelled by a
    recorded cancel that no accepted requeue came after (a requeued job must end again);
    a lock's job can still be taken."""
    finals = ctx.finals
    found: list[Violation] = []
    if ctx.submitted and not finals:
        found.append(Violation("I5", None, "the history has no final job states: nothing to check"))
    for job in sorted(ctx.submitted):
        final = finals.get(job)
        if final is None:
            if finals:
                found.append(Violation("I5", job, f"job {job}: no final state recorded"))
            continue
        state = final.get("state")
        if job.startswith(LOCK_ID_PREFIX):
            found += _lock_usable(job, final)
        elif state == "dead":
            attempts, most = final.get("attempts"), final.get("max_attempts")
            if attempts is not None and most is not None and attempts < most:
                found.append(
                    Violation(
                        "I5", job, f"job {job} is dead after {attempts} of its {most} attempts"
                    )
                )
        elif state == "cancelled":
            found += _cancelled(ctx, job)
        elif lost_submit(ctx, job, failovers(ctx)):
            # Accepted by the old primary only (tenure.chaos._failover): lost, not stranded.
            ctx.counts["jobs_stranded"] -= 1
            ctx.counts["submits_lost_failover"] += 1
        elif state != "done":
            found.append(
                Violation(
                    "I5",
                    job,
                    f"job {job} is stranded: {state} after the run (generation "
                    f"{final.get('gen')}, owner {final.get('owner')})",
                )
            )
    return found


def _lock_usable(job: str, final: dict[str, Any]) -> list[Violation]:
    """A lock's job (``--workload locks``) is never meant to end: after the run it is ready
    (released, or its last holder's lease ran out) or leased, never done, dead or
    cancelled (the lock could not be taken again)."""
    state = final.get("state")
    if state in ("ready", "leased"):
        return []
    return [
        Violation(
            "I5",
            job,
            f"lock job {job} is {state} after the run (generation {final.get('gen')}): "
            "the lock can no longer be taken",
        )
    ]


def _cancelled(ctx: Context, job: str) -> list[Violation]:
    """A job that ended cancelled: by an accepted (or unknown) cancel, not requeued since."""
    cancels = ctx.control.cancels.get(job, [])
    requeues = ctx.control.requeues.get(job, [])
    if ctx.control.unknown_cancels[job]:
        return []  # a cancel whose reply was lost may be the last word
    if not cancels:
        return [Violation("I5", job, f"job {job} is cancelled, but no recorded cancel took it")]
    last = cancels[-1]
    if requeues and float(requeues[-1]["store_now"]) > float(last["store_now"]) + EPS:
        requeued = requeues[-1]
        return [
            Violation(
                "I5",
                job,
                f"job {job} was requeued ({describe(requeued)}) after its last cancel "
                f"({describe(last)}), yet shows cancelled after the run: the requeued job "
                "never ended again",
                [requeued["op"], last["op"]],
            )
        ]
    return []


# In the order a verdict has always listed its violations: I1, I3, I2, I4, I5, then I6.
UNITS: tuple[Unit, ...] = (
    tokens,
    stale_rejection,
    one_completion,
    done_by_its_completion,
    exclusivity,
    destinations,
    nothing_lost,
    queue_limits,
)
