"""claim_next -> complete cycles on SQLite: tenure against raw ``sqlite3`` in the same run.

    python benchmarks/sqlite_cycle.py [--jobs 1000] [--repeat 9] [--chunk 50]
                                      [--processes 4] [--dir DIR]

Every run starts from a copy of one template file holding ``--jobs`` ready jobs (submitted
through ``tenure.connect(...).submit``) and drains it with cycles of ``claim_next`` then
``complete``, until ``claim_next`` finds nothing:

* **tenure**: ``tenure.connect("sqlite:///...")``, the public sync API, default options
  (WAL, ``synchronous=FULL``, 30 s busy timeout);
* **raw sqlite3**: one ``sqlite3`` connection opened with the same options, running the
  very statements the SQLite driver runs, read from the same ``sql/*.sql`` files: ``BEGIN
  IMMEDIATE``; the clock-floor ``UPDATE ... RETURNING``; the pick ``SELECT``; the claim
  ``UPDATE ... RETURNING``; ``COMMIT``; then ``BEGIN IMMEDIATE``; clock; the complete
  ``UPDATE ... RETURNING``; ``COMMIT``. No validation, no secret, no Lease: the ceiling.

1 process: both sides are open at once, each on its own copy, and take turns of
``--chunk`` cycles (A B, B A, ...) until both are drained; that is one repetition, and a
noise burst on the machine hits both sides alike. With ``--processes P`` (P > 1): P
processes each open both sides (one file per side, shared by the P processes) and, in the
same turns, all P run their chunk on one side at once, released by a barrier: the figure is
aggregate cycles/s while P processes contend for one file. The script prints median cycles/s
and tenure/raw for each. After every repetition it checks that every job is done at
generation 1, so a broken loop cannot pass for a fast one. Exits 0.

Both sides share one process, and so its memory allocator. glibc's ``free`` gives the top of
the heap back to the system once more than its trim threshold is free there, and the next
allocations fault the pages back in: with SQLite freeing and allocating its page buffers at
every transaction, whether a cycle pays that (here up to 24 page faults a cycle, both sides
slowed, the ratio moved by several points) depended on the heap's layout, which any change
to either side's allocations reshuffles (issue #19). So the script pins the threshold at
64 MiB (``mallopt``, and ``MALLOC_TRIM_THRESHOLD_`` for the processes it starts) before it
measures; ``--malloc-trim default`` leaves glibc's own, as before. The header says which.

``--only SIDE --cycles N`` (``tenure`` or ``raw``) runs one side alone, untimed: 3 warm-up
cycles, then N, on a fresh copy. For instruction counts, which the load does not move: run
it under ``valgrind --tool=callgrind`` with two values of N and divide the difference of the
totals by the difference of the Ns (the setup, the same for both, cancels out)::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python benchmarks/sqlite_cycle.py --dir /dev/shm --jobs 2010 --only tenure --cycles 500

`RawCycles` mirrors ``tenure/stores/sqlite/_driver.py``: if the driver's statements
change, change it with them.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from _common import (
    Result,
    Side,
    contend_chunks,
    interleave_chunks,
    machine_line,
    print_report,
    sqlite_clock_params,
)

import tenure
from tenure._validate import MAX_GENERATION

OWNER = "bench-worker"
TTL = 60.0
QUEUE = "default"
# Same length as a real secret hash (sha256 hex), so rows have the same size on both sides.
RAW_SECRET_HASH = "0" * 64
RAW_RECEIPT = "1" * 64  # what a settle leaves in its place

_SQL = files("tenure.stores.sqlite").joinpath("sql")


def sql(name: str) -> str:
    """The driver's statement ``name``, from the same package file the driver reads."""
    return _SQL.joinpath(f"{name}.sql").read_text(encoding="utf-8")


_BURY, _CLAIM, _CLOCK, _COMPLETE, _PICK = map(sql, ("bury", "claim", "clock", "complete", "pick"))


# -- the two sides -----------------------------------------------------------------------
# Each opens its connection (untimed), then ``step(limit)`` runs up to ``limit`` cycles and
# returns how many it ran: fewer means the queue is empty (that last, empty claim_next is
# part of the run on both sides).


class TenureCycles:
    """The public API: ``tenure.connect``, ``claim_next``, ``complete``."""

    def __init__(self, path: str, owner: str) -> None:
        self.owner = owner
        self.store = tenure.connect(f"sqlite:///{path}")

    def step(self, limit: int) -> int:
        store, owner = self.store, self.owner
        done = 0
        while done < limit and (lease := store.claim_next(owner, TTL)) is not None:
            store.complete(lease)
            done += 1
        return done

    def close(self) -> None:
        self.store.close()


