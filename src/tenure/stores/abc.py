"""The contracts a store backend implements, published for `register_backend`.

A backend is a module with two functions, found through `Backend`::

    def open_sync(url: str, clock: Clock | None) -> Driver: ...
    async def open_async(url: str, clock: Clock | None) -> AsyncDriver: ...

Each driver method runs one atomic statement or script, evaluated by the store against its
own clock, and reports what the store did as an `Outcome` of `Status` and `JobRow`. A
driver never decides what an answer means for the caller: `tenure.Store` does that, once,
for every backend. A naturally blocking driver is offered to async code by wrapping it in
`ThreadedDriver` (as the SQLite backend does). SQL stores also open a `Transaction`
(`SQLDriver.transaction`): the store's statements in one transaction with the caller's,
the seam under `tenure.fence.complete_with`. ``tenure.chaos``'s recorder is a backend
written against this module alone (``src/tenure/chaos/_backend.py``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .._clock import Clock
from .._protocol import JOB_COLUMNS, Completion, JobRow, Outcome, Renewal, Status
from ._driver import Driver, SQLDriver, Transaction
from ._driver_async import AsyncDriver, AsyncSQLDriver, AsyncTransaction
from ._threaded import ThreadedDriver, ThreadedTransaction

__all__ = [
    "JOB_COLUMNS",
    "AsyncDriver",
    "AsyncSQLDriver",
    "AsyncTransaction",
    "Backend",
    "Completion",
    "Driver",
    "JobRow",
    "Outcome",
    "Renewal",
    "SQLDriver",
    "Status",
    "ThreadedDriver",
    "ThreadedTransaction",
    "Transaction",
]


@runtime_checkable
class Backend(Protocol):
    """The module `register_backend` names: it opens drivers for its URLs."""

    def open_sync(self, url: str, clock: Clock | None) -> Driver: ...

    async def open_async(self, url: str, clock: Clock | None) -> AsyncDriver: ...
