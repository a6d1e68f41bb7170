"""SQLite schema 3 (job control): a version-2 store file with jobs in it upgrades in place
(the jobs table is rebuilt to allow ``cancelled``) and ends with the same schema as a fresh
store; its jobs keep every column, and the new operations work on them."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import tenure
from tenure._resources import migrations

SCHEMA = (
    "SELECT type, name, tbl_name, sql FROM sqlite_master"
    " WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
)


def _schema(path: Path) -> list[tuple[str, ...]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(SCHEMA).fetchall()
    finally:
        conn.close()
    # The rebuilt table keeps the name it was created under in its SQL text.
    return [
        (kind, name, table, " ".join((sql or "").replace("tenure_jobs_v3", "tenure_jobs").split()))
        for kind, name, table, sql in rows
    ]


def test_a_version_2_store_upgrades_to_job_control(
    tmp_path: Path, open_store: Callable[..., tenure.Store]
) -> None:
    known = migrations("tenure.stores.sqlite")
    assert [name for _, name, _ in known][2:3] == ["0003_job_control.sql"]
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    with conn:  # what the previous tenure made: schema 2, a job in each state
        for _, _, text in known[:2]:
            conn.executescript(text)
        conn.execute("PRAGMA user_version = 2")
        conn.execute("INSERT INTO tenure_meta VALUES ('store_id', 'old-store')")
        for seq, (job_id, state, generation) in enumerate(
            [("R", "ready", 0), ("L", "leased", 2), ("D", "done", 4), ("X", "dead", 1)], 1
        ):
            conn.execute(
                "INSERT INTO tenure_jobs (seq, job_id, queue, state, owner, generation,"
                " available_at, attempts, max_attempts, payload, result, error, created_at,"
                " updated_at) VALUES (?, ?, 'default', ?, 'w', ?, 1.0, 1, 5, '[1]', '\"r\"',"
                " 'e', 1.0, 2.0)",
                (seq, job_id, state, generation),
            )
    conn.close()
    store = open_store(url=f"sqlite:///{old}")
    assert store.store_id == "old-store"
    jobs = {job.job_id: job for job in store.jobs()}
    assert [job.job_id for job in store.jobs()] == ["R", "L", "D", "X"]  # order kept
    assert (jobs["D"].state, jobs["D"].generation, jobs["D"].payload) == ("done", 4, [1])
    assert (jobs["D"].result, jobs["D"].error, jobs["D"].updated_at) == ("r", "e", 2.0)
    assert store.cancel("R").state == "cancelled"
    store.delete("D")
    store.submit("D")
    lease = store.claim("D", "me", 10)
    assert lease is not None
    assert lease.generation == 5  # above the deleted job's 4
    fresh = tmp_path / "fresh.db"
    open_store(url=f"sqlite:///{fresh}").close()
    assert _schema(old) == _schema(fresh)
