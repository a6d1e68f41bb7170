"""Two source trees' PostgreSQL layouts side by side in one process: claim -> complete cycles
on a large backlog, with the server CPU each side's backend spent.

    python benchmarks/postgres_layout_ab.py --a /path/to/tree-a/src --b /path/to/tree-b/src
        [--url postgresql://postgres@127.0.0.1:5432/postgres] [--jobs 1000000] [--held 0]
        [--cycles 3000] [--chunk 100] [--priorities 5]

For comparing a schema change (issue #18: HOT claims) with the layout it would replace, in
the same run. Each side gets a schema created by its own tree (``tenure.connect`` in a child
process with that tree first on ``PYTHONPATH``), ``--jobs`` ready jobs over ``--priorities``
levels (one INSERT ... SELECT with triggers off: postgres_latency.py's
`insert_ready_jobs`), ``--held`` leases
claimed and kept by another owner (ttl one hour), and one plain psycopg connection
executing that tree's own ``claim_next.sql`` and ``complete.sql`` (raw cycles, as
benchmarks/postgres_cycle.py's raw side: the SQL's cost, not the client's). The sides take
turns of ``--chunk`` cycles (A B, B A, ...). Prints cycles/s and the server CPU per cycle of
each side (the backend's utime + stime from /proc: the server must run on this machine), and
B / A for both. Ratios within one run are what count on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from _common import machine_line
from postgres_latency import insert_ready_jobs

import tenure.stores.postgres._common as common
from tenure._validate import MAX_GENERATION
from tenure.stores.postgres._common import SqlSet, binary_lists, sql_text

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SECRET_HASH = "0" * 64
RECEIPT = "1" * 64
TICK = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")


def backend_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def with_tree(tree: str, build: Callable[[], T]) -> T:
    """build() reading the SQL files of ``tree`` instead of the installed tenure's."""
    package = Path(tree) / "tenure" / "stores" / "postgres"
    real = common.load_text
    common.load_text = lambda _package, name: (package / name).read_text(encoding="utf-8")
    try:
        return build()
    finally:
        common.load_text = real


def url_of(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def make_schema(base: str, tree: str, jobs: int, priorities: int) -> str:
    schema = f"ab_{uuid.uuid4().hex[:10]}"
    create = f"import tenure; tenure.connect({url_of(base, schema)!r}).close()"
    subprocess.run(
        [sys.executable, "-c", create], env={**os.environ, "PYTHONPATH": tree}, check=True
    )
    insert_ready_jobs(base, schema, jobs, priorities)
    return schema


class Side:
    def __init__(self, label: str, base: str, tree: str, schema: str) -> None:
        self.label, self.schema = label, schema
        self.conn = psycopg.connect(base, autocommit=True)
        self.conn.execute(with_tree(tree, lambda: sql_text("configure")).encode())
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        self.pid = int(row[0])
        self.cursor = psycopg.RawCursor(self.conn)
        binary_lists(self.cursor)
        statements = with_tree(tree, lambda: SqlSet(schema))
        self.claim, self.complete = statements["claim_next"], statements["complete"]
        self.wall = self.cpu = 0.0
        self.cycles = 0

    def claim_rows(self, owner: str, ttl: float, limit: int) -> list[Any]:
        params = {
            "owner": owner,
            "ttl": ttl,
            "queues": ["default"],
            "secret_hashes": [SECRET_HASH] * limit,
            "limit": limit,
            "max_generation": MAX_GENERATION,
            "now": None,
        }
        return self.cursor.execute(self.claim.text, self.claim.args(params)).fetchall()

    def run(self, cycles: int, *, timed: bool = True) -> None:
        cpu, start = backend_cpu(self.pid), time.perf_counter()
        for _ in range(cycles):
            row = self.claim_rows("bench", 60.0, 1)[0]
            assert row[0] == "applied", row
            params = {
                "job_id": row[1],
                "owner": "bench",
                "generation": row[5],
                "secret_hash": SECRET_HASH,
                "receipt": RECEIPT,
                "result": None,
                "now": None,
            }
            done = self.cursor.execute(self.complete.text, self.complete.args(params)).fetchall()
            assert done[0][0] == "applied", done
        if timed:
            self.wall += time.perf_counter() - start
            self.cpu += backend_cpu(self.pid) - cpu
            self.cycles += cycles


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TENURE_BENCH_POSTGRES_URL", DEFAULT_URL))
    parser.add_argument("--a", required=True, help="the src directory of tree A")
    parser.add_argument("--b", required=True, help="the src directory of tree B")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--held", type=int, default=0)
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--priorities", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"PostgreSQL layouts A/B, raw claim -> complete cycles; {machine_line()}")
    print(f"command: python benchmarks/postgres_layout_ab.py {' '.join(argv)}".rstrip())
    sides = [
        Side(label, args.url, tree, make_schema(args.url, tree, args.jobs, args.priorities))
        for label, tree in (("A", args.a), ("B", args.b))
    ]
    try:
        for side in sides:
            held = 0
            while held < args.held:  # untimed: leases another owner keeps through the run
                held += len(side.claim_rows("holder", 3600.0, min(1000, args.held - held)))
            side.run(50, timed=False)  # warm up: the generic plans
        turn = 0
        while sides[0].cycles < args.cycles:
            for side in sides if turn % 2 == 0 else sides[::-1]:
                side.run(min(args.chunk, args.cycles - side.cycles))
            turn += 1
        for side, tree in zip(sides, (args.a, args.b), strict=True):
            print(
                f"  {side.label} {tree}: {args.jobs:,} queued, {args.held:,} held: "
                f"{side.cycles / side.wall:6.0f} cycles/s, "
                f"server CPU {1e6 * side.cpu / side.cycles:5.0f} us/cycle"
            )
        a, b = sides
        print(
            f"  B / A: cycles/s {(b.cycles / b.wall) / (a.cycles / a.wall):.2f}, "
            f"server CPU per cycle {(b.cpu / b.cycles) / (a.cpu / a.cycles):.2f}"
        )
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            for side in sides:
                side.conn.close()
                conn.execute(f'DROP SCHEMA "{side.schema}" CASCADE')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
