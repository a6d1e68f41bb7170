"""The store API, async: `AsyncStore` and `connect`. The source of truth for `tenure.Store`
and `tenure.connect` too.

``tools/async_to_sync.py`` generates ``tenure/_store.py`` from it; CI checks the two agree.
Keep everything that is not I/O in `tenure._protocol` and `tenure._validate`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from . import _store_control_async, _store_jobs_async, _store_locks_async, _store_schedules_async
from ._batches import checked_batch, completions_of, lost_of, renewals_of, renewed_or_lost
from ._clock import Clock, LeaseTiming, SystemClock
from ._concurrency import pause_async
from ._protocol import (
    CLAIM_RECOVERY_TRIES,
    ClaimRequest,
    ClaimVerdict,
    JobRow,
    LeaseMaker,
    Outcome,
    RetryPolicy,
    Status,
    check_instances,
    claim_not_recovered,
    claim_recovery_budget,
    claim_recovery_pause,
    claim_verdict,
    hash_secret,
    job_from_row,
    lease_lost,
    new_secret,
    settle_receipt,
    settle_verdict,
)
from ._queue_stats import StoreStats, store_stats
from ._validate import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PAYLOAD_LIMIT,
    DEFAULT_QUEUES,
    encode_json,
    error_text,
    validate_delay,
    validate_id,
    validate_limit,
    validate_payload_limit,
    validate_queues,
    validate_ttl,
)
from .errors import InvalidArgument, JobNotFound, LeaseLost, StoreLost, StoreUnavailable
from .models import Claim, Job, Lease
from .stores import no_transaction, open_driver_async, resolve_url
from .stores.abc import AsyncDriver, AsyncTransaction

__all__ = ["DEFAULT_MAX_ATTEMPTS", "AsyncStore", "connect"]

T = TypeVar("T")

log = logging.getLogger("tenure")

# Operations that take jobs by picking them: not repeated after a lost reply (see _call).
# Nor are requeue and delete, whose repeat would be refused once the first took effect.
_CLAIMS = ("claim_next", "complete_and_claim", "requeue", "delete")


class AsyncStore(
    _store_control_async.AsyncStoreControl,
    _store_jobs_async.AsyncJobsMixin,
    _store_locks_async.AsyncStoreLocks,
    _store_schedules_async.AsyncStoreSchedules,
):
    """A lease store: submit jobs, claim them under leases, renew, complete, release, fail;
    cancel, requeue, delete and purge them (`AsyncStoreControl`); submit many, in your
    transaction, wait for results, list in pages (`AsyncJobsMixin`); named locks and leader
    election on them (`AsyncStoreLocks`: `lock`, `elect`); periodic jobs kept in the store
    (`AsyncStoreSchedules`: `add_schedule`, `remove_schedule`, `schedules`).

    Create one with `tenure.aio.connect`. Every method validates its arguments first (bad
    input raises `InvalidArgument` and leaves the store unchanged) and then runs one atomic
    operation in the store.
    """

    def __init__(
        self,
        driver: AsyncDriver,
        *,
        clock: Clock | None = None,
        timing: LeaseTiming | None = None,
        retry_policy: RetryPolicy | None = None,
        payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
        retries: int = 2,
        rng: random.Random | None = None,
    ) -> None:
        check_instances(clock=clock, timing=timing, retry_policy=retry_policy, rng=rng)
        self._driver = driver
        self._clock = clock or SystemClock()
        self._leases = LeaseMaker(driver.store_id, timing or LeaseTiming())
        self._retry_policy = retry_policy or RetryPolicy()
        self._payload_limit = validate_payload_limit(payload_limit)
        self._retries = retries
        self._rng = rng or random.Random()

    @property
    def url(self) -> str:
        """The store's URL, without any password."""
        return self._driver.url

    @property
    def store_id(self) -> str:
        """A random id the store was given when it was created; leases carry it."""
        return self._driver.store_id

    @property
    def clock(self) -> Clock:
        """The client clock local deadlines are measured on."""
        return self._clock

    def sql_transaction(self, operation: str, *, conn: Any = None) -> AsyncTransaction:
        """A transaction of the store's own database that your statements share (SQLite
        and PostgreSQL stores): the seam under `tenure.fence.complete_with`, for
        integrations that must commit their writes and a store operation together.

        ::

            async with store.sql_transaction("complete") as txn:
                await txn.cursor.execute(...)   # your writes
                outcome = await txn.complete(...)   # the store's statement, same transaction

        Nothing happens before it is entered; then it connects (``conn``: your own idle
        connection to the store's database, checked by store id; by default one of the
        store's), begins, and on leaving commits (rolls back on an exception). The
        transaction's store operations are the driver's (`tenure.stores._driver_async.
        AsyncTransaction`): raw `Outcome` answers, not checked or interpreted here. Redis has
        no such transaction: `InvalidArgument` at once. ``operation`` (e.g.
        ``"complete"``) names what the transaction is for in errors.
        """
        if not (
            isinstance(operation, str) and 0 < len(operation) <= 100 and operation.isprintable()
        ):
            raise InvalidArgument(
                "operation",
                "must name what the transaction is for in its errors (e.g. 'complete'): a "
                f"str of 1 to 100 printable characters, got {str(operation)[:40]!r}",
            )
        opener = getattr(self._driver, "transaction", None)
        if opener is None:
            raise no_transaction(self.url, operation)
        txn: AsyncTransaction = opener(operation, conn, self._payload_limit)
        return txn

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._driver.close()

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        # Every operation is safe to repeat (see tenure.errors), so a transient failure is
        # retried a few times before it reaches the caller. (A claim whose reply was lost
        # is recovered by its callers instead: see _recover_claim.) The first try is made
        # here and the retries in `_retry`: the loop's set-up was a cost on every call.
        try:
            return await call()
        except StoreUnavailable as exc:
            failed = exc
        # Out of the except clause, so that an error of a retry is not chained to this one.
        return await self._retry(operation, call, failed)

    async def _retry(
        self, operation: str, call: Callable[[], Awaitable[T]], exc: StoreUnavailable
    ) -> T:
        """`_call`'s retries after the first try failed with ``exc``."""
        attempt = 0
        while True:
            # A claim_next whose reply was lost may have taken a job: repeating it would
            # take another, so that one error goes to the caller as it is. A store that
            # lost its data stays lost: no point in asking again.
            if (
                attempt == self._retries
                or (operation in _CLAIMS and exc.outcome_unknown)
                or isinstance(exc, StoreLost)
            ):
                raise exc
            await pause_async(0.05 * (4**attempt) * (0.5 + self._rng.random()))
            attempt += 1
            try:
                return await call()
            except StoreUnavailable as again:
                exc = again

    # -- jobs -------------------------------------------------------------------------

    async def now(self) -> float:
        """The store's time, in seconds since the epoch."""
        return await self._call("now", self._driver.now)

    async def get(self, job_id: str) -> Job:
        """A snapshot of the job; raises `JobNotFound`."""
        job_id = validate_id("job_id", job_id)

        async def call() -> Outcome:
            return await self._driver.get(job_id)

        outcome = await self._call("get", call)
        if outcome.row is None:
            raise JobNotFound(job_id)
        return job_from_row(outcome.row, outcome.now)

    async def queue_stats(self) -> StoreStats | None:
        """The live jobs of every queue, counted by the store in one bounded operation
        (ready and due, scheduled, leased, expired leases not yet claimed again, and the
        oldest due job; see `tenure._queue_stats.QueueStats`): what dashboards and metrics
        show. Done and dead jobs are not counted. Every built-in store counts (Redis from
        its per-queue bookkeeping, issue #20); None only from a driver without
        ``queue_stats``."""
        counter = getattr(self._driver, "queue_stats", None)
        if counter is None:
            return None
        now, rows = await self._call("queue_stats", counter)
        return store_stats(now, rows)

    # -- leases -----------------------------------------------------------------------

    async def claim(self, job_id: str, owner: str, ttl: float | timedelta) -> Lease | None:
        """Claim one job by id. Returns None when someone else holds it or it is not
        claimable (not due yet, done, dead). Raises `JobNotFound`, `GenerationExhausted`."""
        job_id = validate_id("job_id", job_id)
        owner = validate_id("owner", owner)
        ttl_s = validate_ttl(ttl)
        # The secret is drawn once, before the first try: a retry after a lost reply finds
        # its own secret in the store and gets the same lease back, not a new generation.
        secret, secret_hash = new_secret()
        sent_at = self._clock.monotonic()

        async def call() -> Outcome:
            return await self._driver.claim(job_id, owner, ttl_s, secret_hash)

        outcome = await self._call("claim", call)
        verdict = claim_verdict(outcome, job_id, owner, secret_hash)
        if verdict in (ClaimVerdict.CLAIMED, ClaimVerdict.ALREADY_YOURS):
            assert outcome.row is not None
            return self._leases.lease(outcome.row, owner, ttl_s, secret, sent_at)
        if verdict == ClaimVerdict.BURIED:
            assert outcome.row is not None
            _log_buried(outcome.row)
        return None

    async def claim_next(
        self, owner: str, ttl: float | timedelta, *, queues: Sequence[str] = DEFAULT_QUEUES
    ) -> Lease | None:
        """Claim the next claimable job of ``queues``: ready and due, or leased with an
        expired lease; the highest priority first, then the oldest (by ``available_at``,
        then submission). Returns None when there is none."""
        claimed = await self._claim_rows(owner, ttl, 1, queues)
        return claimed[0][0] if claimed else None

    async def claim_many(
        self,
        owner: str,
        ttl: float | timedelta,
        limit: int,
        *,
        queues: Sequence[str] = DEFAULT_QUEUES,
    ) -> list[Lease]:
        """Claim up to ``limit`` jobs at once, in `claim_next`'s order (highest priority,
        then oldest), in one store operation."""
        claimed = await self._claim_rows(owner, ttl, limit, queues)
        return [lease for lease, _, _ in claimed]

    async def claim_jobs(
        self,
        owner: str,
        ttl: float | timedelta,
        limit: int,
        *,
        queues: Sequence[str] = DEFAULT_QUEUES,
    ) -> list[Claim]:
        """`claim_many`, each lease with the snapshot of its job as claimed: for a loop of
        your own that needs the payload (or queue, attempts...) of what it claimed, saving a
        `get` per job. The snapshot is read in the same store operation as the claim, so it
        is what `get` would return right after it. Arguments, errors and retry rules are
        those of `claim_many`::

            for lease, job in await store.claim_jobs("worker-1", 30, 10):
                await store.complete(lease, handle(job.payload))
        """
        claimed = await self._claim_rows(owner, ttl, limit, queues)
        return _with_jobs(claimed)

    async def _claim_rows(
        self, owner: str, ttl: float | timedelta, limit: int, queues: Sequence[str]
    ) -> list[tuple[Lease, JobRow, float]]:
        # Each lease with the row and store time it came from (enough to build a `Job`
        # snapshot without another read, for callers that need one).
        request = self._claim_request(owner, ttl, limit, queues)

        async def call() -> list[Outcome]:
            return await self._driver.claim_next(
                request.owner, request.ttl, request.queues, request.secret_hashes
            )

        sent_at = self._clock.monotonic()
        try:
            outcomes = await self._call("claim_next", call)
        except StoreUnavailable as exc:
            if not exc.outcome_unknown or isinstance(exc, StoreLost):
                raise
            outcomes = await self._recover_claim("claim_next", request, exc)
        return self._claimed(request, outcomes, sent_at)

    async def _recover_claim(
        self, operation: str, request: ClaimRequest, lost: StoreUnavailable
    ) -> list[Outcome]:
        """The answer of a claim whose reply was lost (``lost``): the leases the store holds
        under the claim's secret hashes, or, when it holds none, the claim sent again with
        the same hashes (why this is safe: `tenure._protocol.CLAIM_RECOVERY_TRIES`)."""
        if getattr(self._driver, "find_leases", None) is None:
            raise lost  # a driver written before the operation existed
        deadline = self._clock.monotonic() + claim_recovery_budget(request.ttl)
        error: StoreUnavailable = lost
        for attempt in range(CLAIM_RECOVERY_TRIES):
            await pause_async(claim_recovery_pause(attempt, 0.5 + self._rng.random()))
            if self._clock.monotonic() > deadline:
                break
            try:
                found = await self._driver.find_leases(
                    request.owner, request.ttl, request.queues, request.secret_hashes
                )
                if not found:
                    return await self._driver.claim_next(
                        request.owner, request.ttl, request.queues, request.secret_hashes
                    )
            except StoreUnavailable as exc:
                if isinstance(exc, StoreLost):
                    raise
                error = exc
                continue
            log.info(
                "%s: the reply was lost; found the %d lease(s) it took by their secrets",
                operation,
                len(found),
                extra={"operation": operation, "owner": request.owner, "leases": len(found)},
            )
            return found
        raise claim_not_recovered(operation, request.ttl, error) from error

    def _claim_request(
        self, owner: str, ttl: float | timedelta, limit: int, queues: Sequence[str]
    ) -> ClaimRequest:
        owner = validate_id("owner", owner)
        ttl_s = validate_ttl(ttl)
        limit = validate_limit(limit)
        queue_names = validate_queues(queues)
        secret_of = {}
        for _ in range(limit):  # a loop, not comprehensions: each was a call (Python 3.11)
            secret, secret_hash = new_secret()
            secret_of[secret_hash] = secret
        return ClaimRequest(owner, ttl_s, queue_names, list(secret_of), secret_of)

    def _claimed(
        self, request: ClaimRequest, outcomes: list[Outcome], sent_at: float
    ) -> list[tuple[Lease, JobRow, float]]:
        claimed = []
        for outcome in outcomes:
            row = outcome.row
            if outcome.status == Status.APPLIED and row is not None and row.secret_hash:
                secret = request.secret_of[row.secret_hash]
                lease = self._leases.lease(row, request.owner, request.ttl, secret, sent_at)
                claimed.append((lease, row, outcome.now))
            elif outcome.status == Status.BURIED and row is not None:
                _log_buried(row)
        return claimed

    async def wait_for_jobs(
        self, *, queues: Sequence[str] = DEFAULT_QUEUES, timeout: float | timedelta = 1.0
    ) -> None:
        """Wait until jobs may be claimable in ``queues`` or ``timeout`` passes; for idle
        workers between empty ``claim_next`` calls. Notified stores wake early."""
        queue_names = validate_queues(queues)
        timeout_s = validate_delay(timeout, "timeout")

        async def call() -> None:
            await self._driver.wait_for_jobs(queue_names, timeout_s)

        await self._call("wait_for_jobs", call)

    async def renew(self, lease: Lease, ttl: float | timedelta | None = None) -> Lease:
        """Extend the lease to ``ttl`` (default: the lease's own) from now by store time.
        Raises `LeaseLost` when the lease is no longer current or has expired."""
        lease = self._leases.check(lease)
        ttl_s = lease.ttl if ttl is None else validate_ttl(ttl)
        secret_hash = hash_secret(lease.secret)
        sent_at = self._clock.monotonic()

        async def call() -> Outcome:
            return await self._driver.renew(
                lease.job_id, lease.owner, lease.generation, secret_hash, ttl_s
            )

        outcome = await self._call("renew", call)
        if outcome.status != Status.APPLIED or outcome.row is None:
            raise lease_lost("renew", lease, outcome, secret_hash)
        return self._leases.lease(outcome.row, lease.owner, ttl_s, lease.secret, sent_at)

    async def renew_many(
        self, leases: Sequence[Lease], ttl: float | timedelta | None = None
    ) -> list[Lease | LeaseLost]:
        """Renew many leases in one store operation, each as `renew` would: extended to
        ``ttl`` (default: each lease's own) from now by store time, all at one store time.

        Returns one item per lease, in order: the renewed `Lease`, or the `LeaseLost` error
        of a lease no longer current or expired (returned, not raised, since the others
        were renewed). Repeating the call after `StoreUnavailable` is safe. At most 1000
        leases, each job at most once.
        """
        checked = checked_batch(leases, self._leases)
        renewals = renewals_of(checked, None if ttl is None else validate_ttl(ttl))
        if not renewals:
            return []
        sent_at = self._clock.monotonic()

        async def call() -> list[Outcome]:
            return await self._driver.renew_many(renewals)

        outcomes = await self._call("renew", call)
        return renewed_or_lost(self._leases, checked, renewals, outcomes, sent_at)

    async def complete(self, lease: Lease, result: Any = None) -> None:
        """Mark the job done with ``result``. Raises `LeaseLost` when the lease is stale;
        repeating a completion that already took effect succeeds and changes nothing."""
        lease = self._leases.check(lease)
        result_json = encode_json("result", result, self._payload_limit)
        secret_hash = hash_secret(lease.secret)
        receipt = settle_receipt(secret_hash, "complete")

        async def call() -> Outcome:
            return await self._driver.complete(
                lease.job_id, lease.owner, lease.generation, secret_hash, receipt, result_json
            )

        outcome = await self._call("complete", call)
        if outcome.status != Status.APPLIED:  # applied: nothing to tell (the hot path)
            self._settled("complete", lease, secret_hash, outcome, result_json)

    async def complete_many(
        self, leases: Sequence[Lease], results: Sequence[Any] | None = None
    ) -> list[LeaseLost]:
        """Complete many jobs in one store operation; ``results[i]`` (default None) is the
        result of ``leases[i]``.

        Each lease is checked on its own, exactly as `complete` checks it: the current ones
        are done when this returns, the stale ones change nothing. Returns the `LeaseLost`
        error of every stale lease, in order (an empty list when all were completed), rather
        than raising, since the others did complete. Repeating the call after
        `StoreUnavailable` is safe. At most 1000 leases, each job at most once.
        """
        checked, completions = completions_of(leases, results, self._leases, self._payload_limit)
        if not completions:
            return []

        async def call() -> list[Outcome]:
            return await self._driver.complete_many(completions)

        return lost_of(checked, completions, await self._call("complete", call))

    async def complete_and_claim(
        self,
        leases: Sequence[Lease],
        owner: str,
        ttl: float | timedelta,
        limit: int,
        *,
        results: Sequence[Any] | None = None,
        queues: Sequence[str] = DEFAULT_QUEUES,
    ) -> tuple[list[LeaseLost], list[Lease]]:
        """`complete_many` of ``leases``, then `claim_many` of up to ``limit`` jobs for
        ``owner``, in one store operation: a batch worker's loop in one round trip (and, on
        PostgreSQL, one commit) per batch::

            leases = await store.claim_many("worker-1", 30, 10)
            while leases:
                results = [handle(lease) for lease in leases]
                lost, leases = await store.complete_and_claim(
                    leases, "worker-1", 30, 10, results=results
                )

        Each lease is checked exactly as `complete_many` checks it, and the claim sees the
        store as the completions left it. Returns ``(lost, claimed)``: the `LeaseLost` error
        of every stale lease, in order, and the new leases, oldest job first.

        After a lost reply the call is not repeated (it may have taken jobs): the store
        repeats the completions with `complete_many`, which is safe, and finds the leases
        the claim took by their secrets, as `claim_many` does. `StoreUnavailable` with
        ``outcome_unknown`` means that could not be done in time: repeat the completions
        with `complete_many`, then claim again.
        """
        lost, claimed = await self._complete_and_claim_rows(
            leases, owner, ttl, limit, results, queues
        )
        return lost, [lease for lease, _, _ in claimed]

    async def complete_and_claim_jobs(
        self,
        leases: Sequence[Lease],
        owner: str,
        ttl: float | timedelta,
        limit: int,
        *,
        results: Sequence[Any] | None = None,
        queues: Sequence[str] = DEFAULT_QUEUES,
    ) -> tuple[list[LeaseLost], list[Claim]]:
        """`complete_and_claim`, each new lease with the snapshot of its job as claimed (as
        `claim_jobs`): a batch loop that needs the payloads of what it claims, in one round
        trip per batch and no `get`. Arguments, errors and the rule after `StoreUnavailable`
        with ``outcome_unknown`` are those of `complete_and_claim`::

            claims = await store.claim_jobs("worker-1", 30, 10)
            while claims:
                results = [handle(job.payload) for _, job in claims]
                leases = [lease for lease, _ in claims]
                lost, claims = await store.complete_and_claim_jobs(
                    leases, "worker-1", 30, 10, results=results
                )
        """
        lost, claimed = await self._complete_and_claim_rows(
            leases, owner, ttl, limit, results, queues
        )
        return lost, _with_jobs(claimed)

    async def _complete_and_claim_rows(
        self,
        leases: Sequence[Lease],
        owner: str,
        ttl: float | timedelta,
        limit: int,
        results: Sequence[Any] | None,
        queues: Sequence[str],
    ) -> tuple[list[LeaseLost], list[tuple[Lease, JobRow, float]]]:
        checked, completions = completions_of(leases, results, self._leases, self._payload_limit)
        request = self._claim_request(owner, ttl, limit, queues)

        async def call() -> tuple[list[Outcome], list[Outcome]]:
            if not completions:
                return [], await self._driver.claim_next(
                    request.owner, request.ttl, request.queues, request.secret_hashes
                )
            return await self._driver.complete_and_claim(
                completions, request.owner, request.ttl, request.queues, request.secret_hashes
            )

        sent_at = self._clock.monotonic()
        try:
            completed, claimed = await self._call("complete_and_claim", call)
        except StoreUnavailable as exc:
            if not exc.outcome_unknown or isinstance(exc, StoreLost):
                raise
            # Its completions are safe to repeat (a repeat of one that took effect answers
            # success); its claim is recovered as claim_next's is. If the repeat fails, the
            # claim's outcome is still unknown: that is the error the caller gets.
            completed = []
            if completions:
                try:
                    completed = await self._call(
                        "complete", lambda: self._driver.complete_many(completions)
                    )
                except StoreUnavailable as again:
                    if isinstance(again, StoreLost):
                        raise
                    raise exc from again
            claimed = await self._recover_claim("complete_and_claim", request, exc)
        lost = lost_of(checked, completions, completed)
        return lost, self._claimed(request, claimed, sent_at)

    async def release(self, lease: Lease) -> None:
        """Give the job back now, claimable at once by anyone; the attempt is not counted."""
        lease = self._leases.check(lease)
        secret_hash = hash_secret(lease.secret)
        receipt = settle_receipt(secret_hash, "release")

        async def call() -> Outcome:
            return await self._driver.release(
                lease.job_id, lease.owner, lease.generation, secret_hash, receipt
            )

        outcome = await self._call("release", call)
        self._settled("release", lease, secret_hash, outcome)

    async def fail(
        self, lease: Lease, error: str | BaseException, *, retry_in: float | timedelta | None = None
    ) -> None:
        """Record a failed attempt. The job is retried after ``retry_in`` (default:
        exponential backoff with jitter) or becomes ``dead`` once ``max_attempts`` is used."""
        lease = self._leases.check(lease)
        error_message = error_text(error)
        if retry_in is None:
            retry_s = self._retry_policy.delay(lease.attempt, self._rng)
        else:
            retry_s = validate_delay(retry_in, "retry_in")
        secret_hash = hash_secret(lease.secret)
        receipt = settle_receipt(secret_hash, "fail")

        async def call() -> Outcome:
            return await self._driver.fail(
                lease.job_id,
                lease.owner,
                lease.generation,
                secret_hash,
                receipt,
                error_message,
                retry_s,
            )

        outcome = await self._call("fail", call)
        self._settled("fail", lease, secret_hash, outcome, error_message)

    @staticmethod
    def _settled(
        operation: str,
        lease: Lease,
        secret_hash: str,
        outcome: Outcome,
        sent: str | None = None,
    ) -> None:
        lost = settle_verdict(operation, lease, secret_hash, outcome, sent)
        if lost is not None:
            raise lost


