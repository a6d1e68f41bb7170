"""Hand-built chaos histories for the checker's unit tests.

`History` writes events in the recorder's format (tenure.chaos._history); `clean()` is a
small run that satisfies I1-I5 and in which faults bit (a stale completion and a stale
write were rejected). Each test breaks it in one place.
"""

from __future__ import annotations

import itertools
from typing import Any

T0 = 1_700_000_000.0
TTL = 2.0


class History:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._seq = itertools.count(1)
        self._ops = itertools.count(1)
        self._records = itertools.count(1)

    def _event(self, proc: str, **fields: Any) -> dict[str, Any]:
        event = {"seq": next(self._seq), "proc": proc, "pid": 1000, **fields}
        event.setdefault("t", T0)
        self.events.append(event)
        return event

    def op(
        self,
        proc: str,
        f: str,
        outcome: str,
        at: float,
        invoke: dict[str, Any],
        *,
        answered: float | None = None,
        **done: Any,
    ) -> str:
        """An operation sent at ``at``, its answer back a millisecond later (or at
        ``answered``, seconds after T0 in host time)."""
        op = f"{proc}/{next(self._ops)}"
        self._event(proc, type="invoke", op=op, f=f, t=T0 + at, **invoke)
        back = T0 + (at + 0.001 if answered is None else answered)
        if outcome != "pending":
            self._event(proc, type=outcome, op=op, f=f, t=back, **done)
        return op

    # -- store operations (times are seconds after T0, store time = host time) ------------

    def submit(self, job: str, queue: str | None = None) -> str:
        invoke: dict[str, Any] = {"job": job} if queue is None else {"job": job, "queue": queue}
        return self.op("harness", "submit", "ok", 0.0, invoke, status="applied")

    def claim(
        self,
        proc: str,
        owner: str,
        job: str,
        gen: int,
        at: float,
        *,
        lease_from: float | None = None,
        found: bool = False,
    ) -> str:
        """A claim_next granting ``job``; its lease starts at ``lease_from`` (default: its
        store time ``at``; later on PostgreSQL, for a limited queue's claim). ``found``:
        the lease a claim whose reply was lost took, found by its secret at ``at`` (its
        lease started at ``lease_from``, before)."""
        claim: dict[str, Any] = {
            "job": job,
            "gen": gen,
            "store_now": T0 + at,
            "lease_until": T0 + (at if lease_from is None else lease_from) + TTL,
            "attempts": gen,
            "max_attempts": 5,
        }
        if found:
            claim["found"] = True
        return self.op(
            proc,
            "claim_next",
            "ok",
            at,
            {"owner": owner, "ttl": TTL, "limit": 1},
            claims=[claim],
            store_now=T0 + at,
        )

    def lost_claim(self, proc: str, owner: str, at: float, limit: int = 1) -> str:
        invoke = {"owner": owner, "ttl": TTL, "limit": limit}
        return self.op(proc, "claim_next", "unknown", at, invoke)

    def holder(
        self,
        f: str,
        proc: str,
        owner: str,
        job: str,
        gen: int,
        at: float,
        outcome: str = "ok",
        *,
        row_gen: int | None = None,
        row_state: str = "leased",
        repeat: bool = False,
        answered: float | None = None,
    ) -> str:
        done: dict[str, Any] = {
            "job": job,
            "gen": gen,
            "status": "applied" if outcome == "ok" and not repeat else "missed",
            "store_now": T0 + at,
            "row_gen": gen if row_gen is None else row_gen,
            "row_state": row_state,
            "lease_until": T0 + at + TTL if f == "renew" and outcome == "ok" else None,
        }
        if repeat:
            done["repeat"] = True
        invoke = {"job": job, "gen": gen, "owner": owner}
        return self.op(proc, f, outcome, at, invoke, answered=answered, **done)

    def unreached(
        self, f: str, proc: str, owner: str, job: str, gen: int, at: float, outcome: str = "fail"
    ) -> str:
        """A holder call that raised `StoreUnavailable` (``fail``: it surely did not reach
        the store; ``unknown``: it may have)."""
        invoke = {"job": job, "gen": gen, "owner": owner}
        error = "could not reach the store: connection refused"
        return self.op(proc, f, outcome, at, invoke, job=job, gen=gen, error=error)

    def cancel(
        self,
        job: str,
        at: float,
        row_gen: int,
        outcome: str = "ok",
        *,
        row_state: str = "cancelled",
    ) -> str:
        """The harness cancels ``job`` (the cancel fault); ``row_gen``: the generation the
        store answered (one more than the lease's when it cancelled a leased job)."""
        done = {"job": job, "store_now": T0 + at, "row_gen": row_gen, "row_state": row_state}
        done["status"] = "applied" if outcome == "ok" else "missed"
        return self.op("harness", "cancel", outcome, at, {"job": job}, **done)

    def requeue(self, job: str, at: float, row_gen: int, outcome: str = "ok") -> str:
        done = {"job": job, "store_now": T0 + at, "row_gen": row_gen, "row_state": "ready"}
        done["status"] = "applied" if outcome == "ok" else "missed"
        return self.op("harness", "requeue", outcome, at, {"job": job}, **done)

    # -- the sink -----------------------------------------------------------------------

    def write(
        self,
        proc: str,
        owner: str,
        job: str,
        gen: int,
        step: int,
        at: float,
        *,
        stale: bool = False,
    ) -> tuple[str, int | None]:
        key = f"g{gen}-s{step}"
        invoke = {"job": job, "gen": gen, "owner": owner, "key": key, "attempt": 1}
        if stale:
            op = self.op(proc, "write", "fail", at, invoke, **invoke, status=409, current=gen + 1)
            return op, None
        record = next(self._records)
        op = self.op(
            proc,
            "write",
            "ok",
            at,
            invoke,
            **invoke,
            status=201,
            record=record,
            record_gen=gen,
            duplicate=False,
        )
        self._event(
            "harness", type="event", f="sink-record", record=record, job=job, gen=gen, key=key
        )
        return op, record

    # -- events -------------------------------------------------------------------------

    def queue_limit(self, queue: str, limit: int) -> None:
        """The harness set ``queue``'s fleet-wide limit (``--workload flow``)."""
        self._event("harness", type="event", f="queue-limit", queue=queue, limit=limit)

    def queue_rate(self, queue: str, per_second: float, burst: int) -> None:
        """The harness set ``queue``'s fleet-wide rate (``--workload flow``)."""
        self._event(
            "harness", type="event", f="queue-rate", queue=queue, per_second=per_second, burst=burst
        )

    def config(self, **fields: Any) -> None:
        """The run's configuration (``workload="locks"``: a locks run)."""
        self._event("harness", type="event", f="config", **fields)

    def final(self, job: str, state: str, gen: int, *, attempts: int | None = None) -> None:
        self._event(
            "harness",
            type="event",
            f="final",
            t=T0 + 100,
            job=job,
            state=state,
            gen=gen,
            attempts=gen if attempts is None else attempts,
            max_attempts=5,
            result={"gen": gen} if state == "done" else None,
        )

    def outage(self, kind: str, start: float, end: float) -> None:
        """A store fault (store-restart, store-kill): the server down from ``start`` to
        ``end`` (seconds after T0, host time)."""
        fields = {"type": "event", "f": "fault", "kind": kind}
        self._event("nemesis", t=T0 + start, phase="start", how="stop", outage=0.3, **fields)
        self._event("nemesis", t=T0 + end, phase="end", down_s=round(end - start, 3), **fields)

    def fault(self, kind: str, at: float, target: str = "w1.1") -> None:
        self._event(
            "nemesis", type="event", f="fault", kind=kind, phase="start", target=target, t=T0 + at
        )
        self._event(
            "nemesis", type="event", f="fault", kind=kind, phase="end", target=target, t=T0 + at + 3
        )


