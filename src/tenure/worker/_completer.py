"""Group commit for completions: jobs that finish while a completion is on its way to the
store are completed together, in one `complete_many`; with a `Refill`, that same call also
claims jobs for the slots it frees (`complete_and_claim`).

No timer and no background task: the first job to finish sends its completion at once (it
"leads"); jobs finishing meanwhile queue up and the leader, when its call returns, sends
everything queued in one call, and so on until the queue is empty. An idle worker thus
completes each job as soon as it finishes, exactly as before; a busy one pays one store
round trip (and one commit) per batch instead of per job. The one wait: while sync
handlers' threads still run, a batch lingers briefly for their completions, which reach
the loop one thread report at a time (`Completer._gather`). Each job still learns its own
answer: done, `LeaseLost` for its lease alone, or (once retrying is over, see `Completer`)
`StoreUnavailable` for the batch.

A job need not wait for its answer at all (`enqueue`, then `lead`): its `Answers` hears the
answer (the jobs of one call in one call), and the worker's task that ran the job goes on to
the next one meanwhile (no event, cancel scope or suspended frames per job; the job keeps its
slot and its lease until it is told).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.lowlevel

from .._clock import Clock
from .._store_async import AsyncStore
from .._validate import MAX_BATCH
from ..errors import InvalidArgument, LeaseLost, StoreUnavailable, TenureError
from ..models import Claim, Lease
from ._loop import Primitives
from ._retry import RETRY, DeadlinePassed, Outage, RetryRule
from ._stats import Stats

__all__ = ["LINGER", "NOT_SENT_CAUSES", "Completer", "Deadline", "Refill"]

# How long a batch waits for the next sync job's completion while handler threads still
# run (`Completer._gather`): about ten no-op sync jobs' worth of a thread's time.
LINGER = 0.0005

log = logging.getLogger("tenure")


@dataclass(frozen=True)
class Refill:
    """How a completion call also claims work: ``slots(n)`` says how many jobs to claim
    when the call completes ``n`` (0: none, complete only), and ``start`` takes what was
    claimed, at once, in the same step as the store's answer."""

    owner: str
    ttl: float
    queues: tuple[str, ...]
    slots: Callable[[int], int]
    start: Callable[[list[Claim]], None]
    # Called when such a call's reply was lost: it may have claimed jobs nobody runs.
    reply_lost: Callable[[], None] = lambda: None


# A completion's deadline, asked before each try: the lease's local deadline (renewals move
# it), or None: the store judges it once, and it is not tried again.
Deadline = Callable[[], "float | None"]

# `Completer.enqueue`'s deadline takes the job it is about (its "subject"): one function
# shared by every job, not a closure made per job.
SubjectDeadline = Callable[[Any], "float | None"]


class Answers(Protocol):
    """Who hears, on the event loop, the answers to `Completer.enqueue`'s completions. The
    jobs the store completed in one call are told in one `completed` call (most jobs: no
    Python call per job); any other answer comes to `answered`, job by job."""

    def completed(self, subjects: list[Any]) -> None: ...

    def answered(self, subject: Any, error: BaseException) -> None: ...


# Why a completion can meet its lease's deadline before it is even sent.
NOT_SENT_CAUSES = "this process was held up: paused, or starved of CPU, or calls ahead were slow"


def _ask(deadline: Deadline) -> float | None:
    return deadline()


class _Entry:
    # No slots: a class default spares most entries three of their eight attributes.
    judged = False  # past its deadline already when handed in: the store judges it, once
    error: BaseException | None = None
    sent = False  # answered: by the store, or given up

    def __init__(
        self,
        lease: Lease,
        value: Any,
        deadline: SubjectDeadline,
        subject: Any,
        answers: Answers | None = None,
    ) -> None:
        self.lease = lease
        self.value = value
        # ``deadline(subject)``: the lease's local deadline (renewals move it).
        self.deadline = deadline
        self.subject = subject
        self.answers = answers  # `Completer.enqueue`'s (None: a caller awaits the answer)

    def answer(self) -> None:
        if self.error is not None:
            raise self.error

    def settle(self, error: BaseException | None) -> None:
        self.error, self.sent = error, True
        answers = self.answers
        if answers is not None:
            with _told():
                if error is None:
                    answers.completed([self.subject])
                else:
                    answers.answered(self.subject, error)


