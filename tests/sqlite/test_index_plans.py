"""SQLite's claim indexes (migration 0012), read as the statements need them. The work of a
statement is counted in SQLite's virtual-machine instructions (a progress handler called at
each one), which do not move with the machine's load:

* a claim's pick reads the best ready job and the expired leases, never the running ones:
  the same work with 1,000 leases running ahead of the backlog as with none (before the
  claim index was split, the pick stepped over every running lease of a higher priority
  than the best ready job: docs/benchmarks.md, "Priorities");
* an idle worker's ``next_due`` and a scrape's ``queue_stats`` read the live jobs, not the
  finished ones, whatever ANALYZE's statistics say (with them, both had come to read the
  whole table), and ``next_due`` reads one entry per priority, not the whole backlog."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import tenure
from tenure.stores.sqlite import _sql

MAX_GENERATION = 2**62


def _instructions(path: Path, now: float, statement: str = _sql.PICK) -> tuple[int, list[str]]:
    """SQLite VM instructions one run of ``statement`` (the pick by default) for queue "q"
    at store time ``now`` takes, and the first column of each row it answers."""
    conn = sqlite3.connect(path)
    try:
        steps = 0

        def count() -> int:
            nonlocal steps
            steps += 1
            return 0

        conn.set_progress_handler(count, 1)
        rows = conn.execute(
            statement, {"queue": "q", "now": now, "max_generation": MAX_GENERATION}
        ).fetchall()
        return steps, [row[0] for row in rows]
    finally:
        conn.close()


def _backlog(open_store: Callable[..., tenure.Store], path: Path, held: int) -> tenure.Store:
    """A store of 2,000 ready jobs of five priorities (job n has priority n % 5 - 2), the
    ``held`` best of them claimed for an hour."""
    store = open_store(url=f"sqlite:///{path}")
    for start in (0, 1000):
        store.submit_many(
            [
                {"job_id": f"j{n:04d}", "queue": "q", "priority": n % 5 - 2}
                for n in range(start, start + 1000)
            ]
        )
    if held:
        assert len(store.claim_many("running", 3600, held, queues=["q"])) == held
    return store


def test_running_leases_ahead_of_the_backlog_are_not_walked(
    tmp_path: Path, open_store: Callable[..., tenure.Store], clock: tenure.ManualClock
) -> None:
    counts: dict[int, int] = {}
    answers: dict[int, list[str]] = {}
    for held in (0, 1000):
        path = tmp_path / f"held{held}.db"
        _backlog(open_store, path, held).close()
        counts[held], answers[held] = _instructions(path, clock.time() + 2)
    # The best ready job: priority 2 (n % 5 == 4), the first of them not held.
    assert answers[0] == ["j0004"]
    # Held: the 400 jobs of priority 2, the 400 of priority 1 and 200 of priority 0.
    assert answers[1000] == ["j1002"]
    assert counts[1000] <= counts[0] + 20, counts


def test_the_pick_reads_the_expired_leases_and_no_running_one(
    tmp_path: Path, open_store: Callable[..., tenure.Store], clock: tenure.ManualClock
) -> None:
    counts: dict[int, int] = {}
    answers: dict[int, list[str]] = {}
    for held in (0, 1000):
        path = tmp_path / f"held{held}.db"
        store = _backlog(open_store, path, held)
        stalled = store.claim_many("stalled", 1, 3, queues=["q"])  # the next three best
        store.close()
        counts[held], answers[held] = _instructions(path, clock.time() + 2)  # 1 s expired
        # Both candidates: the best due ready job, and the best expired lease.
        assert answers[held] == [f"j{int(stalled[0].job_id[1:]) + 15:04d}", stalled[0].job_id]
    assert answers[1000] == ["j1017", "j1002"]
    assert counts[1000] <= counts[0] + 20, counts
    clock.advance(2)
    store = open_store(url=f"sqlite:///{tmp_path / 'held1000.db'}")
    lease = store.claim_next("B", 30, queues=["q"])
    assert lease is not None
    # Both of priority 0; the ready job was due when it was submitted, the lease at its end.
    assert (lease.job_id, lease.generation) == ("j1017", 1)


def _add_history(path: Path, done: int, scheduled: int, now: float) -> None:
    """``done`` finished jobs and ``scheduled`` ready jobs due a day after ``now``, of five
    priorities, written straight into the file (as the API would leave them); then
    ANALYZE."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            start = conn.execute("SELECT coalesce(max(seq), 0) FROM tenure_jobs").fetchone()[0]
            conn.executemany(
                "INSERT INTO tenure_jobs (seq, job_id, queue, state, generation, available_at,"
                " attempts, max_attempts, created_at, updated_at, priority)"
                " VALUES (?, ?, 'q', ?, 1, ?, 1, 5, 0.0, 0.0, ?)",
                [
                    (seq, f"h{seq}", state, at, seq % 5)
                    for seq, state, at in (
                        [(start + n + 1, "done", 0.0) for n in range(done)]
                        + [
                            (start + done + n + 1, "ready", now + 86400.0 + n)
                            for n in range(scheduled)
                        ]
                    )
                ],
            )
        conn.execute("ANALYZE")
    finally:
        conn.close()


def test_an_idle_workers_next_due_reads_neither_history_nor_the_whole_backlog(
    tmp_path: Path, open_store: Callable[..., tenure.Store], clock: tenure.ManualClock
) -> None:
    counts: dict[str, int] = {}
    for name, done, scheduled in (
        ("small", 0, 10),
        ("history", 20_000, 10),
        ("backlog", 0, 20_000),
    ):
        path = tmp_path / f"{name}.db"
        store = _backlog(open_store, path, 0)
        store.claim_many("running", 3600, 1000, queues=["q"])
        store.claim_many("running", 3600, 1000, queues=["q"])  # nothing ready is left
        store.close()
        _add_history(path, done, scheduled, clock.time())
        counts[name], answer = _instructions(path, clock.time(), _sql.NEXT_DUE)
        assert answer == [clock.time() + 3600]  # the first lease's end comes first
    assert counts["history"] <= counts["small"] + 100, counts
    assert counts["backlog"] <= counts["small"] + 100, counts


def test_queue_stats_reads_the_live_jobs_not_the_history(
    tmp_path: Path, open_store: Callable[..., tenure.Store], clock: tenure.ManualClock
) -> None:
    counts: dict[str, int] = {}
    for name, done in (("small", 0), ("history", 20_000)):
        path = tmp_path / f"{name}.db"
        _backlog(open_store, path, 300).close()
        _add_history(path, done, 0, clock.time())
        counts[name], answer = _instructions(path, clock.time(), _sql.QUEUE_STATS)
        assert answer == ["q"]
    assert counts["history"] <= counts["small"] + 100, counts