class RawCycles:
    """A plain sqlite3 connection opened as the driver opens it, running the driver's
    statements: the ceiling (no validation, no secret, no Lease)."""

    def __init__(self, path: str, owner: str) -> None:
        self.owner = owner
        self.conn = sqlite3.connect(
            path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.cur = self.conn.cursor()

    def step(self, limit: int) -> int:
        cur, owner = self.cur, self.owner
        clock, pick, claim, bury, complete = _CLOCK, _PICK, _CLAIM, _BURY, _COMPLETE
        done = 0
        while done < limit:
            # claim_next
            cur.execute("BEGIN IMMEDIATE")
            now = cur.execute(clock, sqlite_clock_params()).fetchone()[0]
            # The pick answers the best ready job and the best expired lease (pick.sql):
            # the better of the two, as the driver takes it.
            picks = cur.execute(
                pick, {"queue": QUEUE, "now": now, "max_generation": MAX_GENERATION}
            ).fetchall()
            if not picks:
                cur.execute("COMMIT")
                break
            found = min(picks, key=lambda p: (-p[6], p[4], p[5]))
            job_id, state, attempts, max_attempts = found[:4]
            if state == "leased" and attempts >= max_attempts:  # never true here
                cur.execute(bury, {"job_id": job_id, "now": now}).fetchall()
            row = cur.execute(
                claim,
                {
                    "job_id": job_id,
                    "owner": owner,
                    "ttl": TTL,
                    "secret_hash": RAW_SECRET_HASH,
                    "now": now,
                    "max_generation": MAX_GENERATION,
                },
            ).fetchone()
            cur.execute("COMMIT")
            # complete
            cur.execute("BEGIN IMMEDIATE")
            now = cur.execute(clock, sqlite_clock_params()).fetchone()[0]
            row = cur.execute(
                complete,
                {
                    "job_id": job_id,
                    "owner": owner,
                    "generation": row[4],
                    "secret_hash": RAW_SECRET_HASH,
                    "receipt": RAW_RECEIPT,
                    "result": None,
                    "now": now,
                },
            ).fetchone()
            cur.execute("COMMIT")
            assert row is not None
            done += 1
        return done

    def close(self) -> None:
        self.conn.close()


SIDES: dict[str, type[TenureCycles | RawCycles]] = {
    "tenure": TenureCycles,
    "raw sqlite3": RawCycles,
}


def open_side(index: int, side: str, paths: dict[str, str]) -> TenureCycles | RawCycles:
    """`contend_chunks` factory, run in each child process."""
    return SIDES[side](paths[side], f"{OWNER}-{index}")


# -- the run -----------------------------------------------------------------------------


class Files:
    """A template store with ``jobs`` ready jobs, and fresh copies of it for each run."""

    def __init__(self, directory: Path, jobs: int) -> None:
        self.directory = directory
        self.jobs = jobs
        self.template = directory / "template.db"
        self._count = 0
        # Setup only: synchronous=normal makes the untimed submits quicker.
        with tenure.connect(f"sqlite:///{self.template}?synchronous=normal") as store:
            for number in range(jobs):
                store.submit(f"job-{number:07d}", {"n": number})
        # Closing the last connection checkpoints the WAL into the file: copies are whole.

    def fresh(self) -> str:
        self._count += 1
        path = self.directory / f"run-{self._count}.db"
        shutil.copyfile(self.template, path)
        return str(path)

    def check_and_remove(self, path: str, cycles: int) -> None:
        if cycles != self.jobs:
            raise SystemExit(f"benchmark bug: {cycles} cycles for {self.jobs} jobs")
        with sqlite3.connect(path) as conn:
            (done,) = conn.execute(
                "SELECT count(*) FROM tenure_jobs WHERE state = 'done' AND generation = 1"
            ).fetchone()
        conn.close()
        if done != self.jobs:
            raise SystemExit(f"benchmark bug: {done} of {self.jobs} jobs done at generation 1")
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)


def single(store_files: Files, side: str) -> Side:
    def open_() -> tuple[TenureCycles | RawCycles, Callable[[int], None]]:
        path = store_files.fresh()
        return SIDES[side](path, OWNER), lambda done: store_files.check_and_remove(path, done)

    return Side(side, open_)


