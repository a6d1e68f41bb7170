"""Group commit for completions: jobs that finish while a completion is on its way to the
store are completed together, in one `complete_many`; with a `Refill`, that same call also
claims jobs for the slots it frees (`complete_and_claim`).

No timer and no background task: the first job to finish sends its completion at once (it
"leads"); jobs finishing meanwhile queue up and the leader, when its call returns, sends
everything queued in one call, and so on until the queue is empty. An idle worker thus
completes each job as soon as it finishes, exactly as before; a busy one pays one store
round trip (and one commit) per batch instead of per job. Each job still learns its own
answer: done, `LeaseLost` for its lease alone, or `StoreUnavailable` for the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel

from .._store_async import AsyncStore
from .._validate import MAX_BATCH
from ..errors import InvalidArgument, LeaseLost, StoreUnavailable, TenureError
from ..models import Claim, Lease

__all__ = ["Completer", "Refill"]


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


class _Entry:
    __slots__ = ("error", "event", "lease", "sent", "value")

    def __init__(self, lease: Lease, value: Any) -> None:
        self.lease = lease
        self.value = value
        self.event = anyio.Event()
        self.error: BaseException | None = None
        self.sent = False  # the store answered (or the call was interrupted)

    def answer(self) -> None:
        if self.error is not None:
            raise self.error


class Completer:
    """Completes leases through one store, batching those that finish at the same time."""

    def __init__(self, store: AsyncStore, refill: Refill | None = None) -> None:
        self._store = store
        self.refill = refill
        self._pending: list[_Entry] = []
        self._sending = False
        self._quiet: anyio.Event | None = None
        self.calls = 0  # store calls made (for stats and tests)

    async def quiet(self) -> None:
        """Return once no completion is queued or on its way to the store."""
        while self._sending or self._pending:
            if self._quiet is None:
                self._quiet = anyio.Event()
            await self._quiet.wait()

    async def complete(self, lease: Lease, value: Any) -> None:
        """Complete ``lease`` with ``value``; raises what `AsyncStore.complete` raises."""
        entry = _Entry(lease, value)
        self._pending.append(entry)
        while not entry.sent:
            if self._sending:
                # Woken when our batch is answered, or when it is our turn to send.
                entry.event = anyio.Event()
                await entry.event.wait()
                continue
            # Lead one batch (everything queued, ours included), then hand over: a leader
            # that kept going while others keep finishing would never free its own slot.
            self._sending = True
            try:
                # One turn of the event loop first (not a timer, and not a cancellation
                # point): jobs finishing in this same turn, such as a batch claimed
                # together whose handlers did no I/O, join this call instead of waiting
                # for the next one.
                await anyio.lowlevel.cancel_shielded_checkpoint()
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                await self._send(batch)
            finally:
                self._sending = False
                if self._pending:
                    self._pending[0].event.set()
                elif self._quiet is not None:
                    self._quiet.set()
                    self._quiet = None
        entry.answer()

    async def _send(self, batch: list[_Entry]) -> None:
        try:
            self.calls += 1
            wanted = self.refill.slots(len(batch)) if self.refill is not None else 0
            if len(batch) == 1 and not wanted:
                await self._one(batch[0])
                return
            try:
                lost = await self._complete_many(batch, wanted)
            except InvalidArgument:
                # One handler's result was refused: complete the others one by one, so
                # that only that job sees the refusal.
                for entry in batch:
                    self.calls += 1
                    await self._one(entry)
                return
            except StoreUnavailable as exc:
                for entry in batch:
                    entry.error, entry.sent = exc, True
                return
            errors = {error.job_id: error for error in lost}
            for entry in batch:
                entry.error, entry.sent = errors.get(entry.lease.job_id), True
        finally:
            for entry in batch:
                if not entry.sent:
                    # Cancelled before the store answered: the outcome is unknown.
                    entry.error = StoreUnavailable(
                        f"complete of job {entry.lease.job_id!r} generation "
                        f"{entry.lease.generation} was interrupted; it may or may not have "
                        "taken effect (repeating it with the same lease is safe)",
                        operation="complete",
                        outcome_unknown=True,
                    )
                    entry.sent = True
                entry.event.set()

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

    async def _one(self, entry: _Entry) -> None:
        try:
            await self._store.complete(entry.lease, entry.value)
        except TenureError as exc:
            entry.error = exc
        entry.sent = True
