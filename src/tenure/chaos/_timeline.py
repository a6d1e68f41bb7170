"""What the report draws besides the intervals: the faults as spans of host time, and the
marks on each job's timeline (moved onto the store's time axis by the run's offset)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ._context import Context
from ._outages import Reexecution
from ._verdict import Mark

__all__ = ["fault_spans", "marks", "reexecution_marks"]


def fault_spans(ctx: Context) -> tuple[Counter[str], list[dict[str, Any]]]:
    """The faults injected, by kind, and each one's span; counts the missed pause points."""
    faults: Counter[str] = Counter()
    open_spans: dict[tuple[str, str], dict[str, Any]] = {}
    spans: list[dict[str, Any]] = []
    for event in sorted(ctx.paired.events.get("fault", []), key=lambda e: e.get("t", 0.0)):
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
            open_spans[key] = span
            spans.append(span)
        elif phase == "end" and key in open_spans:
            open_spans.pop(key)["end"] = event["t"]
        elif phase == "missed":
            ctx.counts["pause_points_missed"] += 1
    return faults, spans


def marks(ctx: Context) -> dict[str, list[Mark]]:
    """Per job: the stale calls the store rejected, the writes (accepted, refused as
    stale, withheld by their worker) and the moments its holder was stopped."""
    found: dict[str, list[Mark]] = defaultdict(list)
    for op in ctx.holder_ops:
        if op["type"] == "fail" and op.get("store_now") is not None:
            found[op["job"]].append(
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
    for op in ctx.paired.of("cancel", "requeue"):
        if op["type"] == "ok" and op.get("store_now") is not None:
            kind = "cancelled" if op["f"] == "cancel" else "requeued"
            found[op["job"]].append(
                Mark(
                    op["job"],
                    float(op["store_now"]),
                    kind,
                    op.get("row_gen"),
                    str(op.get("proc")),
                    f"{op['f']} accepted: the job is {op.get('row_state')} at generation "
                    f"{op.get('row_gen')}",
                )
            )
    for op in ctx.writes.ops:
        mark = _write_mark(op, float(op.get("t", 0.0)) + ctx.offset)
        if mark is not None:
            found[mark.job].append(mark)
    for event in ctx.paired.events.get("write-withheld", []):
        found[event["job"]].append(
            _event_mark(
                event,
                ctx.offset,
                "write-withheld",
                "the worker knew its lease was lost and did not send",
            )
        )
    for event in ctx.paired.events.get("fault", []):
        if event.get("phase") == "hit" and event.get("job"):
            detail = f"{event.get('kind')}: process stopped for {event.get('duration')} s"
            found[event["job"]].append(_event_mark(event, ctx.offset, "pause", detail))
    return dict(found)


def _event_mark(event: dict[str, Any], offset: float, kind: str, detail: str) -> Mark:
    """The mark of an event a process recorded at its host time."""
    at = float(event["t"]) + offset
    return Mark(event["job"], at, kind, event.get("gen"), str(event.get("proc")), detail)


def _write_mark(op: dict[str, Any], at: float) -> Mark | None:
    if op["type"] == "ok" and not op.get("duplicate"):
        return Mark(
            op["job"], at, "write-ok", op.get("gen"), str(op.get("proc")), op.get("key", "")
        )
    if op["type"] == "fail" and op.get("status") == 409:
        return Mark(
            op["job"],
            at,
            "write-stale",
            op.get("gen"),
            str(op.get("proc")),
            f"sink refused generation {op.get('gen')}: generation {op.get('current')} "
            "already wrote",
        )
    return None


def reexecution_marks(found: list[Reexecution]) -> dict[str, list[Mark]]:
    """Per job: where a lost lease's handler was run again (at the lost lease's end)."""
    marks: dict[str, list[Mark]] = defaultdict(list)
    for r in found:
        lost = r.lost
        why = f"during a {r.outage.kind} outage" if r.outage is not None else "not in an outage"
        work = "its work was done, its completion lost" if r.finished else "its handler had run"
        detail = (
            f"generation {lost.gen} lost its lease ({work}), {why}; generation "
            f"{r.again.gen} ({r.again.proc}) ran the handler again"
        )
        marks[r.job].append(Mark(r.job, lost.end, "reexecuted", lost.gen, lost.proc, detail))
    return dict(marks)