@contextmanager
def _told() -> Iterator[None]:
    """Around an `Answers` call: one job's bookkeeping must not cost the others theirs."""
    try:
        yield
    except Exception:
        log.exception("tenure: a completion callback failed")


def _completed(batch: list[_Entry]) -> None:
    """Answer ``batch``, every job of which the store has completed: one `Answers.completed`
    call for each run of entries with the same `Answers` (a worker's are all one)."""
    answers: Answers | None = None
    subjects: list[Any] = []
    for entry in batch:
        entry.sent = True  # (its error stays None: a caller awaiting it goes on)
        told = entry.answers
        if told is None:
            continue
        if told is not answers:
            if answers is not None:
                with _told():
                    answers.completed(subjects)
            answers, subjects = told, []
        subjects.append(entry.subject)
    if answers is not None:
        with _told():
            answers.completed(subjects)


class Completer:
    """Completes leases through one store, batching those that finish at the same time.

    A batch the store could not answer (`StoreUnavailable`) is sent again by the same
    leader under `RETRY` (with whatever finished meanwhile appended, so results leave in
    the order they came), each job for as long as its lease's local deadline allows; a job
    whose deadline comes first is answered `DeadlinePassed`. A repeated batch never claims:
    only `complete_many` is safe to repeat blindly."""

    def __init__(
        self,
        store: AsyncStore,
        refill: Refill | None = None,
        *,
        clock: Clock | None = None,
        outage: Outage | None = None,
        stats: Stats | None = None,
        rng: random.Random | None = None,
        rule: RetryRule = RETRY,
        busy: Callable[[], bool] | None = None,
        linger: float = LINGER,
    ) -> None:
        self._store = store
        # Whether sync handlers' threads still run jobs (`ThreadPool.busy`): their
        # completions reach the loop one report at a time (see `_gather`).
        self._busy = busy
        self._linger = linger
        self._arrived: anyio.Event | None = None
        self.refill = refill
        self._clock = clock or store.clock
        self._outage = outage
        self._stats = stats
        self._rng = rng or random.Random()
        self._rule = rule
        self._pending: list[_Entry] = []
        self._sending = False
        # One event for everyone waiting (for their answer, their turn to send, or quiet),
        # set whenever entries are answered or a leader hands over: one per batch, not per
        # job. Those it wakes look again, and wait on the next one if need be.
        self._changed: anyio.Event | None = None
        self._primitives = Primitives.current()  # made on the loop that runs the worker
        self.calls = 0  # store calls made (for stats and tests)

    async def quiet(self) -> None:
        """Return once no completion is queued or on its way to the store."""
        while self._sending or self._pending:
            await self._wait()

    async def _wait(self) -> None:
        if self._changed is None:
            self._changed = self._primitives.event()
        await self._changed.wait()

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def _answer(self, entry: _Entry, error: BaseException | None) -> None:
        entry.settle(error)
        self._wake()

    async def complete(self, lease: Lease, value: Any, deadline: Deadline | None = None) -> None:
        """Complete ``lease`` with ``value``; raises what `AsyncStore.complete` raises, once
        retrying is over (`DeadlinePassed` when the store stayed unavailable until
        ``deadline()``, by default the lease's local deadline)."""
        deadline = deadline or (lambda: lease.local_deadline)
        first = deadline()
        judged = first is not None and first <= self._clock.monotonic()
        entry = _Entry(lease, value, _ask, deadline)
        entry.judged = judged
        self._append(entry)
        while not entry.sent:
            if self._sending:
                # Woken when entries are answered (ours?), or when a leader hands over.
                await self._wait()
                continue
            # Lead one batch (everything queued, ours included), then hand over: a leader
            # that kept going while others keep finishing would never free its own slot.
            await self._lead_one()
        if self._pending and not self._sending and not self._awaited():
            # Only `enqueue`'s entries are left, and nobody waits to lead them.
            with anyio.CancelScope(shield=True):
                await self.lead()
        entry.answer()

    def enqueue(
        self,
        lease: Lease,
        value: Any,
        deadline: SubjectDeadline,
        answers: Answers,
        subject: Any,
    ) -> None:
        """Queue a completion without waiting for it: ``answers`` hears, on the event loop,
        that the store completed ``subject`` (with others of its batch), or what `complete`
        would have raised for it. The caller then awaits `lead` so that a batch is on its
        way. The lease is one whose ``deadline(subject)`` has not passed (the worker hands
        in only leases it has just found held)."""
        # `_append`, written out: one Python call fewer per job.
        self._pending.append(_Entry(lease, value, deadline, subject, answers))
        arrived, self._arrived = self._arrived, None
        if arrived is not None:
            arrived.set()

    def _append(self, entry: _Entry) -> None:
        self._pending.append(entry)
        arrived, self._arrived = self._arrived, None
        if arrived is not None:
            arrived.set()

    async def lead(self) -> None:
        """Send what is queued, batch after batch, unless another caller is at it already
        (it sends ours too). Shielded: a batch once led is answered whatever happens to the
        caller, as each of its jobs still waits for that answer to settle."""
        while self._pending and not self._sending:
            with self._primitives.cancel_scope(shield=True):
                await self._lead_one(shielded=True)
            if self._awaited():
                return  # their callers take turns leading (they are woken by the handover)

    @property
    def unled(self) -> bool:
        """Whether completions are queued with no call on its way to send them."""
        return bool(self._pending) and not self._sending

    def _awaited(self) -> bool:
        """Whether a queued entry has a caller of `complete` waiting for it."""
        return any(entry.answers is None for entry in self._pending)

    async def _lead_one(self, *, shielded: bool = False) -> None:
        """Send one batch; ``shielded``: the caller holds a shielded scope already."""
        self._sending = True
        try:
            # One turn of the event loop first (not a timer, and not a cancellation
            # point): jobs finishing in this same turn, such as a batch claimed together
            # whose handlers did no I/O, join this call instead of waiting for the next one.
            if shielded:
                await anyio.lowlevel.checkpoint()  # no scope of its own: the caller's shields
            else:
                await anyio.lowlevel.cancel_shielded_checkpoint()
            if self._busy is not None and self._busy():
                await self._gather()
            batch = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            await self._lead(batch)
        finally:
            self._sending = False
            self._wake()

    async def _gather(self) -> None:
        """While sync handlers' threads still run jobs, wait for their completions to
        join this batch: each reaches the loop with its thread's report, over several
        loop turns, where async jobs that end together join in one turn. Each arrival
        restarts a short wait (``linger``, `LINGER` by default); the batch leaves once the
        threads are idle, the wait runs out (a handler that blocks holds no completion up
        longer than that), four lingers have passed in all, or the batch is full.
        Shielded: it is bounded, and a batch once led must leave."""
        busy = self._busy
        # Arrivals a little under ``linger`` apart must not hold the first of them up for
        # ever: a few lingers in all.
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + 4 * self._linger):
            while busy is not None and busy() and len(self._pending) < MAX_BATCH:
                arrived = self._arrived = self._primitives.event()
                with anyio.move_on_after(self._linger):
                    await arrived.wait()
                if not arrived.is_set():
                    return

    async def _lead(self, batch: list[_Entry]) -> None:
        """Send ``batch`` until every entry of it has its answer."""
        failures = 0
        try:
            while True:
                # A completion whose lease's deadline passed while it waited (for the
                # store, or for its turn) is given up, not sent.
                limit = self._clock.monotonic() + self._rule.attempt_time
                batch = [entry for entry in batch if not self._expired(entry, limit, failures)]
                if failures:
                    # What finished meanwhile goes along, after the older ones.
                    room = MAX_BATCH - len(batch)
                    batch.extend(self._pending[:room])
                    del self._pending[:room]
                if not batch:
                    return
                error = await self._send(batch, claim=not failures)
                if error is None:
                    batch = []  # every entry is answered: none for the `finally` to look at
                    if self._outage is not None:
                        self._outage.ok()
                    return
                failures += 1
                if self._stats is not None:
                    self._stats.incr("store_errors")
                if self._outage is not None:
                    self._outage.failed(error, operation="complete")
                now = self._clock.monotonic()
                latest = max(
                    (d for entry in batch if (d := entry.deadline(entry.subject)) is not None),
                    default=-math.inf,
                )
                wait = self._rule.next_wait(error, failures, now, latest, self._rng)
                if wait is None:
                    for entry in batch:
                        if not entry.sent:  # (some may have been answered one by one)
                            final = _gave_up(entry) if self._rule.retryable(error) else error
                            self._answer(entry, final)
                    return
                if self._stats is not None:
                    self._stats.incr("settle_retries", len(batch))
                await anyio.sleep(wait)
        finally:
            for entry in batch:
                if not entry.sent:
                    # Cancelled before the store answered: the outcome is unknown.
                    self._answer(
                        entry,
                        StoreUnavailable(
                            f"complete of job {entry.lease.job_id!r} generation "
                            f"{entry.lease.generation} was interrupted; it may or may not "
                            "have taken effect (repeating it with the same lease is safe)",
                            operation="complete",
                            outcome_unknown=True,
                        ),
                    )

    def _expired(self, entry: _Entry, limit: float, failures: int) -> bool:
        """Whether no attempt for ``entry`` can finish before its deadline any more, an
        attempt started now ending by ``limit`` (then it is answered `DeadlinePassed`)."""
        if entry.sent:
            return True
        deadline = entry.deadline(entry.subject)
        if (entry.judged or deadline is None) and not failures:
            return False
        if deadline is not None and limit <= deadline:
            return False
        self._answer(entry, _gave_up(entry, sent=failures > 0))
        return True

    async def _send(self, batch: list[_Entry], claim: bool) -> StoreUnavailable | None:
        """One store call for ``batch``: answers every entry, or answers none and returns
        the `StoreUnavailable` to retry after. Not cut short at a deadline: a request that
        has left may be answered, and the store's answer (done, or stale) is the truth."""
        self.calls += 1
        wanted = self.refill.slots(len(batch)) if self.refill is not None and claim else 0
        if len(batch) == 1 and not wanted:
            return await self._one(batch[0])
        try:
            lost = await self._complete_many(batch, wanted)
        except InvalidArgument:
            # One handler's result was refused: complete the others one by one, so that
            # only that job sees the refusal.
            failed: StoreUnavailable | None = None
            for entry in batch:
                self.calls += 1
                failed = await self._one(entry) or failed
            return failed
        except StoreUnavailable as exc:
            if wanted and exc.outcome_unknown and self.refill is not None:
                self.refill.reply_lost()
            return exc
        if lost:
            errors = {error.job_id: error for error in lost}
            for entry in batch:
                entry.settle(errors.get(entry.lease.job_id))
        else:  # most batches
            _completed(batch)
        self._wake()
        return None

    async def _complete_many(self, batch: list[_Entry], wanted: int) -> list[LeaseLost]:
        leases = [entry.lease for entry in batch]
        values = [entry.value for entry in batch]
        if not wanted or self.refill is None:
            return await self._store.complete_many(leases, values)
        refill = self.refill
        lost, claimed = await self._store.complete_and_claim_jobs(
            leases, refill.owner, refill.ttl, wanted, results=values, queues=refill.queues
        )
        refill.start(claimed)  # no await since the answer: nothing claimed is dropped
        return lost

    async def _one(self, entry: _Entry) -> StoreUnavailable | None:
        try:
            await self._store.complete(entry.lease, entry.value)
        except StoreUnavailable as exc:
            return exc  # the entry stays unanswered: the leader retries it
        except TenureError as exc:
            self._answer(entry, exc)
            return None
        self._answer(entry, None)
        return None


def _gave_up(entry: _Entry, sent: bool = True) -> DeadlinePassed:
    """``sent``: the batch of ``entry`` failed at least once (it may have reached the store).
    Unsent, the store played no part that is known: the lease's deadline came before a call
    could be made and answered, which a process paused or starved of CPU, or slow calls
    ahead of it, explain as well as a store that is away; and nothing was done."""
    lease = entry.lease
    what = f"complete of job {lease.job_id!r} generation {lease.generation}"
    if not sent:
        return DeadlinePassed(
            f"{what}: the lease's local deadline came before the call could be sent and "
            f"answered ({NOT_SENT_CAUSES}); given up, not sent (the job will be claimed again "
            "once its lease expires)",
            operation="complete",
            outcome_unknown=False,
        )
    return DeadlinePassed(
        f"{what}: the store stayed unavailable until the lease's local deadline; given up "
        "(the job will be claimed again once its lease expires)",
        operation="complete",
        outcome_unknown=True,
    )
