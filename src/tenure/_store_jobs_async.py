"""The store API's enqueue-and-wait half (issue #17): `submit_many`, submit in the caller's
own transaction (``conn=``), `wait` for a job to finish, and `jobs` in pages with a
cursor. A mixin of `tenure.aio.AsyncStore` (and, generated, of `tenure.Store`): the checks
are here and in `tenure._validate`, the one store operation each in the drivers.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from ._protocol import (
    UNDECODED,
    UNFINISHED_STATES,
    JobFilter,
    Outcome,
    Status,
    Submission,
    job_from_row,
)
from ._trace_context import job_headers, trace_headers
from ._validate import (
    DEFAULT_MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_ID_LENGTH,
    encode_headers,
    encode_json,
    validate_age,
    validate_attempts,
    validate_cursor,
    validate_delay,
    validate_headers,
    validate_id,
    validate_job_timeout,
    validate_limit,
    validate_priority,
    validate_timeout,
    validate_unique,
    validate_wait_timeout,
)
from .errors import InvalidArgument, JobNotFound, WaitTimeout
from .models import Attempt, AttemptEnding, Job, JobPage, JobSpec, JobState

if TYPE_CHECKING:
    from .stores.abc import AsyncDriver

__all__ = ["AsyncJobsMixin", "no_shared_transaction"]

T = TypeVar("T")

_STATES = tuple(JobState)
_SPEC_KEYS = frozenset(JobSpec.__slots__)
# The defaults of `submit`'s delay and priority (ints: small ints are one object, so a
# default given explicitly is recognised by identity too).
_DEFAULT_DELAY = 0
_DEFAULT_PRIORITY = 0
_ZERO = 0.0  # a default delay as submitted: one float object for every such job of a batch
_MISSING = object()
# A batch element of only these keys (the usual one) takes every other argument's default.
_BASIC_KEYS = frozenset(("job_id", "payload", "queue"))
_tuple = tuple.__new__
# How long a wait's single driver call may block before the store looks again (and, on
# the driver's side, how long a blocking read is held): bounded, so that a long wait
# survives a lost connection as a retried read, not as an error.
_WAIT_STEP = 30.0


def no_shared_transaction(url: str) -> InvalidArgument:
    """The error for ``conn=`` on a store that cannot share the caller's transaction."""
    return InvalidArgument(
        "conn",
        f"the store {url} is not in your database, so it cannot take part in your "
        "transaction (Redis has no transaction to share with SQL): submit after your "
        "transaction commits instead (submit is idempotent by job id, so an outbox row "
        "resubmitted until it succeeds is safe), or keep the jobs in your database with a "
        "PostgreSQL or SQLite store",
    )


