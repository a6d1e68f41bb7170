"""`tenure.fence.complete_with` on a `tenure.aio.AsyncStore` (``async with``): the tests of
test_complete_with.py, on SQLite and PostgreSQL (psycopg ``AsyncConnection``), on asyncio
and on trio (where PostgreSQL's async store runs its sync driver on worker threads, as
SQLite's does: its cursor is psycopg's blocking one, and ``conn=`` a sync connection)."""

from __future__ import annotations

import dataclasses
import inspect
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import tenure
import tenure.aio
from tenure import fence
from tests.backends import POSTGRES, SQLITE, Backend
from tests.fence._complete_env import TTL, Env, create_table

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@dataclass
class AsyncEnv:
    sync: Env  # the same store through the sync API, for setup and checks
    store: tenure.aio.AsyncStore

    async def insert(self, cur: Any, value: str) -> None:
        done = self.sync.insert(cur, value)
        if inspect.isawaitable(done):  # a psycopg AsyncCursor
            await done


@pytest.fixture(params=[SQLITE, POSTGRES], ids=str)
async def aenv(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEnv]:
    backend: Backend = request.param
    clock = tenure.ManualClock()
    async with AsyncExitStack() as stack:
        url = stack.enter_context(backend.isolated_url(tmp_path))
        store = stack.enter_context(tenure.connect(url, clock=clock, store_clock=clock))
        env = Env(url, clock, store, stack, backend.name)
        create_table(env)
        astore = await tenure.aio.connect(url, clock=clock, store_clock=clock)
        stack.push_async_callback(astore.close)
        yield AsyncEnv(env, astore)


async def claimed(env: AsyncEnv, job: str = "job-1", owner: str = "A") -> tenure.Lease:
    await env.store.submit(job)
    lease = await env.store.claim(job, owner, TTL)
    assert lease is not None
    return lease


async def test_the_effect_and_the_completion_commit_together(aenv: AsyncEnv) -> None:
    lease = await claimed(aenv)
    async with fence.complete_with(aenv.store, lease) as done:
        assert isinstance(done, fence.AsyncCompletionGuard)
        assert not done.already_completed
        await aenv.insert(done.cursor, "report by A")
        done.result = {"rows": 1}
    job = await aenv.store.get("job-1")
    assert (job.state, job.result, job.generation) == ("done", {"rows": 1}, 1)
    assert aenv.sync.rows() == ["report by A"]


async def test_a_stale_lease_is_refused_before_the_block_runs(aenv: AsyncEnv) -> None:
    a = await claimed(aenv)
    aenv.sync.clock.advance(TTL + 1)
    b = await aenv.store.claim("job-1", "B", TTL)
    assert b is not None
    ran = False
    with pytest.raises(tenure.LeaseLost) as caught:
        async with fence.complete_with(aenv.store, a):
            ran = True
    assert not ran
    assert (caught.value.current_generation, caught.value.current_owner) == (2, "B")
    assert (await aenv.store.get("job-1")).state == "leased"
    assert aenv.sync.rows() == []


async def test_a_lease_lost_during_the_block_rolls_the_writes_back(aenv: AsyncEnv) -> None:
    a = await claimed(aenv)
    other = aenv.sync.connect()
    taken: list[tenure.Lease | None] = []
    with pytest.raises(tenure.LeaseLost):  # noqa: PT012
        async with fence.complete_with(aenv.store, a) as done:
            await aenv.insert(done.cursor, "late report by A")
            aenv.sync.clock.advance(TTL + 1)  # A stalls past its lease mid-work...
            thief = threading.Thread(target=lambda: taken.append(other.claim("job-1", "B", TTL)))
            thief.start()  # ...and B claims the job (SQLite: B waits for A's transaction)
            thief.join(timeout=0.5)
    thief.join(timeout=30)
    assert aenv.sync.rows() == []  # A's write did not commit
    job = await aenv.store.get("job-1")
    assert taken
    assert taken[0] is not None
    assert (job.state, job.owner, job.generation) == ("leased", "B", 2)


async def test_an_error_in_the_block_rolls_back_both(aenv: AsyncEnv) -> None:
    lease = await claimed(aenv)
    with pytest.raises(RuntimeError):  # noqa: PT012
        async with fence.complete_with(aenv.store, lease) as done:
            await aenv.insert(done.cursor, "half")
            raise RuntimeError("boom")
    assert (await aenv.store.get("job-1")).state == "leased"
    assert aenv.sync.rows() == []
    async with fence.complete_with(aenv.store, lease, {"ok": True}) as done:
        await aenv.insert(done.cursor, "whole")
    assert aenv.sync.rows() == ["whole"]


