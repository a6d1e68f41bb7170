"""Concurrent fenced writers, shared by the thread and process tests (importable by spawn).

Each writer opens its own connection and makes fenced writes of one job with a
deterministic sequence of mixed generations; every accepted write also inserts a row into
``effects`` inside the guarded transaction, so the table's id order is the commit order.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import tenure
from tenure import fence

JOB = "job-under-contention"
SPIKE = 10_000  # writer 0 starts with the largest generation: everything older after it fails

EFFECTS_SQLITE = """
CREATE TABLE IF NOT EXISTS effects (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    writer     INTEGER NOT NULL,
    generation INTEGER NOT NULL
)
"""


def generations(writer: int, writes: int) -> list[int]:
    rng = random.Random(writer)
    sequence = [max(1, step * 3 + rng.randint(-12, 12)) for step in range(writes)]
    if writer == 0:
        sequence[writes // 4] = SPIKE
    return sequence


INSERT_QMARK = "INSERT INTO effects (writer, generation) VALUES (?, ?)"
INSERT_FORMAT = "INSERT INTO effects (writer, generation) VALUES (%s, %s)"


def run_writer(
    connect: Callable[[], Any], writer: int, writes: int, insert: str = INSERT_QMARK
) -> tuple[list[int], list[tuple[int, int | None]]]:
    """(accepted generations, [(rejected generation, highest seen)]) of one writer."""
    conn = connect()
    accepted: list[int] = []
    rejected: list[tuple[int, int | None]] = []
    try:
        for generation in generations(writer, writes):
            token = tenure.FencingToken(JOB, generation)
            try:
                with fence.sql_fence(conn, token) as cur:
                    cur.execute(insert, (writer, generation))
            except tenure.StaleToken as exc:
                rejected.append((generation, exc.highest_seen))
            else:
                accepted.append(generation)
            time.sleep(0.001)  # not for correctness: lets the other writers interleave
    finally:
        conn.close()
    return accepted, rejected


def sqlite_writer(path: str, writer: int, writes: int, start: Any, results: Any) -> None:
    """Entry point of a spawned process: one SQLite connection of its own; all processes
    start writing together (``start`` is a Barrier) and put their results on a queue."""

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=60)
        start.wait()
        return conn

    results.put((writer, run_writer(connect, writer, writes)))


def check_history(
    committed: list[int],
    results: list[tuple[list[int], list[tuple[int, int | None]]]],
    fence_generation: int | None,
    writes: int,
) -> None:
    """I4 for one job: the accepted generations, in commit order, never decrease; exactly
    the accepted writes are there; every rejection was older than something accepted."""
    accepted = [g for ok, _ in results for g in ok]
    rejected = [r for _, bad in results for r in bad]
    assert len(accepted) + len(rejected) == writes * len(results)
    assert committed == sorted(committed), "an accepted generation went backwards"
    assert sorted(committed) == sorted(accepted), "effects of rejected writes were committed"
    assert fence_generation == max(accepted) == SPIKE
    for generation, highest in rejected:
        assert highest is not None, generation
        assert highest > generation, (generation, highest)
    # Writer 0's writes after its spike are all older than the spike: all rejected.
    assert len(results[0][1]) >= writes - writes // 4 - 1
