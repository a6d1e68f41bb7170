"""The SQLite pick statement alone, with and without leases held ahead of the backlog.

    PYTHONPATH=<tree>/src python benchmarks/sqlite_pick.py [--jobs 2000] [--held 1000]
                                                          [--repeat 7] [--dir /dev/shm]

For 1 and 5 priorities (job n has priority ``n % levels - levels // 2``), and for no lease
held and ``--held`` of the best jobs held for an hour, a store file of ``--jobs`` ready jobs
is made through the public API; then the tree's own ``pick.sql`` runs 2,000 times in one
write transaction (``BEGIN IMMEDIATE``, as the driver runs it) on a raw ``sqlite3``
connection, ``--repeat`` times. Prints the median µs per pick of each case and, per
priority count, held / none: what running leases cost a claim. Run it on two trees
(``PYTHONPATH``) to compare two layouts; the statement is read from the tree, so each runs
its own. Checks that every pick answers the best ready job. Exits 0.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine_line

import tenure
from tenure.stores.sqlite import _sql

PICKS = 2000
MAX_GENERATION = 2**62


def make_store(path: Path, jobs: int, levels: int, held: int) -> str:
    """A store of ``jobs`` ready jobs, ``held`` of the best claimed for an hour; answers
    the job id the next claim must take."""
    store = tenure.connect(f"sqlite:///{path}")
    try:
        for start in range(0, jobs, 1000):
            store.submit_many(
                [
                    {"job_id": f"j{n:06d}", "queue": "q", "priority": n % levels - levels // 2}
                    for n in range(start, min(jobs, start + 1000))
                ]
            )
        for start in range(0, held, 1000):
            store.claim_many("running", 3600, min(1000, held - start), queues=["q"])
        order = sorted(range(jobs), key=lambda n: (levels // 2 - n % levels, n))
        return f"j{order[held]:06d}"
    finally:
        store.close()


def time_pick(path: Path, expected: str, repeat: int) -> float:
    """Median µs per pick over ``repeat`` runs of PICKS picks."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        now = conn.execute("SELECT floor FROM tenure_clock").fetchone()[0] + 1.0
        params = {"queue": "q", "now": now, "max_generation": MAX_GENERATION}
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(_sql.PICK, params).fetchall()
        assert [row[0] for row in rows] == [expected], (rows, expected)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            for _ in range(PICKS):
                conn.execute(_sql.PICK, params).fetchall()
            times.append((time.perf_counter() - started) / PICKS * 1e6)
        conn.execute("ROLLBACK")
        return statistics.median(times)
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--held", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dir", default=None, help="where the store files go")
    args = parser.parse_args()
    print(machine_line())
    print(f"pick.sql, {args.jobs} ready jobs, {PICKS} picks a run, median of {args.repeat}")
    print(f"{'priorities':>10} {'held':>6} {'us/pick':>9} {'held/none':>10}")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for levels in (1, 5):
            none = 0.0
            for held in (0, args.held):
                path = Path(folder) / f"p{levels}-h{held}.db"
                expected = make_store(path, args.jobs, levels, held)
                micros = time_pick(path, expected, args.repeat)
                ratio = f"{micros / none:9.2f}x" if held else ""
                none = none or micros
                print(f"{levels:>10} {held:>6} {micros:9.2f} {ratio:>10}")


if __name__ == "__main__":
    main()
