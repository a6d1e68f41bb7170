"""A sketch of the runtime issue #19 names as its way out, "designed around claimed
batches", built only to measure the floor of its client CPU per job: not the product.

It keeps the machinery a runtime cannot drop without dropping a guarantee, with one piece of
bookkeeping per claimed batch instead of per job:

* renewals run off the event loop, on a thread of their own with their own connection, one
  `renew_many` per live batch each third of the TTL; a lease the store refuses is marked
  lost in its batch, and its handler, if it is suspended, is cancelled on the loop;
* a lost lease is not completed (the store would refuse it anyway);
* the batch's handlers run one after the other on one task (a coroutine that returns
  without suspending costs no task); one that suspends is finished on the task that
  started it, in a cancel scope the renewer can cancel, and the jobs after it go on on a
  new task. A handler must end on the task it started on: a cancel scope it entered
  (``anyio.move_on_after``, ``asyncio.timeout``) belongs to that task. The first version
  of this sketch finished a suspended handler on a task of its own: such a handler's
  ``move_on_after`` raised RuntimeError on exit, and its ``asyncio.timeout`` cancelled
  the batch's task and so the whole run (seen 2026-12-07). `tenure.Worker`'s slots
  (`tenure.worker._slots`) do the same as this version;
* a handler that raises fails its attempt through the store (retry policy and all);
* the batch's completions go with the next claim (`complete_and_claim_jobs`).

Left out, each of which the real runtime has: per-job timeouts (the renewer's thread would
check one deadline per job), statistics, logs and traces, sync handlers on threads,
isolation modes, signals, outage retries, and claiming ahead while handlers run. And a
batch's next claim waits for its slowest job, where the Worker refills each slot as it
frees: with no-op jobs that costs nothing, with jobs of uneven length it leaves slots idle,
so a real design around batches must keep the Worker's refill (and pay for it).
`client_cpu.py` runs it beside the hand loop and `tenure.Worker`.
"""

from __future__ import annotations

import asyncio
import threading
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import anyio
import anyio.abc

import tenure
import tenure.aio
from tenure import models

Handler = Callable[[models.Job], Coroutine[Any, Any, Any]]


class Batch:
    """One claim's leases, and what became of each."""

    __slots__ = ("finished", "leases", "loop_call", "lost", "running", "scopes")

    def __init__(self, leases: list[models.Lease], loop_call: Callable[..., Any]) -> None:
        self.leases = leases
        self.lost: set[int] = set()
        self.scopes: dict[int, anyio.CancelScope] = {}  # handlers that suspended
        self.running = 0
        self.finished: anyio.Event | None = None
        self.loop_call = loop_call

    def lose(self, index: int) -> None:
        """On the renewer's thread: the store refused this lease."""
        self.lost.add(index)
        self.loop_call(self._cancel, index)

    def _cancel(self, index: int) -> None:
        scope = self.scopes.get(index)
        if scope is not None:
            scope.cancel()


class BatchRenewer:
    """Renews every live batch with one call each, on a thread with its own store."""

    def __init__(self, url: str, ttl: float) -> None:
        self._store = tenure.connect(url)
        self._period = ttl / 3
        self._batches: dict[Batch, None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="batch-renewer", daemon=True)
        self._thread.start()

    def add(self, batch: Batch) -> None:
        with self._lock:
            self._batches[batch] = None

    def remove(self, batch: Batch) -> None:
        with self._lock:
            del self._batches[batch]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._store.close()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            with self._lock:
                batches = list(self._batches)
            for batch in batches:
                live = [i for i in range(len(batch.leases)) if i not in batch.lost]
                answers = self._store.renew_many([batch.leases[i] for i in live])
                for index, answer in zip(live, answers, strict=True):
                    if isinstance(answer, tenure.LeaseLost):
                        batch.lose(index)
                    else:
                        batch.leases[index] = answer


