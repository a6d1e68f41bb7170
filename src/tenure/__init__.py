"""tenure: jobs on distributed workers under expiring leases with fencing tokens.

>>> import tenure
>>> store = tenure.connect("sqlite:///tenure.db")
>>> store.submit("report-42", {"month": "2026-11"})
>>> lease = store.claim_next("worker-a", ttl=30)
>>> ...                      # do the work; stamp external writes with lease.token
>>> store.complete(lease, result={"rows": 1234})

The async API has the same names under `tenure.aio`.
"""

import logging as _logging

from ._clock import Clock, LeaseTiming, ManualClock, SystemClock
from ._connect import connect
from ._protocol import RetryPolicy
from ._store import Store
from .errors import (
    GenerationExhausted,
    InvalidArgument,
    JobNotFound,
    LeaseLost,
    StaleToken,
    StoreUnavailable,
    TenureError,
)
from .models import FencingToken, Job, JobState, Lease
from .worker import JobContext, Worker

__version__ = "0.1.0"

# The library never configures logging; this only keeps Python from printing our records
# through its last-resort handler when the application has not configured any.
_logging.getLogger("tenure").addHandler(_logging.NullHandler())

__all__ = [
    "Clock",
    "FencingToken",
    "GenerationExhausted",
    "InvalidArgument",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobState",
    "Lease",
    "LeaseLost",
    "LeaseTiming",
    "ManualClock",
    "RetryPolicy",
    "StaleToken",
    "Store",
    "StoreUnavailable",
    "SystemClock",
    "TenureError",
    "Worker",
    "__version__",
    "connect",
]
