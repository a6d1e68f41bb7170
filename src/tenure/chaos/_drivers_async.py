"""Store drivers for chaos processes: the history recorder, and the deliberately unsafe one.

This file is the async source; ``tools/async_to_sync.py`` generates ``_drivers.py``
(the worker renews on a thread with a sync store, so both are needed).

`AsyncRecordingDriver` wraps any driver and records every call as an operation of the
history (invoke, then ok / fail / unknown) with what the store answered: its clock and the
job's row. It sits under `tenure.aio.AsyncStore`, so every retry the store makes is its
own operation. It is also where the nemesis can stop a worker mid-renew and mid-complete:
just before the request leaves.

`AsyncUnsafeDriver` breaks the protocol on purpose (``tenure chaos --unsafe``), so that the
checker can be seen catching it:

* ``client-clock``: a worker that finds nothing to claim also takes over leases that *its
  own clock* says have expired, without a claim in the store (so without a new
  generation), and acts for them with the holder's credentials.
* ``no-fence``: a complete, release or fail the store rejects as stale is sent again with
  the job's current credentials (read from the store's answer): completion without the
  generation check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._clock import Clock
from .._protocol import (
    Completion,
    JobFilter,
    JobRow,
    Outcome,
    Renewal,
    Status,
    is_repeat,
)
from ..errors import StoreUnavailable
from ..stores.abc import AsyncDriver
from ._control import TAKEOVERS, Control
from ._history import Recorder
from ._passthrough_async import AsyncPassThroughDriver

__all__ = ["AsyncRecordingDriver", "AsyncUnsafeDriver"]

_Batch = Sequence[Completion | Renewal]  # the items of a batch call


def _row(row: JobRow | None) -> dict[str, Any]:
    if row is None:
        return {}
    return {
        "row_gen": row.generation,
        "row_owner": row.owner,
        "row_state": row.state,
        "lease_until": row.lease_until,
        "attempts": row.attempts,
        "max_attempts": row.max_attempts,
    }


def _outcome(outcome: Outcome) -> dict[str, Any]:
    return {"status": outcome.status, "store_now": outcome.now, **_row(outcome.row)}


def _ended(error: BaseException) -> str:
    """How a call that raised ended: ``fail`` when it surely did not reach the store."""
    if isinstance(error, StoreUnavailable) and not error.outcome_unknown:
        return "fail"
    return "unknown"


class AsyncRecordingDriver(AsyncPassThroughDriver):
    """Records every call to ``inner`` in ``recorder`` (see the module docstring)."""

    def __init__(
        self, inner: AsyncDriver, recorder: Recorder, control: Control | None = None
    ) -> None:
        super().__init__(inner)
        self._rec = recorder
        self._control = control

    def _reach(self, point: str, **info: Any) -> None:
        if self._control is not None:
            self._control.reach(point, **info)

    async def submit(
        self,
        job_id: str,
        queue: str,
        payload: str | None,
        delay: float,
        max_attempts: int,
        priority: int = 0,
        timeout: float | None = None,
        **unique: Any,  # unique_key, unique_for (issue #18), headers (#20): passed through
    ) -> Outcome:
        op = self._rec.invoke(
            "submit",
            job=job_id,
            queue=queue,
            max_attempts=max_attempts,
            priority=priority,
            timeout=timeout,
        )
        try:
            outcome = await self._inner.submit(
                job_id, queue, payload, delay, max_attempts, priority, timeout, **unique
            )
        except BaseException as exc:
            self._rec.end(op, "submit", _ended(exc), error=str(exc)[:300])
            raise
        self._rec.end(op, "submit", "ok", **_outcome(outcome))
        return outcome

    async def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome:
        op = self._rec.invoke("claim", job=job_id, owner=owner, ttl=ttl)
        try:
            outcome = await self._inner.claim(job_id, owner, ttl, secret_hash)
        except BaseException as exc:
            self._rec.end(op, "claim", _ended(exc), error=str(exc)[:300])
            raise
        row = outcome.row
        if outcome.status == Status.APPLIED:
            self._rec.end(op, "claim", "ok", **_outcome(outcome))
        elif (
            row is not None
            and row.state == "leased"
            and row.owner == owner
            and row.secret_hash == secret_hash
        ):
            # A retry finding its own earlier claim (whose reply was lost): the same lease.
            self._rec.end(op, "claim", "ok", repeat=True, **_outcome(outcome))
        else:
            self._rec.end(op, "claim", "fail", **_outcome(outcome))
        return outcome

    async def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        op = self._rec.invoke("claim_next", owner=owner, ttl=ttl, limit=len(secret_hashes))
        try:
            outcomes = await self._inner.claim_next(owner, ttl, queues, secret_hashes)
        except BaseException as exc:
            self._rec.end(op, "claim_next", _ended(exc), error=str(exc)[:300])
            raise
        self._claimed(op, secret_hashes, outcomes, False)
        return outcomes

    async def find_leases(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        # The leases a claim whose reply was lost took, found by their secrets: the client
        # holds them from this answer on, so the history records it as the claim that
        # granted them (the lost claim itself is recorded with its outcome unknown). It
        # changes nothing: when it fails, it failed. Each lease is marked "found": it was
        # granted by the lost claim, before this answer's store time (`_context._interval`).
        op = self._rec.invoke("claim_next", owner=owner, ttl=ttl, limit=len(secret_hashes))
        try:
            outcomes = await self._inner.find_leases(owner, ttl, queues, secret_hashes)
        except BaseException as exc:
            self._rec.end(op, "claim_next", "fail", error=str(exc)[:300])
            raise
        self._claimed(op, secret_hashes, outcomes, True)
        return outcomes

    def _claimed(self, op: str, hashes: Sequence[str], got: list[Outcome], found: bool) -> None:
        ours = set(hashes)
        claims = [
            {
                "job": o.row.job_id,
                "gen": o.row.generation,
                "store_now": o.now,
                "lease_until": o.row.lease_until,
                "attempts": o.row.attempts,
                "max_attempts": o.row.max_attempts,
                "found": found,
            }
            for o in got
            if o.status == Status.APPLIED and o.row is not None and o.row.secret_hash in ours
        ]
        store_now = got[0].now if got else None
        self._rec.end(op, "claim_next", "ok", claims=claims, store_now=store_now)

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome:
        self._reach("renew", job=job_id, gen=generation)
        op = self._rec.invoke("renew", job=job_id, gen=generation, owner=owner, ttl=ttl)
        try:
            outcome = await self._inner.renew(job_id, owner, generation, secret_hash, ttl)
        except BaseException as exc:
            self._rec.end(op, "renew", _ended(exc), job=job_id, gen=generation, error=str(exc))
            raise
        kind = "ok" if outcome.status == Status.APPLIED else "fail"
        self._rec.end(op, "renew", kind, job=job_id, gen=generation, **_outcome(outcome))
        return outcome

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[Outcome]:
        ops = self._invoke_each("renew", renewals)
        try:
            outcomes = await self._inner.renew_many(renewals)
        except BaseException as exc:
            self._each_raised(ops, "renew", renewals, exc)
            raise
        for op, r, outcome in zip(ops, renewals, outcomes, strict=True):
            kind = "ok" if outcome.status == Status.APPLIED else "fail"
            self._rec.end(op, "renew", kind, job=r.job_id, gen=r.generation, **_outcome(outcome))
        return outcomes

    # Job control: each call one operation, ``ok`` when the store applied it, ``fail``
    # when it refused (the row says why: a finished job, or cancelled already).
    async def cancel(self, job_id: str, reason: str, takes: Sequence[str]) -> Outcome:
        op = self._rec.invoke("cancel", job=job_id, reason=reason)
        try:
            outcome = await self._inner.cancel(job_id, reason, takes)
        except BaseException as exc:
            self._rec.end(op, "cancel", _ended(exc), job=job_id, error=str(exc)[:300])
            raise
        self._controlled(op, "cancel", job_id, outcome)
        return outcome

    async def requeue(
        self, job_id: str, delay: float, reset_attempts: bool, takes: Sequence[str]
    ) -> Outcome:
        op = self._rec.invoke("requeue", job=job_id, delay=delay, reset_attempts=reset_attempts)
        try:
            outcome = await self._inner.requeue(job_id, delay, reset_attempts, takes)
        except BaseException as exc:
            self._rec.end(op, "requeue", _ended(exc), job=job_id, error=str(exc)[:300])
            raise
        self._controlled(op, "requeue", job_id, outcome)
        return outcome

    async def delete(self, job_id: str, takes: Sequence[str]) -> Outcome:
        op = self._rec.invoke("delete", job=job_id)
        try:
            outcome = await self._inner.delete(job_id, takes)
        except BaseException as exc:
            self._rec.end(op, "delete", _ended(exc), job=job_id, error=str(exc)[:300])
            raise
        self._controlled(op, "delete", job_id, outcome)
        return outcome

    def _controlled(self, op: str, f: str, job_id: str, outcome: Outcome) -> None:
        kind = "ok" if outcome.status == Status.APPLIED else "fail"
        self._rec.end(op, f, kind, job=job_id, **_outcome(outcome))

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        self._reach("complete", job=job_id, gen=generation)
        op = self._rec.invoke("complete", job=job_id, gen=generation, owner=owner)
        try:
            outcome = await self._inner.complete(
                job_id, owner, generation, secret_hash, receipt, result
            )
        except BaseException as exc:
            self._rec.end(op, "complete", _ended(exc), job=job_id, gen=generation, error=str(exc))
            raise
        self._settled(op, "complete", job_id, generation, receipt, outcome, result)
        return outcome

    async def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        # One history operation per job: to the checker a batch is its completes, sent at
        # once and answered at once.
        ops = self._invoke_each("complete", completions)
        try:
            outcomes = await self._inner.complete_many(completions)
        except BaseException as exc:
            self._each_raised(ops, "complete", completions, exc)
            raise
        self._completes_settled(ops, completions, outcomes)
        return outcomes

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        # Its completes and its claim_next, sent at once and answered at once.
        ops = self._invoke_each("complete", completions)
        op = self._rec.invoke("claim_next", owner=owner, ttl=ttl, limit=len(secret_hashes))
        try:
            completed, claimed = await self._inner.complete_and_claim(
                completions, owner, ttl, queues, secret_hashes
            )
        except BaseException as exc:
            self._each_raised(ops, "complete", completions, exc)
            self._rec.end(op, "claim_next", _ended(exc), error=str(exc)[:300])
            raise
        self._completes_settled(ops, completions, completed)
        self._claimed(op, secret_hashes, claimed, False)
        return completed, claimed

    def _invoke_each(self, f: str, items: _Batch) -> list[str]:
        """One history operation per item of a batch (complete_many, renew_many): to the
        checker a batch is its items, sent at once and answered at once."""
        for item in items:
            self._reach(f, job=item.job_id, gen=item.generation)
        return [
            self._rec.invoke(
                f,
                job=item.job_id,
                gen=item.generation,
                owner=item.owner,
                **({"ttl": item.ttl} if isinstance(item, Renewal) else {}),
            )
            for item in items
        ]

    def _each_raised(self, ops: list[str], f: str, items: _Batch, exc: BaseException) -> None:
        for op, item in zip(ops, items, strict=True):
            self._rec.end(op, f, _ended(exc), job=item.job_id, gen=item.generation, error=str(exc))

    def _completes_settled(
        self, ops: list[str], completions: Sequence[Completion], outcomes: list[Outcome]
    ) -> None:
        for op, c, outcome in zip(ops, completions, outcomes, strict=True):
            self._settled(op, "complete", c.job_id, c.generation, c.receipt, outcome, c.result)

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome:
        op = self._rec.invoke("release", job=job_id, gen=generation, owner=owner)
        try:
            outcome = await self._inner.release(job_id, owner, generation, secret_hash, receipt)
        except BaseException as exc:
            self._rec.end(op, "release", _ended(exc), job=job_id, gen=generation, error=str(exc))
            raise
        self._settled(op, "release", job_id, generation, receipt, outcome)
        return outcome

    async def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        error: str,
        retry_in: float,
    ) -> Outcome:
        # The reason's start tells a worker's timeout ("timeout: ...") from a handler error.
        op = self._rec.invoke("fail", job=job_id, gen=generation, owner=owner, reason=error[:60])
        try:
            outcome = await self._inner.fail(
                job_id, owner, generation, secret_hash, receipt, error, retry_in
            )
        except BaseException as exc:
            self._rec.end(op, "fail", _ended(exc), job=job_id, gen=generation, error=str(exc))
            raise
        self._settled(op, "fail", job_id, generation, receipt, outcome, error)
        return outcome

    def _settled(
        self,
        op: str,
        f: str,
        job_id: str,
        generation: int,
        receipt: str,
        outcome: Outcome,
        sent: str | None = None,
    ) -> None:
        fields = {"job": job_id, "gen": generation, **_outcome(outcome)}
        if outcome.status == Status.APPLIED:
            self._rec.end(op, f, "ok", **fields)
        elif is_repeat(f, outcome.row, generation, receipt, sent):
            # A repeat of a call that already took effect (its first reply was lost).
            self._rec.end(op, f, "ok", repeat=True, **fields)
        else:
            self._rec.end(op, f, "fail", **fields)


class AsyncUnsafeDriver(AsyncPassThroughDriver):
    """Breaks the lease protocol on purpose (see the module docstring). Never use it for
    anything but showing that the chaos checker catches it."""

    def __init__(self, inner: AsyncDriver, mode: str, clock: Clock) -> None:
        super().__init__(inner)
        self._mode = mode
        self._clock = clock

    async def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        outcomes = await self._inner.claim_next(owner, ttl, queues, secret_hashes)
        # Jobs buried on the way are answered too (BURIED): only leases count as taken.
        leased = [o for o in outcomes if o.status == Status.APPLIED]
        if self._mode != "client-clock" or len(leased) >= len(secret_hashes):
            return outcomes
        used = {o.row.secret_hash for o in leased if o.row is not None}
        spare = [h for h in secret_hashes if h not in used]
        client_now = self._clock.time()
        taken: list[Outcome] = []
        for queue in queues:
            leased_jobs = JobFilter(queue, "leased", None, None, None, 20)
            store_now, rows, _ = await self._inner.list_jobs(leased_jobs)
            for row in rows:
                if not spare:
                    break
                if row.owner in (None, owner) or row.secret_hash is None or row.lease_until is None:
                    continue
                if row.lease_until > client_now:
                    continue  # live by this worker's clock
                if TAKEOVERS.taken(row.job_id, row.generation, owner):
                    continue
                # "Expired" by our clock: take it over, no claim, no new generation.
                mine = spare.pop()
                TAKEOVERS.add(row.job_id, row.generation, owner, mine, row.owner, row.secret_hash)
                taken.append(
                    Outcome(Status.APPLIED, row._replace(owner=owner, secret_hash=mine), store_now)
                )
        return outcomes + taken

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome:
        owner, secret_hash = TAKEOVERS.credentials(job_id, generation, owner, secret_hash)
        return await self._inner.renew(job_id, owner, generation, secret_hash, ttl)

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[Outcome]:
        # One at a time, so that each goes through the unsafe `renew` above.
        return [await self.renew(*renewal) for renewal in renewals]

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        owner, secret_hash = TAKEOVERS.credentials(job_id, generation, owner, secret_hash)
        outcome = await self._inner.complete(
            job_id, owner, generation, secret_hash, receipt, result
        )
        current = self._current(outcome)
        if current is not None:
            return await self._inner.complete(job_id, *current, receipt, result)
        return outcome

    async def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        # One at a time, so that each goes through the unsafe `complete` above.
        return [await self.complete(*completion) for completion in completions]

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        # In two steps, so that each goes through the unsafe methods above.
        completed = await self.complete_many(completions)
        return completed, await self.claim_next(owner, ttl, queues, secret_hashes)

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome:
        owner, secret_hash = TAKEOVERS.credentials(job_id, generation, owner, secret_hash)
        outcome = await self._inner.release(job_id, owner, generation, secret_hash, receipt)
        current = self._current(outcome)
        if current is not None:
            return await self._inner.release(job_id, *current, receipt)
        return outcome

    async def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        error: str,
        retry_in: float,
    ) -> Outcome:
        owner, secret_hash = TAKEOVERS.credentials(job_id, generation, owner, secret_hash)
        outcome = await self._inner.fail(
            job_id, owner, generation, secret_hash, receipt, error, retry_in
        )
        current = self._current(outcome)
        if current is not None:
            return await self._inner.fail(job_id, *current, receipt, error, retry_in)
        return outcome

    def _current(self, outcome: Outcome) -> tuple[str, int, str] | None:
        """no-fence: the credentials of the job's current lease (owner, generation, secret
        hash), when the store rejected a stale caller."""
        row = outcome.row
        if self._mode != "no-fence" or outcome.status != Status.MISSED or row is None:
            return None
        if row.state != "leased" or row.owner is None or row.secret_hash is None:
            return None
        return row.owner, row.generation, row.secret_hash
