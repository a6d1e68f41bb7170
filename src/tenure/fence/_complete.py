"""Complete a job and commit its effect in one transaction, when the effect lands in the
lease store's own SQLite or PostgreSQL database.

::

    with tenure.fence.complete_with(store, lease) as done:
        done.cursor.execute("INSERT INTO reports (id, body) VALUES (?, ?)", (n, body))
        done.result = {"report": n}

    async with tenure.fence.complete_with(async_store, lease) as done:   # tenure.aio
        await done.cursor.execute("INSERT INTO reports (id, body) VALUES (%s, %s)", ...)

One transaction on the store's database: it checks that ``lease`` still holds the job
(`LeaseLost` otherwise, before the block runs), runs the block's writes, then runs the
store's own conditional completion statement (the same SQL as `Store.complete`, judged by
the store's clock) and commits both, or neither: if the lease was lost meanwhile, the
writes are rolled back and `LeaseLost` is raised.

Retry-safe like `Store.complete`: when the job was already completed by this very lease
(a retry after an ambiguous failure), the block's writes are rolled back (the first
attempt's writes committed with that completion) and the guard succeeds;
``already_completed`` tells the block so, if it wants to skip work.

How it reaches the database: through the store's transaction seam
(`Store.sql_transaction`). SQLite, a connection of its own to the store's file (or
``conn=``, yours, checked to be that store); PostgreSQL, a connection borrowed from the
store's pool (or ``conn=``, a psycopg connection to the same database). Your tables are
wherever that connection sees them (SQLite: the same file; PostgreSQL: the connection's
``search_path``, tenure's own tables are in the store's schema).
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any, overload
from urllib.parse import urlsplit

from .._protocol import (
    Outcome,
    Status,
    check_lease,
    ended_by,
    hash_secret,
    is_repeat,
    lease_lost,
    settle_receipt,
)
from .._store import Store
from .._validate import encode_json
from ..aio import AsyncStore
from ..errors import InvalidArgument, LeaseLost, StoreUnavailable
from ..models import Lease
from ..stores.abc import AsyncTransaction, Transaction
from ._loss import refuse_if_lost

__all__ = ["AsyncCompletionGuard", "CompletionGuard", "complete_with"]

log = logging.getLogger("tenure")


class _Completion:
    """What both guards decide: the lease's checks and the answers' meaning, without I/O."""

    def __init__(self, lease: Lease, result: Any, payload_limit: int, kind: str) -> None:
        self.lease = lease
        self.result = result
        self.already_completed = False
        self.cursor: Any = None
        self._limit = payload_limit
        self._kind = kind
        self._secret_hash = hash_secret(lease.secret)
        self._receipt = settle_receipt(self._secret_hash, "complete")
        self._used = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.lease.token} {self._kind}>"

    def _start(self) -> None:
        if self._used:
            raise InvalidArgument("guard", "is single-use: call complete_with() again")
        self._used = True
        encode_json("result", self.result, self._limit)  # bad results fail before any I/O
        refuse_if_lost(self.lease.token)

    def _entry_refusal(self, found: Outcome) -> LeaseLost | None:
        """None when the block may run (``already_completed`` then says whether its writes
        will be kept); else the error to raise once the transaction is rolled back."""
        row, lease = found.row, self.lease
        if (
            row is not None
            and row.state == "leased"
            and row.owner == lease.owner
            and row.generation == lease.generation
            and row.secret_hash == self._secret_hash
            and row.lease_until is not None
            and row.lease_until > found.now
        ):
            return None
        # A repeat of a completion that took effect, whatever result it recorded: the
        # block's writes will be rolled back (the first attempt's committed with it).
        if ended_by("complete", row, lease.generation, self._receipt):
            self.already_completed = True
            return None
        return lease_lost("complete", lease, found, self._secret_hash)

    def _result_json(self) -> str | None:
        result = encode_json("result", self.result, self._limit)
        refuse_if_lost(self.lease.token)  # lost while the block ran: do not commit
        return result

    def _completion(self, result: str | None) -> tuple[str, str, int, str, str, str | None]:
        lease = self.lease
        return (
            lease.job_id,
            lease.owner,
            lease.generation,
            self._secret_hash,
            self._receipt,
            result,
        )

    def _completion_refusal(self, done: Outcome, result: str | None) -> LeaseLost | None:
        """After a completion statement that did not apply: None when it is a concurrent
        retry of ours that committed first, else the error to raise."""
        if is_repeat("complete", done.row, self.lease.generation, self._receipt, result):
            self.already_completed = True
            return None
        return lease_lost("complete", self.lease, done, self._secret_hash)

    def _commit_failed(self, error: StoreUnavailable) -> StoreUnavailable:
        cause = error.__cause__ or error
        return StoreUnavailable(
            f"complete_with: the commit of job {self.lease.job_id!r} failed ({cause}); "
            + (
                "it may or may not have taken effect: retry complete_with with the "
                "same lease (a completion that took effect is recognised)"
                if error.outcome_unknown
                else "nothing was committed"
            ),
            operation="complete",
            outcome_unknown=error.outcome_unknown,
        )

    def _committed(self) -> None:
        lease = self.lease
        log.info(
            "job completed with its effect",
            extra={"job_id": lease.job_id, "generation": lease.generation, "owner": lease.owner},
        )


class CompletionGuard(_Completion):
    """One complete-with-effect transaction of a `tenure.Store`; create it with
    `complete_with`.

    In the block: ``cursor`` (a cursor of the store database's transaction) for your
    writes, ``result`` (settable) for the job's result, ``already_completed`` (True when a
    retry finds the job completed by this very lease: your writes will be rolled back).
    Do not commit or roll back the connection in the block. Single-use.
    """

    def __init__(self, txn: Transaction, lease: Lease, result: Any, kind: str) -> None:
        super().__init__(lease, result, txn.payload_limit, kind)
        self._txn = txn
        self._open = False

    @property
    def conn(self) -> Any:
        """The connection the transaction runs on."""
        return self._txn.conn

    def __enter__(self) -> CompletionGuard:
        self._start()
        txn = self._txn.__enter__()
        try:
            refused = self._entry_refusal(txn.get(self.lease.job_id))
        except BaseException as exc:
            txn.__exit__(type(exc), exc, exc.__traceback__)
            raise
        if refused is not None:
            txn.__exit__(type(refused), refused, None)
            raise refused
        self.cursor, self._open = txn.cursor, True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._open, "__exit__ without a successful __enter__"
        self._open, self.cursor = False, None
        txn = self._txn
        try:
            if exc_type is not None or self.already_completed:
                txn.rollback()
            else:
                self._finish(txn)
        except BaseException as error:
            txn.__exit__(type(error), error, error.__traceback__)
            raise
        txn.__exit__(None, None, None)

    def _finish(self, txn: Transaction) -> None:
        result = self._result_json()
        done = txn.complete(*self._completion(result))
        if done.status != Status.APPLIED:
            txn.rollback()
            refused = self._completion_refusal(done, result)
            if refused is not None:
                raise refused
            return
        try:
            txn.commit()
        except StoreUnavailable as error:
            raise self._commit_failed(error) from error
        self._committed()


class AsyncCompletionGuard(_Completion):
    """`CompletionGuard` for a `tenure.aio.AsyncStore`, used with ``async with``; create
    it with `complete_with`. On PostgreSQL ``cursor`` is a psycopg ``AsyncCursor``
    (``await done.cursor.execute(...)``); on SQLite a sqlite3 cursor, whose calls block
    (the guard's own steps run in a worker thread)."""

    def __init__(self, txn: AsyncTransaction, lease: Lease, result: Any, kind: str) -> None:
        super().__init__(lease, result, txn.payload_limit, kind)
        self._txn = txn
        self._open = False

    @property
    def conn(self) -> Any:
        """The connection the transaction runs on."""
        return self._txn.conn

    async def __aenter__(self) -> AsyncCompletionGuard:
        self._start()
        txn = await self._txn.__aenter__()
        try:
            refused = self._entry_refusal(await txn.get(self.lease.job_id))
        except BaseException as exc:
            await txn.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if refused is not None:
            await txn.__aexit__(type(refused), refused, None)
            raise refused
        self.cursor, self._open = txn.cursor, True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._open, "__aexit__ without a successful __aenter__"
        self._open, self.cursor = False, None
        txn = self._txn
        try:
            if exc_type is not None or self.already_completed:
                await txn.rollback()
            else:
                await self._finish(txn)
        except BaseException as error:
            await txn.__aexit__(type(error), error, error.__traceback__)
            raise
        await txn.__aexit__(None, None, None)

    async def _finish(self, txn: AsyncTransaction) -> None:
        result = self._result_json()
        done = await txn.complete(*self._completion(result))
        if done.status != Status.APPLIED:
            await txn.rollback()
            refused = self._completion_refusal(done, result)
            if refused is not None:
                raise refused
            return
        try:
            await txn.commit()
        except StoreUnavailable as error:
            raise self._commit_failed(error) from error
        self._committed()


@overload
def complete_with(
    store: Store, lease: Lease, result: Any = None, *, conn: Any = None
) -> CompletionGuard: ...


@overload
def complete_with(
    store: AsyncStore, lease: Lease, result: Any = None, *, conn: Any = None
) -> AsyncCompletionGuard: ...


def complete_with(
    store: Store | AsyncStore, lease: Lease, result: Any = None, *, conn: Any = None
) -> CompletionGuard | AsyncCompletionGuard:
    """Run the block's writes and complete ``lease``'s job in one transaction of the store's
    own database (SQLite or PostgreSQL stores)::

        with tenure.fence.complete_with(store, lease, result) as done:
            done.cursor.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?", ...)

    With a `tenure.aio.AsyncStore` it is an ``async with`` block (`AsyncCompletionGuard`).

    Both commit, or neither: `LeaseLost` (before the block, or after it with the writes
    rolled back) when the lease no longer holds the job by the store's clock, or when the
    worker runtime marked it lost. Repeating a completion that took effect succeeds and
    changes nothing (``already_completed``). ``conn``: your own connection to the store's
    database (idle; sqlite3 or psycopg, ``AsyncConnection`` for an async store); by default
    the guard opens or borrows one.
    """
    kind = urlsplit(getattr(store, "url", "")).scheme
    if isinstance(store, Store):
        txn = store.sql_transaction("complete", conn=conn)
        return CompletionGuard(txn, check_lease(lease, store.store_id), result, kind)
    if isinstance(store, AsyncStore):
        atxn = store.sql_transaction("complete", conn=conn)
        return AsyncCompletionGuard(atxn, check_lease(lease, store.store_id), result, kind)
    raise InvalidArgument(
        "store",
        "must be a tenure.Store or tenure.aio.AsyncStore (from tenure.connect or "
        f"tenure.aio.connect) of a SQLite or PostgreSQL store, not {type(store).__name__}",
    )
