"""Python opcodes per no-op job, by function: where the runtime's client work goes, exactly.

`client_instructions.py` counts machine instructions per job (a total, not where they go:
the interpreter runs every Python function). This counts the Python bytecode instructions
each function executes per job (``sys.settrace`` with opcode events, on every thread), for
two ways of `client_cpu.py` draining the same queue, and prints the functions whose count
differs most: what one way does per job that the other does not. The counts are exact and
the same from run to run (a few tenths per job move with how jobs fall into batches); on
this interpreter one opcode costs about 70 machine instructions, so 14 opcodes a job are
about 1,000 instructions. Tracing makes the run some 20 times slower; the counts are not
affected.

    python benchmarks/client_opcodes.py --url "redis://127.0.0.1:6379/5?prefix=op" \\
        [--jobs 1000] [--batch 10] [--ways "Worker,hand loop (async)"] [--top 40]

Give it a store of its own, as `client_cpu.py` purges done jobs. Run it on two trees
(``PYTHONPATH=<tree>/src``) to compare them.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import client_cpu
from _common import machine_line, warm_up_worker

import tenure

Where = tuple[str, int, str]  # file, first line, function


def opcodes(url: str, way: str, jobs: int, batch: int) -> Counter[Where]:
    """Opcodes per function while ``way`` drains ``jobs`` no-op jobs (after a warm-up)."""
    run = client_cpu.WAYS[way]
    client_cpu.fill(url, batch)
    run(url, batch)
    client_cpu.fill(url, jobs)
    counts: Counter[Where] = Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
        return trace

    threading.settrace(trace)
    sys.settrace(trace)
    try:
        done = run(url, batch)
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    assert done == jobs, (way, done)
    return counts


def short(where: Where) -> str:
    filename, line, name = where
    path = Path(filename)
    parts = path.parts
    for anchor in ("tenure", "anyio", "asyncio", "redis", "psycopg", "logging"):
        if anchor in parts:
            path = Path(*parts[len(parts) - parts[::-1].index(anchor) - 1 :])
            break
    else:
        path = Path(path.name)
    return f"{path}:{line}({name})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--ways", default="Worker,hand loop (async)")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    ways = [way.strip() for way in args.ways.split(",")]
    unknown = [way for way in ways if way not in client_cpu.WAYS]
    if unknown or len(ways) != 2:
        raise SystemExit(f"--ways: two of {list(client_cpu.WAYS)}")
    print(f"Python opcodes per no-op job, {args.jobs:,} jobs, batch {args.batch}; {machine_line()}")
    print(f"store: {args.url.split('://')[0]}; command: python benchmarks/client_opcodes.py "
          + " ".join(argv))  # fmt: skip
    if "Worker" in ways:
        warm_up_worker(args.url)
    first, second = (opcodes(args.url, way, args.jobs, args.batch) for way in ways)
    with tenure.connect(args.url) as store:
        store.purge(states=("done",), older_than=0)
    jobs = args.jobs
    print(f"  {ways[0]}: {sum(first.values()) / jobs:,.0f} opcodes/job")
    print(f"  {ways[1]}: {sum(second.values()) / jobs:,.0f} opcodes/job")
    print(f"  functions by opcodes/job, {ways[0]} less {ways[1]} (and {ways[0]}'s own):")
    rows = sorted(
        ((first[where] - second[where]) / jobs, first[where] / jobs, where)
        for where in first.keys() | second.keys()
    )
    for extra, own, where in rows[::-1][: args.top]:
        print(f"  {extra:8.1f} {own:8.1f}  {short(where)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
