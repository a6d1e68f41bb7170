"""Client instructions per no-op job on a real store, counted by callgrind: the three ways of
`client_cpu.py` (sync hand loop, async hand loop, `tenure.Worker`), each drained in a child
process run under ``valgrind --tool=callgrind``. Instruction counts do not move with the
machine's load the way CPU time does, so two trees can be compared a percent apart.

    python benchmarks/client_instructions.py --url "redis://127.0.0.1:6379/5?prefix=ir" \
        [--jobs 2000] [--batch 8] [--ways "hand loop (sync),Worker"] [--start]

Each way runs twice, on ``--jobs`` and on twice as many jobs; in each child the count is
reset (``callgrind_control -z``) after the queue is filled and the way warmed up, and
dumped (``-d``) once the queue is drained. A Worker's start (its connections, its threads)
falls inside the window, so the figure is the difference of the two dumps divided by the
``--jobs`` jobs between them: the cost of one more job, start and imports cancelled out.
With ``--start``, each way runs once on an empty queue instead, and the figure is that run's
count (the dump's ``summary``): a way's start and stop (its connections, a Worker's
threads), which a short-lived worker pays once per run.
Callgrind runs one thread at a time: the keeper's thread is counted, not what a thread
hand-off costs in time (`client_cpu.py` shows that). It prints each way's instructions per
job and its ratio to the sync hand loop's. Needs valgrind (``apt-get install valgrind``);
give it a store of its own, as `client_cpu.py` purges done jobs. Run it on two trees
(``PYTHONPATH=<tree>/src``) to compare them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import client_cpu
from _common import machine_line, warm_up_worker

import tenure


def child(url: str, way: str, jobs: int, batch: int) -> None:
    """In the process under callgrind: warm ``way`` up, fill, count one drain."""
    run = client_cpu.WAYS[way]
    if way == "Worker":
        warm_up_worker(url)
    else:
        client_cpu.fill(url, batch)
        run(url, batch)
    client_cpu.fill(url, jobs)
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
    done = run(url, batch)
    subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
    assert done == jobs, (way, done)


def counted(url: str, way: str, jobs: int, batch: int, folder: Path, field: str = "totals") -> int:
    """Instructions of one drain of ``jobs`` jobs, from the child's dump: its ``totals``
    line, or its ``summary`` (the part's own count since the reset, for `--start`)."""
    for old in folder.glob("cg.*"):
        old.unlink()
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={folder}/cg.%p",
        sys.executable,
        __file__,
        "--child",
        way,
        "--url",
        url,
        "--jobs",
        str(jobs),
        "--batch",
        str(batch),
    ]
    subprocess.run(command, check=True, capture_output=True)
    (dump,) = folder.glob("cg.*.1")  # the dump taken after the drain
    for line in dump.read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} in {dump}")


def start_counts(url: str, ways: list[str], batch: int) -> int:
    """``--start``: each way's instructions for one run that finds no job (its store's
    connections opened and closed; a Worker's threads started and stopped too), from the
    count since the reset, the only run in the window. What a short-lived worker pays
    once per run (`worker_start.py` shows it in time)."""
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="tenure-callgrind-") as folder:
        for way in ways:
            counts[way] = counted(url, way, 0, batch, Path(folder), field="summary")
    base = counts.get("hand loop (sync)")
    for way, count in counts.items():
        versus = "" if base is None else f"  {count / base:5.2f}x the sync hand loop's"
        print(f"  {way:18} {count:12,} instructions{versus}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--ways", default=",".join(client_cpu.WAYS))
    parser.add_argument(
        "--start",
        action="store_true",
        help="count one run that finds no job instead: a way's start and stop",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.url, args.child, args.jobs, args.batch)
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    ways = [way.strip() for way in args.ways.split(",")]
    unknown = [way for way in ways if way not in client_cpu.WAYS]
    if unknown:
        raise SystemExit(f"--ways: unknown {unknown}; choose from {list(client_cpu.WAYS)}")
    what = "a start -> stop with no job" if args.start else "per no-op job"
    print(f"client instructions {what}, batch {args.batch}; {machine_line()}")
    print(
        f"store: {args.url.split('://')[0]}; command: python benchmarks/client_instructions.py "
        + " ".join(argv)
    )
    if args.start:
        return start_counts(args.url, ways, args.batch)
    per_job: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tenure-callgrind-") as folder:
        for way in ways:
            low = counted(args.url, way, args.jobs, args.batch, Path(folder))
            high = counted(args.url, way, 2 * args.jobs, args.batch, Path(folder))
            per_job[way] = (high - low) / args.jobs
    with tenure.connect(args.url) as store:
        store.purge(states=("done",), older_than=0)
    base = per_job.get("hand loop (sync)")
    for way, count in per_job.items():
        versus = "" if base is None else f"  {count / base:4.2f}x the sync hand loop's"
        print(f"  {way:18} {count:10,.0f} instructions/job{versus}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
