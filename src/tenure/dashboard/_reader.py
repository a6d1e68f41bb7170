"""What the dashboard reads from a store, async whatever the store: an `AsyncStore` is
awaited, a blocking `Store` runs in a worker thread (the event loop never blocks on it).
Also the one queue write it offers (pause and resume), the same way.

A read that outlasts ``read_timeout`` is given up and answered as the store being
unavailable (a 503 page): a store that is away can take far longer to say so (a PostgreSQL
pool waits for a connection, twice: 20-30 s), and an operator opens the dashboard exactly
then. Writes are not cut short: one given up on may still take effect."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread

from .._queue_stats import StoreStats
from .._store import Store
from .._store_async import AsyncStore
from ..errors import InvalidArgument, StoreUnavailable
from ..models import Attempt, Job, JobPage, QueueRate, StoredSchedule

__all__ = ["DEFAULT_READ_TIMEOUT", "Reader"]

# Seconds a page waits for one of its reads: longer than any read of a store that answers
# (pages read a bounded page of jobs), shorter than a pool's wait for a store that is away.
DEFAULT_READ_TIMEOUT = 10.0

T = TypeVar("T")


class Reader:
    """The read operations of one store, as coroutines."""

    def __init__(
        self, store: AsyncStore | Store, read_timeout: float = DEFAULT_READ_TIMEOUT
    ) -> None:
        if not isinstance(store, (AsyncStore, Store)):
            raise InvalidArgument(
                "store", f"must be a tenure.Store or tenure.aio.AsyncStore, not {type(store)}"
            )
        self.store = store
        self.read_timeout = read_timeout

    @property
    def url(self) -> str:
        return self.store.url

    async def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """A read, given up after ``read_timeout`` (see the module docstring)."""
        with anyio.move_on_after(self.read_timeout):
            return await self._call(name, *args, **kwargs)
        raise StoreUnavailable(
            f"the store {self.url} did not answer ({name}) within {self.read_timeout:g} s; "
            "it may be unreachable: reload the page to try again",
            operation=name,
            outcome_unknown=False,  # a read: nothing to take effect
        )

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.store, name)
        if isinstance(self.store, AsyncStore):
            return await method(*args, **kwargs)
        call: Callable[[], Any] = partial(method, *args, **kwargs)
        # A request given up on (its client gone, /metrics past its time) does not wait for
        # the thread: the call ends there on its own.
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)

    async def now(self) -> float:
        found: float = await self._run("now")
        return found

    async def get(self, job_id: str) -> Job:
        found: Job = await self._run("get", job_id)
        return found

    async def jobs(
        self,
        *,
        queue: str | None,
        state: str | None,
        limit: int,
        owner: str | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        found: JobPage = await self._run(
            "jobs", queue=queue, state=state, owner=owner, limit=limit, cursor=cursor
        )
        return found

    async def attempts(self, job_id: str) -> list[Attempt]:
        found: list[Attempt] = await self._run("attempts", job_id)
        return found

    async def queue_stats(self) -> StoreStats | None:
        found: StoreStats | None = await self._run("queue_stats")
        return found

    async def paused_queues(self) -> list[str]:
        found: list[str] = await self._run("paused_queues")
        return found

    async def queue_limits(self) -> dict[str, int]:
        found: dict[str, int] = await self._run("queue_limits")
        return found

    async def queue_rates(self) -> dict[str, QueueRate]:
        found: dict[str, QueueRate] = await self._run("queue_rates")
        return found

    async def schedules(self) -> list[StoredSchedule]:
        found: list[StoredSchedule] = await self._run("schedules")
        return found

    async def set_paused(self, queue: str, paused: bool) -> None:
        await self._call("pause_queue" if paused else "resume_queue", queue)