@types.coroutine
def _resume(coroutine: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, None]:
    """Go on with a coroutine that already ran up to its first suspension."""
    while True:
        try:
            value = yield yielded
        except BaseException as exc:  # cancellation: the coroutine's to handle
            try:
                yielded = coroutine.throw(exc)
            except StopIteration:
                return
            continue
        try:
            yielded = coroutine.send(value)
        except StopIteration:
            return


class _BatchRun:
    """The handlers of one claimed batch, run on as few tasks as they allow."""

    def __init__(
        self,
        task_group: anyio.abc.TaskGroup,
        claimed: list[models.Claim],
        handler: Handler,
        batch: Batch,
    ) -> None:
        self.task_group = task_group
        self.claimed = claimed
        self.handler = handler
        self.batch = batch
        self.failed: list[tuple[int, BaseException]] = []

    async def run(self) -> list[tuple[int, BaseException]]:
        batch = self.batch
        await self._run_from(0)
        if batch.running:
            batch.finished = anyio.Event()
            await batch.finished.wait()
        return self.failed

    async def _run_from(self, first: int) -> None:
        """Run the handlers of the jobs from ``first`` on, one after the other on this
        task, up to one that suspends: this task finishes that one, and a new task takes
        the jobs after it. Each handler starts inside the task's one cancel scope, which a
        loss of the lease of the handler that suspended cancels: a scope the handler
        enters nests inside it."""
        claimed, batch, failed = self.claimed, self.batch, self.failed
        with anyio.CancelScope() as scope:
            for index in range(first, len(claimed)):
                coroutine = self.handler(claimed[index][1])
                try:
                    yielded = coroutine.send(None)
                except StopIteration:
                    continue
                except Exception as exc:
                    failed.append((index, exc))
                    continue
                if index + 1 < len(claimed):
                    batch.running += 1
                    self.task_group.start_soon(self._run_rest, index + 1)
                batch.scopes[index] = scope
                try:
                    await _resume(coroutine, yielded)
                except Exception as exc:
                    failed.append((index, exc))
                finally:
                    del batch.scopes[index]
                return

    async def _run_rest(self, first: int) -> None:
        """`_run_from` on a task of its own, which the batch waits for."""
        batch = self.batch
        try:
            await self._run_from(first)
        finally:
            batch.running -= 1
            if not batch.running and batch.finished is not None:
                batch.finished.set()


async def drain(url: str, queue: str, owner: str, ttl: float, size: int, handler: Handler) -> int:
    """Run ``queue``'s jobs ``size`` at a time until none is left; return how many ran."""
    done = 0
    renewer = BatchRenewer(url, ttl)
    loop_call = asyncio.get_running_loop().call_soon_threadsafe
    try:
        async with await tenure.aio.connect(url) as store, anyio.create_task_group() as group:
            claimed = await store.claim_jobs(owner, ttl, size, queues=[queue])
            while claimed:
                batch = Batch([lease for lease, _ in claimed], loop_call)
                renewer.add(batch)
                failed = await _BatchRun(group, claimed, handler, batch).run()
                renewer.remove(batch)
                ended = batch.lost.union(index for index, _ in failed)
                for index, error in failed:
                    if index not in batch.lost:
                        await store.fail(batch.leases[index], error)
                completed = [
                    lease for index, lease in enumerate(batch.leases) if index not in ended
                ]
                done += len(claimed)
                _, claimed = await store.complete_and_claim_jobs(
                    completed, owner, ttl, size, queues=[queue]
                )
    finally:
        renewer.close()
    return done


def run(url: str, queue: str, owner: str, ttl: float, size: int, handler: Handler) -> int:
    """`drain` on an event loop of its own, for a benchmark's timed loop."""
    return asyncio.run(drain(url, queue, owner, ttl, size, handler))


async def no_op(job: models.Job) -> None:
    """The no-op handler of the benchmarks."""


def warm_up(url: str) -> None:
    """One untimed drain of a queue with no jobs (imports and first calls), as
    `_common.warm_up_worker` does for `tenure.Worker`."""

    async def never(job: models.Job) -> None:
        raise AssertionError("the warm-up queue has no jobs")

    run(url, "tenure-bench-warm-up", "warm-up", 60.0, 1, never)
