"""`ThreadedDriver`: a naturally blocking driver (SQLite) offered to async code, each call
run in a worker thread (the driver interfaces are in ``_driver_async.py``, the source, and
``_driver.py``, its generated sync twin). The server stores' async clients (psycopg's async
connections, redis.asyncio) run on asyncio only: under trio their stores offer their sync
driver this way (`on_asyncio`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from types import TracebackType
from typing import Any

import anyio.to_thread

from .._protocol import Completion, JobFilter, JobRow, Outcome, Renewal, Submission
from .._schedule import ScheduleRow
from ..errors import InvalidArgument
from ._driver import Driver, Transaction

__all__ = ["ThreadedDriver", "ThreadedTransaction", "on_asyncio"]


def on_asyncio() -> bool:
    """Whether the calling code runs on asyncio (else on trio, through anyio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class ThreadedDriver:
    """Offers a blocking driver to async code by running each call in a worker thread."""

    def __init__(self, sync: Driver) -> None:
        self.sync = sync
        self.store_id = sync.store_id
        self.url = sync.url

    async def now(self) -> float:
        return await anyio.to_thread.run_sync(self.sync.now)

    async def submit(
        self,
        job_id: str,
        queue: str,
        payload: str | None,
        delay: float,
        max_attempts: int,
        priority: int = 0,
        timeout: float | None = None,
        *,
        unique_key: str | None = None,
        unique_for: float | None = None,
        headers: str | None = None,
    ) -> Outcome:
        call = partial(
            self.sync.submit, job_id, queue, payload, delay, max_attempts, priority, timeout
        )
        if unique_key is not None:  # only then: a driver without unique keys still works
            call = partial(call, unique_key=unique_key, unique_for=unique_for)
        if headers is not None:  # likewise, without headers (issue #20)
            call = partial(call, headers=headers)
        return await anyio.to_thread.run_sync(call)

    async def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome:
        call = partial(self.sync.claim, job_id, owner, ttl, secret_hash)
        return await anyio.to_thread.run_sync(call)

    async def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        call = partial(self.sync.claim_next, owner, ttl, queues, secret_hashes)
        return await anyio.to_thread.run_sync(call)

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome:
        call = partial(self.sync.renew, job_id, owner, generation, secret_hash, ttl)
        return await anyio.to_thread.run_sync(call)

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[Outcome]:
        return await anyio.to_thread.run_sync(self.sync.renew_many, renewals)

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        call = partial(self.sync.complete, job_id, owner, generation, secret_hash, receipt, result)
        return await anyio.to_thread.run_sync(call)

    async def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        return await anyio.to_thread.run_sync(self.sync.complete_many, completions)

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        call = partial(self.sync.complete_and_claim, completions, owner, ttl, queues, secret_hashes)
        return await anyio.to_thread.run_sync(call)

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome:
        call = partial(self.sync.release, job_id, owner, generation, secret_hash, receipt)
        return await anyio.to_thread.run_sync(call)

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
        call = partial(
            self.sync.fail, job_id, owner, generation, secret_hash, receipt, error, retry_in
        )
        return await anyio.to_thread.run_sync(call)

    async def find_leases(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        call = partial(self.sync.find_leases, owner, ttl, queues, secret_hashes)
        return await anyio.to_thread.run_sync(call)

    async def get(self, job_id: str) -> Outcome:
        return await anyio.to_thread.run_sync(self.sync.get, job_id)

    async def list_jobs(self, selection: JobFilter) -> tuple[float, list[JobRow], int | None]:
        return await anyio.to_thread.run_sync(self.sync.list_jobs, selection)

    async def submit_many(self, submissions: Sequence[Submission]) -> list[Outcome]:
        return await anyio.to_thread.run_sync(self.sync.submit_many, submissions)

    async def wait_job(self, job_id: str, timeout: float) -> Outcome:
        call = partial(self.sync.wait_job, job_id, timeout)
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)

    async def submit_joined(self, conn: Any, submissions: Sequence[Submission]) -> list[Outcome]:
        # In the caller's thread, not a worker thread: the caller's sqlite3 connection is
        # usually bound to its thread, and its transaction is the caller's. A short write.
        joined = getattr(self.sync, "submit_joined", None)
        if joined is None:
            raise InvalidArgument("conn", f"the store {self.url} cannot share your transaction")
        outcomes: list[Outcome] = joined(conn, submissions)
        return outcomes

    async def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        call = partial(self.sync.wait_for_jobs, queues, timeout)
        await anyio.to_thread.run_sync(call, abandon_on_cancel=True)

    # -- job control ---------------------------------------------------------------------

    async def cancel(self, job_id: str, reason: str, takes: Sequence[str]) -> Outcome:
        return await anyio.to_thread.run_sync(self.sync.cancel, job_id, reason, takes)

    async def set_paused(self, queue: str, paused: bool) -> None:
        await anyio.to_thread.run_sync(self.sync.set_paused, queue, paused)

    async def paused_queues(self) -> list[str]:
        return await anyio.to_thread.run_sync(self.sync.paused_queues)

    async def set_queue_limit(self, queue: str, limit: int | None) -> None:
        await anyio.to_thread.run_sync(self.sync.set_queue_limit, queue, limit)

    async def queue_limits(self) -> dict[str, int]:
        return await anyio.to_thread.run_sync(self.sync.queue_limits)

    async def set_queue_rate(self, queue: str, rate: tuple[float, int] | None) -> None:
        await anyio.to_thread.run_sync(self.sync.set_queue_rate, queue, rate)

    async def queue_rates(self) -> dict[str, tuple[float, int]]:
        return await anyio.to_thread.run_sync(self.sync.queue_rates)

    async def put_schedule(self, row: ScheduleRow) -> ScheduleRow:
        return await anyio.to_thread.run_sync(self.sync.put_schedule, row)

    async def delete_schedule(self, name: str) -> bool:
        return await anyio.to_thread.run_sync(self.sync.delete_schedule, name)

    async def schedules(self) -> list[ScheduleRow]:
        return await anyio.to_thread.run_sync(self.sync.schedules)

    async def requeue(
        self, job_id: str, delay: float, reset_attempts: bool, takes: Sequence[str]
    ) -> Outcome:
        call = partial(self.sync.requeue, job_id, delay, reset_attempts, takes)
        return await anyio.to_thread.run_sync(call)

    async def delete(self, job_id: str, takes: Sequence[str]) -> Outcome:
        return await anyio.to_thread.run_sync(self.sync.delete, job_id, takes)

    async def purge(
        self, states: Sequence[str], older_than: float, limit: int, cursor: str | None
    ) -> tuple[int, str | None]:
        call = partial(self.sync.purge, states, older_than, limit, cursor)
        return await anyio.to_thread.run_sync(call)

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.sync.close)

    @property
    def attempts(self) -> Callable[[str], Awaitable[list[tuple[Any, ...]]]] | None:
        """The blocking driver's ``attempts`` in a worker thread; None when it has none."""
        reader = getattr(self.sync, "attempts", None)
        if reader is None:
            return None

        async def run(job_id: str) -> list[tuple[Any, ...]]:
            found: list[tuple[Any, ...]] = await anyio.to_thread.run_sync(reader, job_id)
            return found

        return run

    @property
    def queue_stats(self) -> Callable[[], Awaitable[tuple[float, list[tuple[Any, ...]]]]] | None:
        """The blocking driver's ``queue_stats`` in a worker thread; None when it has none
        (`tenure.AsyncStore.queue_stats` then answers None)."""
        counter = getattr(self.sync, "queue_stats", None)
        if counter is None:
            return None

        async def run() -> tuple[float, list[tuple[Any, ...]]]:
            found: tuple[float, list[tuple[Any, ...]]] = await anyio.to_thread.run_sync(counter)
            return found

        return run

    def transaction(self, operation: str, conn: Any, payload_limit: int) -> ThreadedTransaction:
        opener = getattr(self.sync, "transaction", None)
        if opener is None:
            from . import no_transaction  # the package imports this module

            raise no_transaction(self.url, operation)
        return ThreadedTransaction(opener(operation, conn, payload_limit))


