"""PostgreSQL driver, async (the source of truth: ``_driver.py`` is generated from this file).

Each operation is one statement (see ``sql/*.sql``) run in autocommit on a pooled
connection: its condition is evaluated by PostgreSQL against ``clock_timestamp()`` read
once inside the statement, so there is no read-then-write race and nothing to retry at
SERIALIZABLE. Each statement is prepared on a connection at its first use.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from ..._clock import Clock, checked_store_time
from ..._concurrency import pause_async, thread_lock_async, uncancellable_async
from ..._protocol import Completion, Outcome, Renewal
from ..._validate import MAX_GENERATION
from ...errors import StoreUnavailable
from ._bound import StatementBound
from ._common import (
    Answer,
    PostgresOptions,
    Statement,
    StoreIdentity,
    answers_of,
    closed_error,
    connection_is_stale,
    sql_set,
    sql_text,
    store_unavailable,
    validate_schema,
)
from ._connection_async import (
    AsyncReconnectingPool,
    Hot,
    holder_params,
    new_hot_async,
    pool_for_async,
    raw_cursor_async,
    unraced_async,
    usable_connection_async,
)
from ._control_async import AsyncPostgresControl
from ._jobs_async import AsyncJobsMixin
from ._migrate_async import prepare_schema_async
from ._params import claim_params, completion_params, renewal_params, take_claims
from ._schedules_async import AsyncPostgresSchedules
from ._stats_async import attempts_async, queue_stats_async
from ._transaction_async import AsyncPostgresTransaction

__all__ = ["AsyncPostgresDriver"]

log = logging.getLogger("tenure")
# How long a connection may stay out of the pool between operations (see _checkout).
_HOT_SECONDS = 30.0


class AsyncPostgresDriver(AsyncPostgresControl, AsyncJobsMixin, AsyncPostgresSchedules):
    """The store operations of `tenure.stores.abc.AsyncDriver` over PostgreSQL.

    Open one with `AsyncPostgresDriver.open` (from a URL, or around your own
    `psycopg_pool.AsyncConnectionPool`) and hand it to ``AsyncStore(driver)``.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        schema: str,
        store_id: str,
        identity: StoreIdentity,
        url: str,
        store_clock: Clock | None,
        owns_pool: bool,
        listen: bool,
        command_timeout: float = 30.0,
    ) -> None:
        self._pool = pool
        self._bound = StatementBound(command_timeout)  # see _bound.py
        self.schema = schema
        self.store_id = store_id
        self.url = url
        self._store_clock = store_clock
        self._owns_pool = owns_pool
        self._listen = listen
        self.identity = identity  # what tells this copy of the store from another
        self._sql = sql_set(schema, identity)
        self._listeners: list[AsyncConnection[Any]] = []
        self._waiters: set[AsyncConnection[Any]] = set()  # listeners of waits in progress
        self._hot: list[Hot] = []
        self._wanting = 0  # operations getting a connection right now
        self._demand = thread_lock_async()  # guards _wanting (the sync twin runs in threads)
        # A caller's pool may serve others too: tenure keeps none of its connections.
        self._hot_max = (pool.max_size or 1) if owns_pool else 0
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        pool: AsyncConnectionPool[Any] | None = None,
        schema: str | None = None,
        store_clock: Clock | None = None,
        auto_migrate: bool | None = None,
        listen: bool | None = None,
    ) -> AsyncPostgresDriver:
        """Connect by ``url`` (see `parse_postgres_url`), or use ``pool`` (yours: it is
        opened if needed and never closed by tenure). ``schema`` overrides the URL's.
        With ``auto_migrate`` (the default) a missing or older schema is created or
        upgraded; otherwise it must be current (run ``tenure migrate``)."""
        if (url is None) == (pool is None):
            raise TypeError("give either url or pool")
        options, pool, owns_pool = pool_for_async(url, pool, cls.configure)
        schema = options.schema if schema is None else validate_schema(schema)
        auto_migrate = options.auto_migrate if auto_migrate is None else auto_migrate
        listen = options.listen if listen is None else listen
        display_url = options.display_url
        if url is None or schema != options.schema:
            separator = "&" if "?" in display_url else "?"
            display_url = f"{display_url}{separator}schema={schema}"
        try:
            store_id, identity = await cls._open_store(
                pool, options, owns_pool, schema, auto_migrate
            )
        except BaseException as exc:
            if owns_pool:
                await pool.close()
            if isinstance(exc, psycopg.Error):
                error = store_unavailable("connect", exc, sent=False)
                if error is not None:
                    raise StoreUnavailable(
                        f"cannot open the PostgreSQL store {display_url}: {exc}",
                        operation="connect",
                        outcome_unknown=False,
                    ) from exc
            raise
        return cls(
            pool,
            schema=schema,
            store_id=store_id,
            identity=identity,
            url=display_url,
            store_clock=store_clock,
            owns_pool=owns_pool,
            listen=listen,
            command_timeout=options.command_timeout,
        )

    @classmethod
    async def _open_store(
        cls,
        pool: AsyncConnectionPool[Any],
        options: PostgresOptions,
        owns_pool: bool,
        schema: str,
        auto_migrate: bool,
    ) -> tuple[str, StoreIdentity]:
        """Open the pool and prepare the schema; the store's id and identity."""
        if owns_pool:
            # One direct connection first: a wrong password, a missing database or a
            # refused connection is reported at once, with libpq's own words (a pool
            # would keep retrying in the background until its timeout).
            first = await AsyncConnection.connect(
                options.conninfo, **{**options.kwargs, "autocommit": True}
            )
            try:
                opened = await prepare_schema_async(first, schema, auto_migrate)
            except BaseException:
                await first.close()
                raise
            await cast(AsyncReconnectingPool, pool).adopt(first)
            await pool.open(wait=True, timeout=max(options.pool_timeout, 1.0))
            return opened
        if pool.closed:
            await pool.open(wait=True, timeout=max(options.pool_timeout, 1.0))
        conn = await usable_connection_async(pool, "connect")
        try:
            opened = await prepare_schema_async(conn, schema, auto_migrate)
            if not conn.autocommit:
                await conn.commit()
        finally:
            await pool.putconn(conn)
        return opened

    @staticmethod
    async def configure(conn: AsyncConnection[Any]) -> None:
        """Session settings for a connection tenure uses: pass as ``configure=`` when you
        build the pool yourself (it changes the session: best use a pool for tenure alone)."""
        await conn.execute(sql_text("configure").encode())
        if not conn.autocommit:
            await conn.commit()

    # -- plumbing ----------------------------------------------------------------------

    def _now(self) -> float | None:
        # None: the server's clock decides. A store_clock is the conformance suite's hook:
        # its reading is checked before a statement writes it (a NaN lease end never ends).
        if self._store_clock is None:
            return None
        return checked_store_time(self._store_clock.time())

    async def _checkout(self, operation: str) -> Hot:
        """A connection (with a cursor) for one operation. Connections of a pool tenure
        built stay out of it between operations ("hot": a list pop and one dead-connection
        check instead of the pool's locks and bookkeeping), for at most _HOT_SECONDS; the
        pool still bounds how many there are, and gets them back when one is found dead,
        is old, or is not needed."""
        if self._closed:
            raise closed_error(operation)
        # The usual case first, without counting this operation as wanting a connection:
        # it takes one at once.
        try:
            hot = self._hot.pop()
        except IndexError:
            pass
        else:
            if not connection_is_stale(hot.conn, hot.poller):
                return hot
            await hot.conn.close()
            await self._pool.putconn(hot.conn)
        with self._demand:
            self._wanting += 1
        try:
            while True:
                try:
                    hot = self._hot.pop()
                except IndexError:
                    break
                if not connection_is_stale(hot.conn, hot.poller):
                    return hot
                await hot.conn.close()
                await self._pool.putconn(hot.conn)
            conn = await usable_connection_async(self._pool, operation)
        finally:
            with self._demand:
                self._wanting -= 1
        return new_hot_async(conn)

    async def _checkin(self, hot: Hot) -> None:
        # While another operation wants a connection, this one goes back to the pool, which
        # hands it to the one waiting there: kept aside, it would leave that one waiting.
        if (
            len(self._hot) < self._hot_max
            and not self._wanting
            and not self._closed
            and not hot.conn.closed
            and time.monotonic() - hot.since < _HOT_SECONDS
        ):
            self._hot.append(hot)
        else:
            await self._pool.putconn(hot.conn)

    async def _rows(
        self, operation: str, statement: Statement, params: dict[str, Any]
    ) -> list[Answer]:
        if self._bound.owed and operation != "confirm_replication":
            await self._rows("confirm_replication", self._sql["confirm_replication"], {})
        hot = await self._checkout(operation)
        ticket = self._bound.arm(hot.conn.pgconn, hot.unreplicated)
        try:
            # Prepared at first use (psycopg's default waits for five): each statement is
            # used again and again, and a short-lived worker would pay for planning the
            # first five times. Not when the pool's owner turned preparing off (PgBouncer
            # before 1.21): None leaves it to the connection's prepare_threshold.
            prepare = True if hot.conn.prepare_threshold is not None else None
            await hot.cursor.execute(statement.text, statement.args(params), prepare=prepare)
            rows = answers_of(statement.text, hot.cursor, await hot.cursor.fetchall())
            if not hot.conn.autocommit:
                await hot.conn.commit()
            # A synchronous-replication wait that ended unconfirmed: not a success.
            self._bound.check(operation, hot.unreplicated)
            return rows
        except psycopg.Error as exc:
            await hot.conn.close()  # its state is unknown: the pool replaces it
            error = store_unavailable(operation, exc, sent=True)
            if error is None:
                raise
            raise error from exc
        finally:
            self._bound.disarm(ticket)
            await self._checkin(hot)

    async def _one(self, operation: str, params: dict[str, Any]) -> Outcome:
        """Run a single-job statement. When it did not apply only because a concurrent
        writer changed the job after the statement's snapshot (the row reports ``raced``),
        run it again: the answer must describe the job as it is, not a version that is gone
        (e.g. a retried complete whose first try was still committing). ``params``: a
        fresh dict, which this completes with the store time."""
        statement = self._sql[operation]

        async def run() -> Answer:
            params["now"] = self._now()
            return (await self._rows(operation, statement, params))[0]

        return await unraced_async(run)

    # -- operations --------------------------------------------------------------------

    async def now(self) -> float:
        rows = await self._rows("now", self._sql["clock"], {"now": self._now()})
        return rows[0].outcome.now

    async def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome:
        params = {
            "job_id": job_id,
            "owner": owner,
            "ttl": ttl,
            "secret_hash": secret_hash,
            "max_generation": MAX_GENERATION,
        }
        return await self._one("claim", params)

    async def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        return await self._claim_rest(owner, ttl, queues, list(secret_hashes), [])

    async def _claim_rest(
        self,
        owner: str,
        ttl: float,
        queues: Sequence[str],
        wanted: list[str],
        claimed: list[Outcome],
    ) -> list[Outcome]:
        """Claim ``len(wanted)`` more jobs (one per secret hash), adding them to
        ``claimed``."""
        while wanted:
            params = claim_params(owner, ttl, queues, wanted, self._now())
            rows = await self._rows("claim_next", self._sql["claim_next"], params)
            wanted = take_claims(rows, wanted, claimed)
        return claimed

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome:
        return await self._one(
            "renew", holder_params(job_id, owner, generation, secret_hash, ttl=ttl)
        )

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[Outcome]:
        """All in one statement (``renew_many.sql``), answers in input order."""
        if not renewals:
            return []
        params = renewal_params(renewals, self._now())
        rows = await self._rows("renew_many", self._sql["renew_many"], params)
        return await self._unraced_batch(rows, lambda index: self.renew(*renewals[index]))

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        params = holder_params(
            job_id, owner, generation, secret_hash, receipt=receipt, result=result
        )
        return await self._one("complete", params)

    async def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        """All in one statement (``complete_many.sql``), answers in input order."""
        params = completion_params(completions, self._now())
        rows = await self._rows("complete_many", self._sql["complete_many"], params)
        return await self._complete_raced(completions, rows)

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        """One statement (``complete_and_claim.sql``): `complete_many` and `claim_next`'s
        first statements in one, their rare second rounds (raced completions, buried jobs)
        as they run them."""
        wanted = list(secret_hashes)
        params = {
            **completion_params(completions, self._now()),
            **claim_params(owner, ttl, queues, wanted, self._now()),
        }
        rows = await self._rows("complete_and_claim", self._sql["complete_and_claim"], params)
        count = len(completions)
        answers = await self._complete_raced(completions, rows[:count])
        claimed: list[Outcome] = []
        wanted = take_claims(rows[count:], wanted, claimed)
        return answers, await self._claim_rest(owner, ttl, queues, wanted, claimed)

    async def _complete_raced(
        self, completions: Sequence[Completion], rows: list[Answer]
    ) -> list[Outcome]:
        """The outcomes of a batch completion's answer ``rows`` (see `_unraced_batch`)."""
        return await self._unraced_batch(rows, lambda index: self.complete(*completions[index]))

    async def _unraced_batch(
        self, rows: list[Answer], one: Callable[[int], Awaitable[Outcome]]
    ) -> list[Outcome]:
        """The outcomes of a batch statement's answer ``rows`` (one per item, in order).
        Each item that raced (see `_one`) runs again on its own, as the single-job statement
        (``one(index)``): its update finds the job by primary key and rechecks the lease
        condition on the job's newest version, where the batch's update, which reaches rows
        by the address its snapshot saw (sql/_held.sql), can only tell that the row changed.
        So a batch racing other writers of its jobs (another renewal of the same lease, say)
        settles each such item as the single call would, in one more round trip each."""
        answers = [row.outcome for row in rows]
        for index, row in enumerate(rows):
            if row.raced:
                answers[index] = await one(index)
        return answers

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome:
        params = holder_params(job_id, owner, generation, secret_hash, receipt=receipt)
        return await self._one("release", params)

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
        params = holder_params(
            job_id, owner, generation, secret_hash, receipt=receipt, error=error, retry_in=retry_in
        )
        return await self._one("fail", params)

    async def find_leases(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        params = {
            "owner": owner,
            "ttl": ttl,
            "queues": list(queues),
            "secret_hashes": list(secret_hashes),
            "now": self._now(),
        }
        rows = await self._rows("find_leases", self._sql["find_leases"], params)
        return [row.outcome for row in rows]

    async def get(self, job_id: str) -> Outcome:
        rows = await self._rows("get", self._sql["get"], {"job_id": job_id, "now": self._now()})
        return rows[0].outcome

    async def attempts(self, job_id: str) -> list[tuple[Any, ...]]:
        """The job's attempts, oldest first (``_stats_async.py``)."""
        if self._closed:
            raise closed_error("attempts")
        return await attempts_async(self._pool, self._sql["attempts"], job_id)

    async def queue_stats(self) -> tuple[float, list[tuple[Any, ...]]]:
        """The live jobs of each queue (see `tenure._queue_stats`): one statement over the
        partial index of claimable jobs (``_stats_async.py``)."""
        if self._closed:
            raise closed_error("queue_stats")
        return await queue_stats_async(self._pool, self._sql["queue_stats"], self._now())

    async def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if not self._listen:
            await self._poll(queues, deadline)
            return
        conn = await self._listener()
        reusable = False
        self._waiters.add(conn)
        # The statements are shielded from cancellation and only the wait for a notification
        # is not: a worker cancels an idle wait whenever it has a reason to look again, and
        # a cancel landing in a statement makes psycopg close the connection (anyio delivers
        # it again inside psycopg's own cleanup), which cost a new connection per wake-up.
        # The statement bound still cancels them in the server past the command timeout.
        try:
            cur = raw_cursor_async(conn)
            params = {"queues": list(queues), "max_generation": MAX_GENERATION, "now": self._now()}
            next_due = self._sql["next_due"]
            with uncancellable_async(), self._bounded(conn):
                # Notifications that reached this connection after an earlier wait on it was
                # woken, before its UNLISTEN, wait in psycopg's backlog: the look below
                # covers them, and left there they would end this wait at once.
                async for _stale in conn.notifies(timeout=0):
                    pass
                # LISTEN first, then look: a job submitted in between is seen by one or the
                # other.
                await cur.execute(self._sql["listen"].text)
                await cur.execute(next_due.text, next_due.args(params))
                found = await cur.fetchone()
            deadline = self._due_deadline(found, deadline)
            wanted = set(queues)
            woken = False
            try:
                while not (woken or self._closed) and (left := deadline - time.monotonic()) > 0:
                    async for notify in conn.notifies(timeout=left, stop_after=1):
                        woken = woken or notify.payload in wanted
            finally:
                with uncancellable_async(), self._bounded(conn):
                    await cur.execute(self._sql["unlisten"].text)
                    reusable = True
        except psycopg.Error as exc:
            error = store_unavailable("wait_for_jobs", exc, sent=False)
            if error is None:
                raise
            raise error from exc
        finally:
            self._waiters.discard(conn)
            if reusable and not self._closed:
                self._listeners.append(conn)
            else:
                await conn.close()

    @contextmanager
    def _bounded(self, conn: AsyncConnection[Any]) -> Iterator[None]:
        """The statement bound (_bound.py) over statements sent on ``conn`` directly."""
        ticket = self._bound.arm(conn.pgconn, [])
        try:
            yield
        finally:
            self._bound.disarm(ticket)

    async def _poll(self, queues: Sequence[str], deadline: float) -> None:
        # Without LISTEN (e.g. behind PgBouncer in transaction mode): sleep until the next
        # job falls due or the timeout, whichever is first. A sleep here is the wait itself.
        params = {"queues": list(queues), "max_generation": MAX_GENERATION, "now": self._now()}
        rows = await self._rows("wait_for_jobs", self._sql["next_due"], params)
        deadline = self._due_deadline(rows[0], deadline)
        while not self._closed and (remaining := deadline - time.monotonic()) > 0:
            await pause_async(min(remaining, 0.05))

    @staticmethod
    def _due_deadline(found: Answer | None, deadline: float) -> float:
        if found is None or found.due is None:
            return deadline
        return min(deadline, time.monotonic() + max(0.0, found.due - found.outcome.now))

    async def _listener(self) -> AsyncConnection[Any]:
        # Each concurrent waiter has its own connection outside the pool (a waiter must
        # never hold a pooled connection that renewals need). Kept for reuse, not listening.
        if self._closed:
            raise closed_error("wait_for_jobs")
        while self._listeners:
            conn = self._listeners.pop()
            if not connection_is_stale(conn):
                return conn
            await conn.close()
        try:
            conninfo: Any = self._pool.conninfo
            kwargs: Any = self._pool.kwargs
            # psycopg_pool also accepts callables (possibly async) for both.
            if callable(conninfo):
                conninfo = conninfo()
                if inspect.isawaitable(conninfo):
                    conninfo = await conninfo
            if callable(kwargs):
                kwargs = kwargs()
                if inspect.isawaitable(kwargs):
                    kwargs = await kwargs
            return await AsyncConnection.connect(conninfo, **{**(kwargs or {}), "autocommit": True})
        except psycopg.Error as exc:
            error = store_unavailable("wait_for_jobs", exc, sent=False)
            if error is None:
                raise
            raise error from exc

    async def _wake_waiters(self) -> None:
        try:
            async with self._pool.connection(timeout=1.0) as conn:
                await conn.execute(self._sql["wake"].text)
        except psycopg.Error:
            pass  # they end at their timeout instead

    def transaction(
        self, operation: str, conn: AsyncConnection[Any] | None, payload_limit: int
    ) -> AsyncPostgresTransaction:
        """See `tenure.stores.abc.AsyncSQLDriver.transaction`: a connection borrowed
        from the pool, or ``conn``, the caller's psycopg connection to the store's database
        (idle; autocommit or not)."""
        return AsyncPostgresTransaction(
            self._pool, self._sql, self._now, self.store_id, operation, conn, payload_limit
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._bound.close()
        while self._hot:
            await self._pool.putconn(self._hot.pop().conn)
        if self._waiters:
            await self._wake_waiters()
        while self._listeners:
            await self._listeners.pop().close()
        if self._owns_pool:
            await self._pool.close()