class AsyncJobsMixin:
    """`submit`, `submit_many`, transactional submit, `wait` and paged `jobs` of
    `AsyncStore`."""

    _driver: AsyncDriver
    _payload_limit: int

    if TYPE_CHECKING:

        async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T: ...

    # -- submitting ---------------------------------------------------------------------

    async def submit(
        self,
        job_id: str,
        payload: Any = None,
        *,
        queue: str = "default",
        delay: float | timedelta = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        conn: Any = None,
        priority: int = 0,
        timeout: float | timedelta | None = None,
        unique_key: str | None = None,
        unique_for: float | timedelta | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Job:
        """Add a job, ready ``delay`` seconds from now. An existing ``job_id`` is left as it is
        and its current snapshot returned (submit is idempotent); ``job.created`` tells the
        two apart (True: this call created it).

        ``conn``: enqueue inside your own open transaction, on the store's database: a
        psycopg connection (sync or async, as this store is) or a SQLAlchemy ``Session``
        on a PostgreSQL store, a `sqlite3.Connection` on a SQLite store. The
        job then exists if and only if your transaction commits; tenure neither begins nor
        commits it (an autocommit connection outside a transaction block commits the
        submit at once). Redis refuses with `InvalidArgument`.

        ``priority``: an int from -2**31 to 2**31-1 (default 0); claims take the highest
        priority first, and within one priority the oldest due job first. ``timeout``: the
        job's own per-attempt timeout (seconds or a timedelta, 0.01 s to 366 days), which a
        worker uses instead of its handler's; None: the handler's. An existing job keeps
        its own (submit changes nothing on it).

        ``unique_key``: a unique job (issue #18). While another job submitted with the same
        key is unfinished (ready, scheduled or leased), or finished (done, dead, cancelled)
        less than *its* ``unique_for`` seconds ago by store time, this submit creates
        nothing and returns that job's snapshot with ``created=False`` (its ``job_id`` is
        the other job's: compare it with yours), as an existing ``job_id`` does. An
        existing ``job_id`` is answered first. ``unique_for`` (seconds or a timedelta, only
        with a key): how long this job keeps the key after it finishes; None: only while
        unfinished. Delete, purge, requeue, cancel: docs/reference.md, "Unique jobs".

        ``headers``: a small mapping of str to str kept with the job (`Job.headers`; at
        most 32, 8192 characters in all, no control characters), such as a W3C trace
        context. While an OpenTelemetry span is current, submit adds the current context
        (``traceparent``, ``tracestate``, through the application's propagator) to the
        names not given here, so a worker's handler span continues the trace
        (docs/worker.md, "Tracing"). An existing job keeps its own."""
        job_id = validate_id("job_id", job_id)
        queue = validate_id("queue", queue)
        delay_s = validate_delay(delay)
        max_attempts = validate_attempts(max_attempts)
        priority = validate_priority(priority)
        timeout_s = validate_job_timeout(timeout)
        payload_json = encode_json("payload", payload, self._payload_limit)
        key, window = validate_unique(unique_key, unique_for)
        carried = encode_headers(job_headers(validate_headers(headers), trace_headers()))
        submission = Submission(
            job_id, queue, payload_json, delay_s, max_attempts, priority, timeout_s, key, window,
            carried,
        )  # fmt: skip
        outcome = await self._submit_one(submission, conn)
        assert outcome.row is not None
        return job_from_row(outcome.row, outcome.now, created=outcome.status == Status.APPLIED)

    async def submit_many(
        self, jobs: Sequence[JobSpec | Mapping[str, Any]], *, conn: Any = None
    ) -> list[Job]:
        """Submit many jobs in one store operation (one round trip, one commit), each
        exactly as `submit` would: a new id is created, an existing one left as it is and
        its snapshot returned. Answers one `Job` per input, in input order; ``job.created``
        tells new from existing.

        ``jobs``: `tenure.JobSpec` values or mappings with the same keys (``job_id``
        required; ``payload``, ``queue``, ``delay``, ``max_attempts``, ``priority``,
        ``timeout``, ``unique_key``, ``unique_for``, ``headers`` as `submit`, the current
        trace context added to each job's headers as by `submit`). At most
        1000, each id at most once (a repeated id is refused, like `complete_many`'s rule).
        Every element is checked before anything is sent: `InvalidArgument` names the
        element (``jobs[3].queue``) and nothing is submitted.

        ``conn``: submit inside *your* open transaction instead (see `submit`).

        Unique keys (see `submit`) are taken in input order: of two jobs of one batch with
        the same key, the first is created and the second answered with its snapshot
        (``created=False``). A batch with keys runs one statement per keyed job (in one
        transaction) on the SQL stores; a batch without keys is one statement, as before.
        """
        batch = self._submissions(jobs)
        if conn is not None:  # an empty batch too: the connection is checked all the same
            return _jobs_of(await self._submit_joined(conn, batch), batch)
        if not batch:
            return []

        async def call() -> list[Outcome]:
            return await self._driver.submit_many(batch)

        return _jobs_of(await self._call("submit_many", call), batch)

    async def _submit_one(self, submission: Submission, conn: Any) -> Outcome:
        """`submit`'s store operation: in the caller's transaction (``conn``), or the
        driver's submit, retried as any operation."""
        if conn is not None:
            return (await self._submit_joined(conn, [submission]))[0]
        args, options = submission.driver_args()

        async def call() -> Outcome:
            return await self._driver.submit(*args, **options)

        return await self._call("submit", call)

    async def _submit_joined(self, conn: Any, batch: list[Submission]) -> list[Outcome]:
        # Not retried: the caller's transaction decides, and a failed statement has already
        # ended it (PostgreSQL) or must be rolled back by its owner.
        joined = getattr(self._driver, "submit_joined", None)
        if joined is None:
            raise no_shared_transaction(self._driver.url)
        outcomes: list[Outcome] = await joined(conn, batch)
        return outcomes

    def _submissions(self, jobs: object) -> list[Submission]:
        if isinstance(jobs, (str, bytes, Mapping, JobSpec)) or not isinstance(jobs, Sequence):
            raise InvalidArgument("jobs", "must be a list or tuple of tenure.JobSpec or dicts")
        if len(jobs) > MAX_BATCH:
            raise InvalidArgument("jobs", f"must hold at most {MAX_BATCH}, got {len(jobs)}")
        batch: list[Submission] = []
        append = batch.append
        queues: dict[object, str] = {}  # each distinct queue name checked once per batch
        # The current trace context (issue #20), once per batch, and as the JSON text of a
        # job without headers of its own (encoded once, not per job).
        injected = trace_headers()
        carried = (injected, encode_headers(injected))
        headers_json = carried[1]
        limit = self._payload_limit
        submission = self._submission
        try:
            for index, item in enumerate(jobs):
                # The usual element, checked here inline (a batch's per-job cost): a dict of
                # no other keys than job_id, payload and queue, a plain ASCII id (what
                # validate_id passes at once) and a queue this batch has checked already.
                # The payload is encoded under a blank argument name, its element's name
                # built only to name an error. Anything else takes `_submission`'s checks.
                if type(item) is dict and _BASIC_KEYS.issuperset(item):
                    job_id = item.get("job_id")
                    queue_value = item.get("queue", "default")
                    queue = queues.get(queue_value) if type(queue_value) is str else None
                    if (
                        queue is not None
                        and type(job_id) is str
                        and 0 < len(job_id) <= MAX_ID_LENGTH
                        and job_id.isascii()
                        and job_id.isprintable()
                    ):
                        payload = item.get("payload")
                        try:
                            payload_json = encode_json("", payload, limit)
                        except InvalidArgument:  # the same check again, to name the element
                            encode_json(f"jobs[{index}].payload", payload, limit)
                            raise
                        append(_tuple(Submission, (
                            job_id, queue, payload_json, _ZERO, DEFAULT_MAX_ATTEMPTS, 0, None,
                            None, None, headers_json,
                        )))  # fmt: skip
                        continue
                append(submission(index, item, queues, carried))
        except Exception:
            # An element refused after a repeated id: the repeat is the first error, as when
            # each id was looked for as it came.
            _refuse_repeats(batch)
            raise
        if len(set(map(_job_id, batch))) != len(batch):
            _refuse_repeats(batch)
        return batch

    def _submission(
        self,
        index: int,
        item: object,
        queues: dict[object, str],
        carried: tuple[dict[str, str], str | None],
    ) -> Submission:
        """One element of a batch (``jobs[index]``), checked as `submit` checks its
        arguments. A key left out or given its default (``delay`` 0, ``max_attempts`` 5,
        ``priority`` 0, no timeout or unique key) holds a value known good: nothing to
        check, and no argument name (``jobs[3].delay``) to build for it: a large batch's
        per-job cost."""
        if isinstance(item, dict):  # the usual case, the fast check
            fields: Mapping[str, Any] = item
        elif isinstance(item, JobSpec):
            fields = {name: getattr(item, name) for name in _SPEC_KEYS}
        elif isinstance(item, Mapping):
            fields = item
        else:
            raise InvalidArgument(
                f"jobs[{index}]",
                f"must be a tenure.JobSpec or a dict, not {type(item).__name__}",
            )
        if not _SPEC_KEYS.issuperset(fields):
            unknown = fields.keys() - _SPEC_KEYS
            raise InvalidArgument(
                f"jobs[{index}]",
                f"has unknown keys {sorted(map(str, unknown))} "
                f"(known: {', '.join(sorted(_SPEC_KEYS))})",
            )
        get = fields.get
        job_id = get("job_id", _MISSING)
        if job_id is _MISSING:
            raise InvalidArgument(f"jobs[{index}].job_id", "is required")
        queue_value = get("queue", "default")
        queue = queues.get(queue_value) if isinstance(queue_value, str) else None
        if queue is None:
            queue = queues[queue_value] = validate_id(f"jobs[{index}].queue", queue_value)
        # validate_id's own test of a plain ASCII id, inline; anything else takes it whole.
        if not (
            type(job_id) is str
            and 0 < len(job_id) <= MAX_ID_LENGTH
            and job_id.isascii()
            and job_id.isprintable()
        ):
            job_id = validate_id(f"jobs[{index}].job_id", job_id)
        payload = get("payload")
        payload_json = encode_json(f"jobs[{index}].payload", payload, self._payload_limit)
        # tuple.__new__: the fields are whole, and the NamedTuple's own __new__ (a Python
        # function) costs as much as the checks of a default job.
        if _BASIC_KEYS.issuperset(fields):  # the other arguments left out: their defaults
            return _tuple(
                Submission,
                (job_id, queue, payload_json, _ZERO, DEFAULT_MAX_ATTEMPTS, 0, None, None, None,
                 carried[1]),
            )  # fmt: skip
        return _tuple(
            Submission,
            (job_id, queue, payload_json, *_other_arguments(index, fields.get, carried)),
        )

    # -- waiting ------------------------------------------------------------------------

    async def wait(self, job_id: str, *, timeout: float | timedelta | None = None) -> Job:
        """Wait until the job is finished (done, dead, or any other final state) and return
        its snapshot; at once if it already is. Raises `WaitTimeout` (with the job's last
        snapshot) when ``timeout`` seconds pass first (None, the default: no limit),
        `JobNotFound` for an unknown id.
        PostgreSQL is notified (LISTEN/NOTIFY), Redis blocks on a list its scripts push
        to, SQLite polls the file briefly. Waiting changes nothing: repeat it freely."""
        job_id = validate_id("job_id", job_id)
        timeout_s = math.inf if timeout is None else validate_wait_timeout(timeout)
        deadline = time.monotonic() + timeout_s
        while True:
            step = max(0.0, min(_WAIT_STEP, deadline - time.monotonic()))

            async def call(step: float = step) -> Outcome:
                return await self._driver.wait_job(job_id, step)

            outcome = await self._call("wait", call)
            if outcome.row is None:
                raise JobNotFound(job_id)
            job = job_from_row(outcome.row, outcome.now)
            if job.state not in UNFINISHED_STATES:
                return job
            if time.monotonic() >= deadline:
                raise WaitTimeout(job_id, timeout_s, job.state, job)

    # -- listing ------------------------------------------------------------------------

    async def jobs(
        self,
        *,
        queue: str | None = None,
        state: JobState | str | None = None,
        owner: str | None = None,
        older_than: float | timedelta | None = None,
        limit: int = 100,
        after: str | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """One page of job snapshots, oldest submitted first: of ``queue``, in ``state``,
        last claimed by ``owner``, created at least ``older_than`` seconds ago (each None:
        any). At most ``limit`` (1-1000); the page's ``next_cursor``, passed back as
        ``after`` (or ``cursor``, its other name), gives the next page (None: no more). A
        page is a list of `Job`::

            page = await store.jobs(state="dead")
            while True:
                for job in page: ...
                if page.next_cursor is None: break
                page = await store.jobs(state="dead", after=page.next_cursor)

        Each page is read at one store time; jobs submitted after a page was read come on
        later pages, and a job whose state changes between pages may be seen twice or not
        at all (a cursor is a position in submission order, not a snapshot)."""
        if after is not None and cursor is not None:
            raise InvalidArgument(
                "after", "give after or cursor (two names of the same position), not both"
            )
        position = validate_cursor(cursor) if after is None else validate_cursor(after, "after")
        selection = JobFilter(
            None if queue is None else validate_id("queue", queue),
            _state(state),
            None if owner is None else validate_id("owner", owner),
            None if older_than is None else validate_age(older_than, "older_than"),
            position,
            validate_limit(limit),
        )

        async def call() -> tuple[float, list[Any], int | None]:
            return await self._driver.list_jobs(selection)

        now, rows, last = await self._call("jobs", call)
        return JobPage(
            [job_from_row(row, now) for row in rows], None if last is None else str(last)
        )

    async def attempts(self, job_id: str) -> list[Attempt]:
        """The job's attempts as the store recorded them, oldest first (by generation):
        each claim starts one, and the end of its lease (complete, fail, release, cancel,
        a newer claim after it expired, the burial of its job) ends it, in the same store
        operation, at store time. The store keeps the newest `tenure.models.ATTEMPTS_KEPT`
        (100) per job; delete and purge remove them with their job. An unknown job (or a
        store without a history, such as a custom backend) has none: ``[]``."""
        job_id = validate_id("job_id", job_id)
        reader = getattr(self._driver, "attempts", None)
        if reader is None:
            return []

        async def call() -> list[tuple[Any, ...]]:
            found: list[tuple[Any, ...]] = await reader(job_id)
            return found

        rows = await self._call("attempts", call)
        return [_attempt(job_id, row) for row in rows]


_job_id = itemgetter(0)  # a Submission's job id


def _refuse_repeats(batch: list[Submission]) -> None:
    """Raise for the first job of ``batch`` whose id an earlier one has."""
    seen: set[str] = set()
    for index, job in enumerate(batch):
        if job.job_id in seen:
            raise InvalidArgument(
                f"jobs[{index}].job_id",
                f"must name each job at most once in a batch: {job.job_id!r} repeats",
            )
        seen.add(job.job_id)


def _attempt(job_id: str, row: tuple[Any, ...]) -> Attempt:
    """An `Attempt` from a driver's row: (generation, owner, started_at, ended_at,
    ending, error), times as numbers or their text."""
    generation, owner, started_at, ended_at, ending, error = row
    return Attempt(
        job_id,
        int(generation),
        str(owner),
        float(started_at),
        None if ended_at is None else float(ended_at),
        None if ending is None else AttemptEnding(ending),
        None if error is None else str(error),
    )


def _other_arguments(
    index: int, get: Callable[..., Any], carried: tuple[dict[str, str], str | None]
) -> tuple[float, int, int, float | None, str | None, float | None, str | None]:
    """A batch element's arguments after its payload (``get``: its mapping's), checked as
    `submit` checks them: delay, max attempts, priority, timeout, unique key and window,
    headers as JSON text (with the trace context ``carried``)."""
    delay = get("delay", _DEFAULT_DELAY)
    if delay is _DEFAULT_DELAY:
        delay = _ZERO
    else:
        delay = float(validate_delay(delay, f"jobs[{index}].delay"))
    max_attempts = get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    if max_attempts is not DEFAULT_MAX_ATTEMPTS:
        max_attempts = validate_attempts(max_attempts, f"jobs[{index}].max_attempts")
    priority = get("priority", _DEFAULT_PRIORITY)
    if priority is not _DEFAULT_PRIORITY:
        priority = validate_priority(priority, f"jobs[{index}].priority")
    timeout = get("timeout")
    if timeout is not None:
        timeout = validate_timeout(timeout, f"jobs[{index}].timeout")
    key, window = get("unique_key"), get("unique_for")
    if key is not None or window is not None:
        key, window = validate_unique(key, window, f"jobs[{index}].")
    headers = get("headers")
    if headers is None:
        headers_json = carried[1]
    else:
        headers_json = _headers_of(headers, f"jobs[{index}].headers", carried)
    return delay, max_attempts, priority, timeout, key, window, headers_json


def _headers_of(
    value: object, argument: str, carried: tuple[dict[str, str], str | None]
) -> str | None:
    """A batch job's headers as a driver takes them: its own, and the trace context
    (``carried``: the injected headers and their JSON text)."""
    if value is None:
        return carried[1]
    return encode_headers(job_headers(validate_headers(value, argument), carried[0]))


def _state(state: object) -> str | None:
    if state is not None and state not in _STATES:
        raise InvalidArgument("state", f"must be one of {', '.join(_STATES)}, got {state!r}")
    return None if state is None else str(state)


def _jobs_of(outcomes: list[Outcome], batch: Sequence[Submission] = ()) -> list[Job]:
    """The snapshots of a batch's outcomes (``batch``: its submissions, in order)."""
    payloads = _own_payloads(outcomes, batch)
    jobs: list[Job] = []
    append = jobs.append
    for (status, row, now), payload in zip(outcomes, payloads, strict=True):
        assert row is not None
        append(job_from_row(row, now, status == Status.APPLIED, payload))
    return jobs


def _own_payloads(outcomes: list[Outcome], batch: Sequence[Submission]) -> list[Any]:
    """Each outcome's payload decoded, or `UNDECODED` (`job_from_row` decodes it). A row
    whose payload is the very text its submission encoded (a driver that answers a new job
    from its submission, as Redis does) has it decoded with the others of its kind in one
    `json.loads` of them all: the texts are whole JSON values this process made, so joined
    by commas they are an array of them."""
    payloads: list[Any] = [UNDECODED] * len(outcomes)
    own: list[int] = []
    texts: list[str] = []
    # Not strict: a driver answers one outcome a submission, and one that did not is not
    # refused here any more than before.
    for n, (outcome, submission) in enumerate(zip(outcomes, batch, strict=False)):
        text = submission.payload
        if text is not None and outcome.row is not None and outcome.row.payload is text:
            own.append(n)
            texts.append(text)
    if texts:
        for n, value in zip(own, json.loads("[" + ",".join(texts) + "]"), strict=True):
            payloads[n] = value
    return payloads
