"""SQLite schema 6 (issue #18): a version-5 store file with jobs in it upgrades in place and
ends with the same schema as a fresh store; its jobs get priority 0 and no timeout of their
own, and claims by priority work on them."""

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
        return [tuple(row) for row in conn.execute(SCHEMA).fetchall()]
    finally:
        conn.close()


def test_a_version_5_store_upgrades_to_priorities(
    tmp_path: Path, open_store: Callable[..., tenure.Store], clock: tenure.ManualClock
) -> None:
    known = migrations("tenure.stores.sqlite")
    assert [name for _, name, _ in known][7] == "0008_priorities.sql"
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    with conn:  # what the previous tenure made: schema 5, two ready jobs and a done one
        for _, _, text in known[:5]:
            conn.executescript(text)
        conn.execute("PRAGMA user_version = 5")
        conn.execute("INSERT INTO tenure_meta VALUES ('store_id', 'old-store')")
        for seq, (job_id, state) in enumerate([("R1", "ready"), ("D", "done"), ("R2", "ready")], 1):
            conn.execute(
                "INSERT INTO tenure_jobs (seq, job_id, queue, state, generation, available_at,"
                " attempts, max_attempts, created_at, updated_at)"
                " VALUES (?, ?, 'default', ?, 0, 1.0, 0, 5, 1.0, 1.0)",
                (seq, job_id, state),
            )
    conn.close()
    store = open_store(url=f"sqlite:///{old}")
    assert store.store_id == "old-store"
    assert [(job.job_id, job.priority, job.timeout, job.headers) for job in store.jobs()] == [
        ("R1", 0, None, {}),
        ("D", 0, None, {}),
        ("R2", 0, None, {}),
    ]
    store.submit("urgent", priority=2, timeout=1.0)
    assert [lease.job_id for lease in store.claim_many("w", 30, 10)] == ["urgent", "R1", "R2"]
    fresh = tmp_path / "fresh.db"
    open_store(url=f"sqlite:///{fresh}").close()
    assert _schema(old) == _schema(fresh)
