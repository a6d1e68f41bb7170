"""`Job` and `Lease` values built without their frozen dataclasses' own ``__init__``.

Every snapshot and every lease a store hands out is built here (a batch of 1000 builds 1000),
and a frozen dataclass's ``__init__`` costs about three times what these do: it sets each
field through ``object.__setattr__`` by name, which looks the name up again in the type.
`job_from_row` and `new_lease` fill a draft, a plain (mutable) class with exactly the value
class's slots, by ordinary attribute stores, then make the object a `Job` (a `Lease`) by
assigning its class: the same slots with the same values, so the result is the value that
``Job(...)`` (``Lease(...)``) makes (tests/unit/test_models.py checks they compare and pickle
equal). For a Job, 1.0 against 2.7 us (filling the slots through their descriptors) in one
`timeit` run; for a Lease, 0.6 against 1.3 us, a tenth of the Store's own cost per
claim -> complete cycle on SQLite (issue #19). A field added to or reordered in either
class fails the checks below at import, not silently.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ._validate import decode_json
from .models import NO_HEADERS, Job, JobHeaders, JobState, Lease

if TYPE_CHECKING:
    from ._protocol import JobRow

__all__ = ["UNDECODED", "job_from_row", "new_lease"]


_LEASE_FIELDS = (
    "job_id", "owner", "generation", "lease_until", "ttl", "attempt", "local_deadline",
    "secret", "store_id",
)  # fmt: skip


class _LeaseDraft:
    """A Lease under construction: Lease's slots, settable. Never escapes `new_lease`, which
    fills it (no ``__init__``: one call fewer a lease)."""

    __slots__ = _LEASE_FIELDS
    job_id: str
    owner: str
    generation: int
    lease_until: float
    ttl: float
    attempt: int
    local_deadline: float
    secret: str
    store_id: str


# A row's state text to its JobState, without the enum's own lookup (every snapshot reads
# one); a text not here is still looked up by JobState, which refuses it.
_STATES = {state.value: state for state in JobState}


_JOB_FIELDS = (
    "job_id", "queue", "state", "owner", "generation", "lease_until", "attempts",
    "max_attempts", "payload", "result", "error", "available_at", "created_at", "updated_at",
    "as_of", "created", "priority", "timeout", "unique_key", "headers",
)  # fmt: skip


class _JobDraft:
    """A Job under construction: Job's slots, settable. Never escapes `job_from_row`."""

    __slots__ = _JOB_FIELDS

    def __init__(
        self, job_id: str, queue: str, state: JobState, owner: str | None, generation: int,
        lease_until: float | None, attempts: int, max_attempts: int, payload: Any,
        result: Any, error: str | None, available_at: float, created_at: float,
        updated_at: float, as_of: float, created: bool | None, priority: int,
        timeout: float | None, unique_key: str | None, headers: JobHeaders,
    ) -> None:  # fmt: skip
        self.job_id = job_id
        self.queue = queue
        self.state = state
        self.owner = owner
        self.generation = generation
        self.lease_until = lease_until
        self.attempts = attempts
        self.max_attempts = max_attempts
        self.payload = payload
        self.result = result
        self.error = error
        self.available_at = available_at
        self.created_at = created_at
        self.updated_at = updated_at
        self.as_of = as_of
        self.created = created
        self.priority = priority
        self.timeout = timeout
        self.unique_key = unique_key
        self.headers = headers


# What the class assignments (Job's, Lease's) rely on: the class's fields are the draft's
# slots in order, its slots are those and nothing else (no __dict__, no __weakref__), and
# both classes have one layout. (Python refuses an assignment between different layouts
# too, but only when it happens.)
def _same_layout(cls: type, draft: type, fields: tuple[str, ...]) -> bool:
    return (
        tuple(f.name for f in dataclasses.fields(cls)) == fields
        and getattr(cls, "__slots__", None) == fields
        and getattr(draft, "__slots__", None) == fields
        and cls.__bases__ == (object,)
        and cls.__basicsize__ == draft.__basicsize__
        and (cls.__dictoffset__, cls.__weakrefoffset__) == (0, 0)
        and (draft.__dictoffset__, draft.__weakrefoffset__) == (0, 0)
    )


if not _same_layout(Job, _JobDraft, _JOB_FIELDS):  # pragma: no cover
    raise ImportError("tenure._snapshots._JobDraft no longer has the layout of tenure.Job")
if not _same_layout(Lease, _LeaseDraft, _LEASE_FIELDS):  # pragma: no cover
    raise ImportError("tenure._snapshots._LeaseDraft no longer has the layout of tenure.Lease")


# `job_from_row`'s payload when the caller has not decoded it already.
UNDECODED: Any = object()


def job_from_row(
    row: JobRow, as_of: float, created: bool | None = None, payload: Any = UNDECODED
) -> Job:
    """The snapshot of ``row`` at ``as_of``. ``payload``: the row's payload already decoded
    (by a caller that decoded a batch's in one go); left out, decoded here."""
    # One unpacking rather than a NamedTuple attribute lookup a field.
    (job_id, queue, state, owner, generation, _, lease_until, available_at, attempts,
     max_attempts, payload_text, result, error, created_at, updated_at, priority, timeout,
     unique_key, headers) = row  # fmt: skip
    if payload is UNDECODED:
        payload = decode_json(payload_text)
    job = _JobDraft(
        job_id,
        queue,
        _STATES.get(state) or JobState(state),
        owner,
        generation,
        None if lease_until is None else float(lease_until),
        attempts,
        max_attempts,
        payload,
        decode_json(result),
        error,
        float(available_at),
        float(created_at),
        float(updated_at),
        float(as_of),
        created,
        int(priority),
        None if timeout is None else float(timeout),
        unique_key,
        NO_HEADERS if headers is None else JobHeaders(decode_json(headers)),
    )
    job.__class__ = Job  # type: ignore[assignment]
    return job  # type: ignore[return-value]


def new_lease(
    job_id: str,
    owner: str,
    generation: int,
    lease_until: float,
    ttl: float,
    attempt: int,
    local_deadline: float,
    secret: str,
    store_id: str,
) -> Lease:
    """``Lease(...)`` of these fields, positional in the class's order (`LeaseMaker.lease`
    makes every lease a store hands out)."""
    lease = object.__new__(_LeaseDraft)
    lease.job_id = job_id
    lease.owner = owner
    lease.generation = generation
    lease.lease_until = lease_until
    lease.ttl = ttl
    lease.attempt = attempt
    lease.local_deadline = local_deadline
    lease.secret = secret
    lease.store_id = store_id
    lease.__class__ = Lease  # type: ignore[assignment]
    return lease  # type: ignore[return-value]
