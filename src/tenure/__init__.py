"""tenure: jobs on distributed workers under expiring leases with fencing tokens.

>>> import tenure
>>> store = tenure.connect("sqlite:///tenure.db")
>>> store.submit("report-42", {"month": "2026-11"})
>>> lease = store.claim_next("worker-a", ttl=30)
>>> ...                      # do the work; stamp external writes with lease.token
>>> store.complete(lease, result={"rows": 1234})

The async API has the same names under `tenure.aio`.
"""

import importlib as _importlib
import logging as _logging
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from . import _seams
from ._clock import Clock, LeaseTiming, ManualClock, SystemClock
from ._protocol import RetryPolicy
from ._store import Store, connect
from .errors import (
    GenerationExhausted,
    InvalidArgument,
    JobNotFound,
    JobStateConflict,
    LeaseLost,
    LockNotAcquired,
    StaleToken,
    StoreLost,
    StoreUnavailable,
    TenureError,
    WaitTimeout,
)
from .models import (
    Attempt,
    AttemptEnding,
    Claim,
    FencingToken,
    Job,
    JobPage,
    JobSpec,
    JobState,
    Lease,
    QueueRate,
    StoredSchedule,
)

if _TYPE_CHECKING:
    from .locks import AsyncLeader, AsyncLock, Leader, Lock, elect, elect_async, lock, lock_async
    from .worker import JobContext, Worker

__version__ = "0.1.0"

# The library never configures logging; this only keeps Python from printing our records
# through its last-resort handler when the application has not configured any.
_logging.getLogger("tenure").addHandler(_logging.NullHandler())

# `Store.lock` lives on the store floor, the locks one floor up: the store asks this seam.
_seams.provide_locks(lambda: _importlib.import_module(".locks", __name__))


# Named locks and leader election (tenure.locks) use the worker's lease keeper: imported on
# first use too.
_LOCKS = (
    "AsyncLeader",
    "AsyncLock",
    "Leader",
    "Lock",
    "elect",
    "elect_async",
    "lock",
    "lock_async",
)


def __getattr__(name: str) -> _Any:
    # The worker runtime (anyio, asyncio, multiprocessing: a tenth of a second) is imported
    # on first use, so that `tenure jobs submit` and plain store clients start fast.
    if name in ("JobContext", "Worker", "worker"):
        import importlib

        module = importlib.import_module(".worker", __name__)
        return module if name == "worker" else getattr(module, name)
    if name in _LOCKS:
        return getattr(_importlib.import_module(".locks", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AsyncLeader",
    "AsyncLock",
    "Attempt",
    "AttemptEnding",
    "Claim",
    "Clock",
    "FencingToken",
    "GenerationExhausted",
    "InvalidArgument",
    "Job",
    "JobContext",
    "JobPage",
    "JobSpec",
    "JobNotFound",
    "JobStateConflict",
    "JobState",
    "Lease",
    "LeaseLost",
    "Leader",
    "Lock",
    "LockNotAcquired",
    "LeaseTiming",
    "ManualClock",
    "QueueRate",
    "RetryPolicy",
    "StaleToken",
    "Store",
    "StoredSchedule",
    "StoreLost",
    "StoreUnavailable",
    "SystemClock",
    "TenureError",
    "WaitTimeout",
    "Worker",
    "__version__",
    "connect",
    "elect",
    "elect_async",
    "lock",
    "lock_async",
]