class ThreadedTransaction:
    """A blocking driver's `Transaction` offered to async code: each of its steps runs in a
    worker thread, as `ThreadedDriver` runs each call. The caller's statements on
    ``cursor`` stay blocking calls (the connection allows use from any thread)."""

    def __init__(self, sync: Transaction) -> None:
        self.sync = sync
        self.payload_limit = sync.payload_limit

    @property
    def conn(self) -> Any:
        return self.sync.conn

    @property
    def cursor(self) -> Any:
        return self.sync.cursor

    async def __aenter__(self) -> ThreadedTransaction:
        entered = False

        def enter() -> None:
            nonlocal entered
            self.sync.__enter__()
            entered = True

        try:
            await anyio.to_thread.run_sync(enter)
        except BaseException as exc:
            # Cancelled once the thread had begun the transaction: `async with` will not
            # leave it, so end it here (a begun SQLite write transaction holds the lock).
            if entered:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(
                        self.sync.__exit__, type(exc), exc, exc.__traceback__
                    )
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.sync.__exit__, exc_type, exc, tb)

    async def now(self) -> float:
        return await anyio.to_thread.run_sync(self.sync.now)

    async def get(self, job_id: str) -> Outcome:
        return await anyio.to_thread.run_sync(self.sync.get, job_id)

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        call = partial(self.sync.complete, job_id, owner, generation, secret_hash, receipt, result)
        return await anyio.to_thread.run_sync(call)

    async def commit(self) -> None:
        await anyio.to_thread.run_sync(self.sync.commit)

    async def rollback(self) -> None:
        await anyio.to_thread.run_sync(self.sync.rollback)
