"""The store's transaction seam (`Store.sql_transaction`, `AsyncStore.sql_transaction`), on
which `complete_with` is built: the store's statements in a transaction the caller's
statements share, by the store's clock; Redis has none."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
import tenure.aio
from tenure._protocol import Status, hash_secret, settle_receipt
from tests.backends import REDIS, Backend
from tests.fence._complete_env import TTL, Env, claimed

T0 = tenure.ManualClock().time()


def completion(lease: tenure.Lease, result: str | None = None) -> tuple[Any, ...]:
    secret_hash = hash_secret(lease.secret)
    receipt = settle_receipt(secret_hash, "complete")
    return (lease.job_id, lease.owner, lease.generation, secret_hash, receipt, result)


def test_leaving_the_block_commits_both(env: Env) -> None:
    lease = claimed(env)
    with env.store.sql_transaction("complete") as txn:
        assert txn.payload_limit == env.store._payload_limit
        assert txn.now() == T0  # the store's clock (here the test hook's)
        before = txn.get("job-1")
        assert (before.status, before.row and before.row.state) == (Status.APPLIED, "leased")
        assert txn.get("nobody").status == Status.MISSING
        env.insert(txn.cursor, "effect")
        done = txn.complete(*completion(lease, '"r"'))
        assert (done.status, done.row and done.row.state) == (Status.APPLIED, "done")
    assert env.rows() == ["effect"]
    assert (env.store.get("job-1").state, env.store.get("job-1").result) == ("done", "r")


def test_an_exception_rolls_both_back(env: Env) -> None:
    lease = claimed(env)
    with pytest.raises(RuntimeError), env.store.sql_transaction("complete") as txn:  # noqa: PT012
        env.insert(txn.cursor, "effect")
        assert txn.complete(*completion(lease)).status == Status.APPLIED
        raise RuntimeError("boom")
    assert env.rows() == []
    assert env.store.get("job-1").state == "leased"


def test_a_stale_completion_is_answered_not_judged(env: Env) -> None:
    lease = claimed(env)
    env.clock.advance(TTL + 1)
    with env.store.sql_transaction("complete") as txn:
        missed = txn.complete(*completion(lease))
        txn.rollback()
    assert missed.status == Status.MISSED  # what the store did; the caller decides
    assert missed.row is not None
    assert missed.row.state == "leased"
    assert env.store.get("job-1").state == "leased"


@pytest.mark.parametrize("operation", [42, None, "", "x" * 101, "line\nbreak"])
def test_the_operation_is_named_by_a_short_printable_str(env: Env, operation: object) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        env.store.sql_transaction(operation)  # type: ignore[arg-type]
    assert caught.value.argument == "operation"


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    backend: Backend = REDIS
    with backend.isolated_url(tmp_path) as url:
        yield url


def test_redis_has_no_transaction_to_share(redis_url: str) -> None:
    with tenure.connect(redis_url) as store:
        with pytest.raises(tenure.InvalidArgument, match="is a redis store") as caught:
            store.sql_transaction("complete")
        assert caught.value.argument == "store"
        assert "store.complete" in str(caught.value)
        store.submit("J")
        lease = store.claim("J", "A", TTL)
        assert lease is not None
        with pytest.raises(tenure.InvalidArgument, match="SQLite or PostgreSQL"):
            tenure.fence.complete_with(store, lease)
        assert store.get("J").state == "leased"


@pytest.mark.anyio
async def test_redis_has_no_transaction_to_share_async(redis_url: str) -> None:
    async with await tenure.aio.connect(redis_url) as store:
        with pytest.raises(tenure.InvalidArgument, match="is a redis store"):
            store.sql_transaction("complete")
        await store.submit("J")
        lease = await store.claim("J", "A", TTL)
        assert lease is not None
        with pytest.raises(tenure.InvalidArgument, match="SQLite or PostgreSQL"):
            tenure.fence.complete_with(store, lease)


def test_an_in_memory_sqlite_store_cannot_share_its_database() -> None:
    with (
        tenure.connect("sqlite:///:memory:") as store,
        pytest.raises(tenure.InvalidArgument, match="in-memory"),
    ):
        store.sql_transaction("complete")


@pytest.mark.anyio
async def test_the_async_seam_commits_both(env: Env) -> None:
    lease = claimed(env)
    async with (
        await tenure.aio.connect(env.url, clock=env.clock, store_clock=env.clock) as store,
        store.sql_transaction("complete") as txn,
    ):
        assert await txn.now() == T0
        inserted = env.insert(txn.cursor, "effect")
        if inspect.isawaitable(inserted):
            await inserted
        done = await txn.complete(*completion(lease))
        assert done.status == Status.APPLIED
    assert env.rows() == ["effect"]
    assert env.store.get("job-1").state == "done"
