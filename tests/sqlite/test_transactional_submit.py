"""Issue #17: submit inside the caller's own sqlite3 transaction, on the store's file: the
job exists if and only if that transaction commits."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import tenure
import tenure.aio


def _path(url: str) -> str:
    return urlsplit(url).path[1:]


def _exists(store: tenure.Store, job_id: str) -> bool:
    try:
        store.get(job_id)
    except tenure.JobNotFound:
        return False
    return True


@pytest.fixture
def conn(store: tenure.Store, url: str) -> sqlite3.Connection:
    db = sqlite3.connect(_path(url), timeout=10)  # sqlite3's default (implicit) mode
    db.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)")
    db.commit()
    return db


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_a_job_exists_iff_the_transaction_commits(
    store: tenure.Store, conn: sqlite3.Connection, outcome: str
) -> None:
    conn.execute("INSERT INTO orders VALUES ('o1')")
    assert store.submit("mail-o1", {"order": "o1"}, conn=conn).created
    assert [j.created for j in store.submit_many([{"job_id": "bill-o1"}], conn=conn)] == [True]
    assert conn.in_transaction
    getattr(conn, outcome)()
    committed = outcome == "commit"
    assert (conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 1) is committed
    assert _exists(store, "mail-o1") is committed
    assert _exists(store, "bill-o1") is committed
    conn.close()


def test_submit_first_then_the_business_write(
    store: tenure.Store, conn: sqlite3.Connection
) -> None:
    # The submit begins the transaction (as any write would): the caller still decides.
    store.submit("early", conn=conn)
    conn.execute("INSERT INTO orders VALUES ('o2')")
    conn.rollback()
    assert not _exists(store, "early")
    conn.close()


def test_an_autocommit_connection_commits_the_batch_at_once(store: tenure.Store, url: str) -> None:
    db = sqlite3.connect(_path(url), isolation_level=None)
    store.submit_many([{"job_id": "a"}, {"job_id": "b"}], conn=db)
    assert not db.in_transaction
    assert _exists(store, "a")
    db.execute("BEGIN")
    store.submit("c", conn=db)  # inside the caller's explicit transaction: a savepoint
    db.execute("ROLLBACK")
    assert not _exists(store, "c")
    db.close()


def test_a_crash_before_the_commit_leaves_no_job(store: tenure.Store, url: str) -> None:
    script = textwrap.dedent(
        f"""
        import os, sqlite3, tenure
        store = tenure.connect({url!r})
        conn = sqlite3.connect({_path(url)!r})
        conn.execute("INSERT INTO orders VALUES ('o3')")
        store.submit("mail-o3", conn=conn)
        print("submitted", flush=True)
        os._exit(1)  # the process dies between the business write + submit and the commit
        """
    )
    db = sqlite3.connect(_path(url))
    db.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)")
    db.commit()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert "submitted" in done.stdout, done.stderr
    assert db.execute("SELECT count(*) FROM orders").fetchone()[0] == 0
    db.close()
    assert not _exists(store, "mail-o3")


def test_another_file_is_refused(store: tenure.Store, tmp_path: Path) -> None:
    other = sqlite3.connect(tmp_path / "other.db")
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.submit("x", conn=other)
    assert caught.value.argument == "conn"
    assert not _exists(store, "x")


@pytest.mark.anyio
async def test_an_async_store_submits_on_the_callers_thread(url: str) -> None:
    # A sqlite3 connection is bound to the thread that opened it (check_same_thread): the
    # async store runs the submit there, not in a worker thread.
    store = await tenure.aio.connect(url)
    try:
        db = sqlite3.connect(_path(url))
        answers = await store.submit_many([{"job_id": "a1"}, {"job_id": "a2"}], conn=db)
        assert [job.created for job in answers] == [True, True]
        db.rollback()
        with pytest.raises(tenure.JobNotFound):
            await store.get("a1")
        assert (await store.submit("a3", conn=db)).created
        db.commit()
        assert (await store.get("a3")).state == "ready"
        db.close()
    finally:
        await store.close()