def _with_jobs(claimed: list[tuple[Lease, JobRow, float]]) -> list[Claim]:
    return [Claim(lease, job_from_row(row, now)) for lease, row, now in claimed]


def _log_buried(row: JobRow) -> None:
    # A claim that buries a job is what ended it (its last attempt's lease had expired):
    # worth a line, since no worker's handler will report this death.
    log.info(
        "job %s dead: the lease of its last allowed attempt expired",
        row.job_id,
        extra={"job_id": row.job_id, "generation": row.generation, "attempts": row.attempts},
    )


async def connect(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    store_clock: Clock | None = None,
    timing: LeaseTiming | None = None,
    retry_policy: RetryPolicy | None = None,
    payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
    rng: random.Random | None = None,
) -> AsyncStore:
    """Open the store at ``url`` (default: ``TENURE_STORE_URL``, else ``sqlite:///tenure.db``).

    ``clock`` is the client's clock (local lease deadlines are measured on its monotonic
    time). ``store_clock`` replaces the store's own clock: for SQLite that is the host clock
    anyway; for server stores it is a hook for deterministic tests only, never for
    production, where the server's time must decide.
    """
    # Before the store is touched:
    check_instances(
        clock=clock, store_clock=store_clock, timing=timing, retry_policy=retry_policy, rng=rng
    )
    validate_payload_limit(payload_limit)
    driver = await open_driver_async(resolve_url(url), store_clock)
    return AsyncStore(
        driver,
        clock=clock,
        timing=timing,
        retry_policy=retry_policy,
        payload_limit=payload_limit,
        rng=rng,
    )
