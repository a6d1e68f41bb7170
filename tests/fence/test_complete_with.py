"""`tenure.fence.complete_with`: the effect and the job's completion in one transaction of
the lease store's own database (SQLite and PostgreSQL stores, with the store clock hook)."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import tenure
from tenure import fence
from tests.fence._complete_env import TTL, Env, claimed


def test_the_effect_and_the_completion_commit_together(env: Env) -> None:
    lease = claimed(env)
    with fence.complete_with(env.store, lease) as done:
        assert not done.already_completed
        env.insert(done.cursor, "report by A")
        done.result = {"rows": 1}
    job = env.store.get("job-1")
    assert (job.state, job.result, job.generation) == ("done", {"rows": 1}, 1)
    assert env.rows() == ["report by A"]


def test_a_stale_lease_is_refused_before_the_block_runs(env: Env) -> None:
    a = claimed(env)
    env.clock.advance(TTL + 1)
    b = env.store.claim("job-1", "B", TTL)
    assert b is not None
    ran = False
    with pytest.raises(tenure.LeaseLost) as caught, fence.complete_with(env.store, a):
        ran = True
    assert not ran
    assert (caught.value.current_generation, caught.value.current_owner) == (2, "B")
    assert env.store.get("job-1").state == "leased"
    assert env.rows() == []


def test_a_lease_lost_during_the_block_rolls_the_writes_back(env: Env) -> None:
    a = claimed(env)
    other = env.connect()
    taken: list[tenure.Lease | None] = []
    with pytest.raises(tenure.LeaseLost), fence.complete_with(env.store, a) as done:  # noqa: PT012
        env.insert(done.cursor, "late report by A")
        env.clock.advance(TTL + 1)  # A stalls past its lease in the middle of its work...
        thief = threading.Thread(target=lambda: taken.append(other.claim("job-1", "B", TTL)))
        thief.start()  # ...and B claims the job (SQLite: B waits for A's transaction)
        thief.join(timeout=0.5)
    thief.join(timeout=30)
    assert env.rows() == []  # A's write did not commit
    job = env.store.get("job-1")
    assert taken
    assert taken[0] is not None
    assert (job.state, job.owner, job.generation) == ("leased", "B", 2)


def test_an_error_in_the_block_rolls_back_both(env: Env) -> None:
    lease = claimed(env)
    with pytest.raises(RuntimeError), fence.complete_with(env.store, lease) as done:  # noqa: PT012
        env.insert(done.cursor, "half")
        raise RuntimeError("boom")
    assert env.store.get("job-1").state == "leased"
    assert env.rows() == []
    with fence.complete_with(env.store, lease, {"ok": True}) as done:
        env.insert(done.cursor, "whole")
    assert env.rows() == ["whole"]


def test_a_retry_after_success_changes_nothing(env: Env) -> None:
    lease = claimed(env)
    with fence.complete_with(env.store, lease, "r") as done:
        env.insert(done.cursor, "once")
    with fence.complete_with(env.store, lease, "r") as again:
        assert again.already_completed
        env.insert(again.cursor, "twice")  # rolled back: the first attempt's write stands
    env.store.complete(lease, "r")  # the plain API agrees it is done by this lease
    assert env.rows() == ["once"]
    assert env.store.get("job-1").result == "r"


def test_bad_arguments_are_refused_before_any_io(env: Env, tmp_path: Path) -> None:
    lease = claimed(env)
    with pytest.raises(tenure.InvalidArgument, match="store"):
        fence.complete_with(object(), lease)
    with pytest.raises(tenure.InvalidArgument, match="lease"):
        fence.complete_with(env.store, lease.token)  # type: ignore[arg-type]
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    with tenure.connect(other_url) as other:
        other.submit("x")
        foreign = other.claim("x", "A", TTL)
        assert foreign is not None
        with pytest.raises(tenure.InvalidArgument, match="another store"):
            fence.complete_with(env.store, foreign)
        expected = "not connected to this store" if env.backend == "sqlite" else "psycopg"
        wrong = sqlite3.connect(tmp_path / "other.db")
        with pytest.raises(tenure.InvalidArgument, match=expected):
            fence.complete_with(env.store, lease, conn=wrong).__enter__()
        wrong.close()
    with (
        pytest.raises(tenure.InvalidArgument, match="result"),
        fence.complete_with(env.store, lease, {1, 2}),
    ):
        pass
    assert env.store.get("job-1").state == "leased"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl", float("nan")),
        ("ttl", float("inf")),
        ("generation", 0),
        ("generation", 2**64),
        ("secret", None),
        ("secret", b"0" * 48),
        ("job_id", "job-1\x00"),
        ("owner", "A\x00"),
        ("attempt", "1"),
    ],
)
def test_every_lease_field_is_checked_before_any_io(env: Env, field: str, value: Any) -> None:
    """complete_with checks a lease by the same rules as the store's own operations."""
    lease = claimed(env)
    with pytest.raises(tenure.InvalidArgument) as caught:
        fence.complete_with(env.store, dataclasses.replace(lease, **{field: value}))
    assert caught.value.argument == f"lease.{field}"
    assert env.store.get("job-1").state == "leased"


def test_an_edited_lease_is_refused_by_the_store(env: Env) -> None:
    lease = claimed(env)
    edited = dataclasses.replace(lease, generation=lease.generation + 1)
    with pytest.raises(tenure.LeaseLost), fence.complete_with(env.store, edited) as done:
        env.insert(done.cursor, "never")
    assert env.store.get("job-1").state == "leased"
    with fence.complete_with(env.store, lease) as done:
        env.insert(done.cursor, "mine")
    assert env.store.get("job-1").state == "done"


def test_your_own_connection(env: Env) -> None:
    lease = claimed(env)
    if env.backend == "sqlite":
        conn: Any = sqlite3.connect(urlsplit(env.url).path[1:])
    else:
        import psycopg

        from tests.backends import POSTGRES_URL

        conn = psycopg.connect(POSTGRES_URL)
    try:
        with fence.complete_with(env.store, lease, conn=conn) as done:
            assert done.conn is conn
            env.insert(done.cursor, "mine")
    finally:
        conn.close()
    assert env.rows() == ["mine"]
    assert env.store.get("job-1").state == "done"