async def test_a_retry_after_success_changes_nothing(aenv: AsyncEnv) -> None:
    lease = await claimed(aenv)
    async with fence.complete_with(aenv.store, lease, "r") as done:
        await aenv.insert(done.cursor, "once")
    async with fence.complete_with(aenv.store, lease, "r") as again:
        assert again.already_completed
        await aenv.insert(again.cursor, "twice")  # rolled back: the first attempt's stands
    await aenv.store.complete(lease, "r")  # the plain API agrees it is done by this lease
    assert aenv.sync.rows() == ["once"]
    assert (await aenv.store.get("job-1")).result == "r"


async def test_bad_arguments_are_refused_before_any_io(aenv: AsyncEnv, tmp_path: Path) -> None:
    lease = await claimed(aenv)
    with pytest.raises(tenure.InvalidArgument, match="store"):
        fence.complete_with(object(), lease)  # type: ignore[call-overload]
    with pytest.raises(tenure.InvalidArgument, match="lease"):
        fence.complete_with(aenv.store, lease.token)  # type: ignore[arg-type]
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    async with await tenure.aio.connect(other_url) as other:
        await other.submit("x")
        foreign = await other.claim("x", "A", TTL)
        assert foreign is not None
        with pytest.raises(tenure.InvalidArgument, match="another store"):
            fence.complete_with(aenv.store, foreign)
        expected = "not connected to this store" if aenv.sync.backend == "sqlite" else "psycopg"
        wrong = sqlite3.connect(tmp_path / "other.db", check_same_thread=False)
        with pytest.raises(tenure.InvalidArgument, match=expected):
            await fence.complete_with(aenv.store, lease, conn=wrong).__aenter__()
        wrong.close()
    with pytest.raises(tenure.InvalidArgument, match="result"):
        async with fence.complete_with(aenv.store, lease, {1, 2}):
            pass
    assert (await aenv.store.get("job-1")).state == "leased"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl", float("nan")),
        ("generation", 0),
        ("generation", 2**64),
        ("secret", None),
        ("job_id", "job-1\x00"),
        ("attempt", "1"),
    ],
)
async def test_every_lease_field_is_checked_before_any_io(
    aenv: AsyncEnv, field: str, value: Any
) -> None:
    lease = await claimed(aenv)
    with pytest.raises(tenure.InvalidArgument) as caught:
        fence.complete_with(aenv.store, dataclasses.replace(lease, **{field: value}))
    assert caught.value.argument == f"lease.{field}"
    assert (await aenv.store.get("job-1")).state == "leased"


async def test_an_edited_lease_is_refused_by_the_store(aenv: AsyncEnv) -> None:
    lease = await claimed(aenv)
    edited = dataclasses.replace(lease, generation=lease.generation + 1)
    with pytest.raises(tenure.LeaseLost):
        async with fence.complete_with(aenv.store, edited) as done:
            await aenv.insert(done.cursor, "never")
    assert (await aenv.store.get("job-1")).state == "leased"
    async with fence.complete_with(aenv.store, lease) as done:
        await aenv.insert(done.cursor, "mine")
    assert (await aenv.store.get("job-1")).state == "done"


async def test_your_own_connection(aenv: AsyncEnv, anyio_backend: str) -> None:
    lease = await claimed(aenv)
    if aenv.sync.backend == "sqlite":
        # The guard's steps run in a worker thread: the connection must allow that.
        conn: Any = sqlite3.connect(urlsplit(aenv.sync.url).path[1:], check_same_thread=False)
    else:
        import psycopg

        from tests.backends import POSTGRES_URL

        if anyio_backend == "trio":  # psycopg's async connections run on asyncio only
            conn = psycopg.connect(POSTGRES_URL)
        else:
            conn = await psycopg.AsyncConnection.connect(POSTGRES_URL)
    try:
        async with fence.complete_with(aenv.store, lease, conn=conn) as done:
            assert done.conn is conn
            await aenv.insert(done.cursor, "mine")
    finally:
        closed = conn.close()
        if inspect.isawaitable(closed):
            await closed
    assert aenv.sync.rows() == ["mine"]
    assert (await aenv.store.get("job-1")).state == "done"


async def test_a_connection_of_the_wrong_kind_is_refused(
    aenv: AsyncEnv, anyio_backend: str
) -> None:
    import psycopg

    from tests.backends import POSTGRES_URL

    lease = await claimed(aenv)
    if aenv.sync.backend == "postgres" and anyio_backend == "trio":
        # On trio a PostgreSQL store's steps run on threads: it needs a sync Connection.
        wrong: Any = sqlite3.connect(":memory:")
        expected = "must be a psycopg Connection"
    else:
        # A sync psycopg connection: an async PostgreSQL store needs an AsyncConnection.
        wrong = psycopg.connect(POSTGRES_URL)
        expected = "sqlite3 connection" if aenv.sync.backend == "sqlite" else "AsyncConnection"
    with wrong, pytest.raises(tenure.InvalidArgument, match=expected):
        fence.complete_with(aenv.store, lease, conn=wrong)
    assert (await aenv.store.get("job-1")).state == "leased"
