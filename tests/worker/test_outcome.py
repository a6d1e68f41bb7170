"""How a handler ended (tenure.worker._outcome): one classification for every runner."""

from __future__ import annotations

import math
import pickle
import sys
from collections.abc import Callable
from typing import Any

import pytest

import tenure
from tenure.worker import JobContext
from tenure.worker._lease import LeaseHandle
from tenure.worker._outcome import Outcome, handler_outcome

LEASE = tenure.Lease("J", "A", 3, 110.0, 10.0, 2, 1010.0, "0" * 48, "store")
JOB = tenure.Job(
    "J", "q", "leased", "A", 3, 110.0, 2, 5, {"n": 1}, None, None, 110.0, 90.0, 100.0, 100.0
)


def context() -> JobContext:
    return JobContext(LeaseHandle(LEASE, tenure.ManualClock()), JOB)


def swallowed_release(ctx: JobContext) -> str:
    try:
        ctx.release()
    except BaseException:  # the decision stands all the same
        return "ignored"


def retry_then_raise(ctx: JobContext) -> None:
    try:
        ctx.retry(3)
    finally:
        raise ValueError("after the decision")


def lease_lost(job_id: str, generation: int) -> Callable[[JobContext], None]:
    def handler(_ctx: JobContext) -> None:
        raise tenure.LeaseLost("gone", job_id=job_id, generation=generation)

    return handler


@pytest.mark.parametrize(
    ("handler", "kind", "value", "error"),
    [
        (lambda ctx: {"rows": 1}, "ok", {"rows": 1}, None),
        (lambda ctx: 1 / 0, "error", None, ZeroDivisionError),
        (lambda ctx: sys.exit(3), "error", None, SystemExit),
        (lambda ctx: ctx.release(), "release", None, None),
        (lambda ctx: ctx.retry(), "retry", None, None),
        (lambda ctx: ctx.retry(2.5), "retry", 2.5, None),
        (swallowed_release, "release", None, None),
        (retry_then_raise, "retry", 3.0, None),
        (lease_lost("J", 3), "lost", None, tenure.LeaseLost),
        (lease_lost("J", 2), "error", None, tenure.LeaseLost),  # an older lease of the job
        (lease_lost("K", 3), "error", None, tenure.LeaseLost),  # another job's lease
    ],
    ids=[
        "returns",
        "raises",
        "system-exit",
        "release",
        "retry",
        "retry-after",
        "swallowed-release",
        "retry-then-raise",
        "own-lease-lost",
        "older-lease-lost",
        "other-lease-lost",
    ],
)
def test_how_a_handler_ended(
    handler: Callable[[JobContext], Any], kind: str, value: Any, error: type | None
) -> None:
    ctx = context()
    outcome = handler_outcome(ctx, lambda: handler(ctx))
    assert (outcome.kind, outcome.value) == (kind, value)
    if error is None:
        assert outcome.error is None
    else:
        assert isinstance(outcome.error, error)


def test_a_portable_outcome_crosses_a_pipe() -> None:
    ctx = context()

    def failing() -> None:
        raise ValueError("bad row 7")

    outcome = handler_outcome(ctx, failing)
    portable = outcome.portable()
    assert portable.kind == "error"
    assert portable.error == "ValueError: bad row 7"
    assert "in failing" in portable.detail
    assert 'raise ValueError("bad row 7")' in portable.detail
    assert pickle.loads(pickle.dumps(portable)) == portable
    ok = Outcome("ok", {"rows": 1})
    assert ok.portable() is ok


def test_a_completions_deadline_follows_the_lease_and_how_it_was_lost() -> None:
    """`completion_deadline`: the local deadline while the lease is held; after a
    revocation (the worker stopping) None, one try at the store; after any other loss,
    none (-inf)."""
    from tenure.worker._settle import completion_deadline

    held = LeaseHandle(LEASE, tenure.ManualClock(1000.0))
    assert completion_deadline(held) == LEASE.local_deadline
    revoked = LeaseHandle(LEASE, tenure.ManualClock(1000.0))
    revoked.mark_lost("the worker was stopped immediately", "revoked")
    assert completion_deadline(revoked) is None
    rejected = LeaseHandle(LEASE, tenure.ManualClock(1000.0))
    rejected.mark_lost("a renewal was refused", "rejected_by_store")
    assert completion_deadline(rejected) == -math.inf
