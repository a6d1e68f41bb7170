"""Mutual exclusion across real processes: several processes take one lock repeatedly and
write through a fenced SQLite destination; the checker reads the destination."""

from __future__ import annotations

import itertools
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 3
TIMES = 8


def test_processes_take_turns_with_increasing_tokens(url: str, tmp_path: Path) -> None:
    dest_path = tmp_path / "dest.db"
    dest = sqlite3.connect(dest_path)
    dest.execute("CREATE TABLE holdings (generation INTEGER, pid INTEGER, what TEXT, t REAL)")
    dest.commit()
    takers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.locks._taker", url, str(dest_path), "shared", str(TIMES)],
            cwd=ROOT,
        )
        for _ in range(PROCESSES)
    ]
    for taker in takers:
        assert taker.wait(timeout=120) == 0
    rows = dest.execute("SELECT generation, pid, what, t FROM holdings ORDER BY rowid").fetchall()
    dest.close()
    assert len(rows) == 2 * PROCESSES * TIMES
    assert len({pid for _, pid, _, _ in rows}) == PROCESSES
    # In write order: start and end of one holding, then the next, each with a greater token.
    generations = [g for g, _, _, _ in rows]
    assert generations == sorted(generations)
    pairs = [rows[i : i + 2] for i in range(0, len(rows), 2)]
    for (g1, p1, w1, _), (g2, p2, w2, _) in pairs:
        assert (w1, w2) == ("start", "end")
        assert g1 == g2
        assert p1 == p2
    # No two holdings overlap in time: each starts after the previous one ended.
    for previous, following in itertools.pairwise(pairs):
        assert previous[1][3] <= following[0][3]
        assert previous[0][0] < following[0][0]


def test_a_stopped_holder_is_fenced_off_when_it_resumes(url: str, tmp_path: Path) -> None:
    dest_path = tmp_path / "dest.db"
    dest = sqlite3.connect(dest_path)
    dest.execute("CREATE TABLE holdings (generation INTEGER, pid INTEGER, what TEXT, t REAL)")
    dest.commit()
    command = [sys.executable, "-m", "tests.locks._taker", url, str(dest_path), "shared"]
    staller = subprocess.Popen([*command, "stall"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not dest.execute("SELECT 1 FROM holdings").fetchone():  # it holds the lock
            assert time.monotonic() < deadline
            assert staller.poll() is None
            time.sleep(0.05)
        # Stopped with the lock (TTL 1 s): the next process gets it once it expires.
        assert subprocess.run([*command, "1"], cwd=ROOT, timeout=60).returncode == 0
    finally:
        staller.send_signal(signal.SIGCONT)
    out, _ = staller.communicate(timeout=60)
    assert staller.returncode == 0
    assert out.startswith("refused: LeaseLost; lost=True"), out
    rows = dest.execute("SELECT generation, what FROM holdings ORDER BY rowid").fetchall()
    dest.close()
    assert rows == [(1, "start"), (2, "start"), (2, "end")]