def contending(store_files: Files, processes: int, chunk: int, repeat: int) -> list[Result]:
    """Like `interleave_chunks`, with ``processes`` processes in every turn."""
    results = [Result(side) for side in SIDES]
    for rep in range(1 + repeat):  # the first is a warm-up
        paths = {side: store_files.fresh() for side in SIDES}
        totals = contend_chunks(open_side, processes, list(SIDES), store_files.jobs, chunk, paths)
        for result, (done, seconds) in zip(results, totals, strict=True):
            store_files.check_and_remove(paths[result.name], done)
            if rep:
                result.rates.append(done / seconds)
    return results


def alone(store_files: Files, side: str, cycles: int) -> int:
    """``--only``: one side, 3 warm-up cycles and then ``cycles``, untimed."""
    cycler = SIDES["raw sqlite3" if side == "raw" else "tenure"](store_files.fresh(), OWNER)
    warm = cycler.step(3)
    done = cycler.step(cycles)
    cycler.close()
    print(f"{side}: {done} cycles after {warm} warm-up cycles")
    return 0 if (warm, done) == (3, cycles) else 1


TRIM_THRESHOLD = 64 << 20  # bytes
_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter number


def pin_malloc_trim() -> str:
    """Pin glibc's trim threshold for this process and those it starts (see the docstring);
    says what was done, for the header."""
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(TRIM_THRESHOLD)
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError):
        return "malloc trim threshold: the allocator's own (no glibc mallopt)"
    if mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        return "malloc trim threshold: the allocator's own (mallopt refused)"
    return f"glibc malloc trim threshold {TRIM_THRESHOLD >> 20} MiB"


def _ratios(results: list[Result]) -> str:
    tenure_, raw = results
    paired = statistics.median(tenure_.paired(raw))
    return f"{paired:.1%} ({tenure_.median / raw.median:.1%})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per run (default 1000)")
    parser.add_argument("--repeat", type=int, default=9, help="measured runs per side (default 9)")
    parser.add_argument(
        "--chunk", type=int, default=50, help="cycles per turn and process (default 50)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=4,
        help="contending processes for the second figure; 1 skips it (default 4)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where the database files go (default: a new temporary directory)",
    )
    parser.add_argument(
        "--only",
        choices=("tenure", "raw"),
        default=None,
        help="run this side alone for --cycles cycles, untimed (for callgrind)",
    )
    parser.add_argument("--cycles", type=int, default=1000, help="cycles for --only")
    parser.add_argument(
        "--malloc-trim",
        choices=("pinned", "default"),
        default="pinned",
        help="glibc's trim threshold: pinned at 64 MiB (default) or glibc's own",
    )
    args = parser.parse_args(argv)
    if min(args.jobs, args.repeat, args.chunk, args.processes) < 1:
        parser.error("--jobs, --repeat, --chunk and --processes must be at least 1")
    if args.only is not None and not 0 <= args.cycles <= args.jobs - 3:
        parser.error("--cycles must be from 0 to --jobs minus 3 (the warm-up)")
    malloc = "glibc's own malloc trim threshold"
    if args.malloc_trim == "pinned":
        malloc = pin_malloc_trim()

    base = args.dir or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="tenure-bench-", dir=base))
    if args.only is not None:
        try:
            return alone(Files(directory, args.jobs), args.only, args.cycles)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    try:
        print(
            f"sqlite_cycle: claim_next -> complete, {args.jobs} jobs per run, "
            f"{args.repeat} repetitions (+1 warm-up), files in {directory}"
        )
        print(f"{machine_line()}, SQLite {sqlite3.sqlite_version}, WAL, synchronous=FULL, {malloc}")
        store_files = Files(directory, args.jobs)
        results = interleave_chunks(
            [single(store_files, side) for side in SIDES], args.repeat, chunk=args.chunk
        )
        print_report(
            f"1 process (turns of {args.chunk} cycles)", results, "raw sqlite3", unit="cycles/s"
        )
        summary = [f"1 process: {_ratios(results)}"]
        if args.processes > 1:
            results = contending(store_files, args.processes, args.chunk, args.repeat)
            print_report(
                f"{args.processes} processes contending for one file (aggregate cycles/s)",
                results,
                "raw sqlite3",
                unit="cycles/s",
            )
            summary.append(f"{args.processes} processes: {_ratios(results)}")
        print("\ntenure/raw, median of paired ratios (ratio of medians):")
        print("\n".join(f"  {line}" for line in summary))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