A, B = "host:1:aaaaaa", "host:2:bbbbbb"


def clean() -> History:
    """Job j1: A claims gen 1, writes, is stopped; its lease expires; B claims gen 2, writes
    and completes; A wakes up: its write and its completion are rejected. Job j2: one
    uneventful attempt, completed after a lost reply (the retry answers done)."""
    h = History()
    h.submit("j1")
    h.submit("j2")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.write("w1.1", A, "j1", 1, 1, at=1.1)
    h.holder("renew", "w1.1", A, "j1", 1, at=1.5)
    h.fault("pause-handler", at=1.6)
    h.claim("w2.1", B, "j1", 2, at=4.0)  # A's lease ran to 3.5
    h.write("w2.1", B, "j1", 2, 1, at=4.1)
    h.write("w2.1", B, "j1", 2, 2, at=4.2)
    h.holder("complete", "w2.1", B, "j1", 2, at=4.3)
    h.write("w1.1", A, "j1", 1, 2, at=4.6, stale=True)
    h.holder("complete", "w1.1", A, "j1", 1, at=4.7, outcome="fail", row_gen=2, row_state="done")
    h.claim("w2.1", B, "j2", 1, at=5.0)
    h.write("w2.1", B, "j2", 1, 1, at=5.1)
    h.holder("complete", "w2.1", B, "j2", 1, at=5.2, outcome="unknown")
    h.holder("complete", "w2.1", B, "j2", 1, at=5.3, repeat=True, row_state="done")
    h.final("j1", "done", 2)
    h.final("j2", "done", 1)
    return h
