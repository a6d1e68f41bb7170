"""What a fleet-wide queue limit or rate costs a claim_next -> complete cycle, on every
store: the same tenure code on stores open at once, one queue unlimited, one limited (the
claim then locks and counts: "Queue limits" in docs/reference.md), one limited with
``--held`` leases of the queue already running (SQLite and PostgreSQL walk them; Redis
counts them with one ZCOUNT since issue #20), and one rate-limited at 1,000,000 a second
(the claim then locks, reads and debits the bucket: "Queue rates"), taking turns in the
same run.

    python benchmarks/queue_limit_cost.py [--store sqlite,postgres,redis] [--jobs 600]
        [--repeat 5] [--chunk 50] [--held 50] [--dir DIR]
        [--pg postgresql://postgres@127.0.0.1:5432/postgres] [--redis redis://127.0.0.1:6379/0]

Each repetition gives each side a fresh store holding ``--jobs`` ready jobs (submitted
untimed with ``submit_many``), drained by the public sync API (``claim_next`` then
``complete``) in turns of ``--chunk`` cycles (A B, B A, ...: benchmarks/_common.py), so a
noise burst on the machine hits every side alike. The limited sides allow ``--held`` + 10
leases and the rate-limited one's bucket never runs dry, so the cycle is never refused.
Prints median cycles/s and the paired ratios to the
unlimited side. After every repetition it checks that every job but the held ones is done.
Exits 0.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable

from _common import Cycles, Side, fresh_store, interleave_chunks, machine_line, print_report

import tenure

OWNER = "bench-worker"
QUEUE = "default"


def _prepare(url: str, jobs: int, limit: int | None, held: int, rate: bool) -> None:
    with tenure.connect(url) as store:
        # The held leases are claimed first, by another owner, with a long lease: they run
        # for the whole repetition and the limited claim counts them each time.
        store.submit_many([{"job_id": f"h{i:06d}"} for i in range(held)])
        assert len(store.claim_many("holder", 3600, held)) == held if held else True
        for start in range(0, jobs, 500):
            batch = range(start, min(jobs, start + 500))
            store.submit_many([{"job_id": f"j{i:06d}"} for i in batch])
        if limit is not None:
            store.set_queue_limit(QUEUE, limit)
        if rate:
            store.set_queue_rate(QUEUE, 1_000_000)


def _check(url: str, jobs: int, done: int) -> None:
    assert done == jobs, (done, jobs)
    with tenure.connect(url) as store:
        assert store.get(f"j{jobs - 1:06d}").state == "done"


def side(
    store: str,
    name: str,
    args: argparse.Namespace,
    limit: int | None,
    held: int,
    rate: bool = False,
) -> Side:
    def open_side() -> tuple[Cycles, Callable[[int], None]]:
        url, analyze, drop = fresh_store(store, folder=args.dir, pg=args.pg, redis_url=args.redis)
        _prepare(url, args.jobs, limit, held, rate)
        analyze()

        def verify(done: int) -> None:
            _check(url, args.jobs, done)
            drop()

        return Cycles(tenure.connect(url), OWNER), verify

    return Side(name, open_side)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sqlite,postgres,redis")
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--held", type=int, default=50)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    print(f"queue limit and rate cost, claim_next + complete cycles; {machine_line()}")
    directory = args.dir or tempfile.mkdtemp(prefix="tenure-limits-")
    args.dir = directory
    held_name = f"limited, {args.held} held"
    try:
        for store in args.store.split(","):
            sides = [
                side(store, "unlimited", args, None, 0),
                side(store, "limited", args, 10, 0),
                side(store, held_name, args, args.held + 10, args.held),
                side(store, "rate-limited", args, None, 0, rate=True),
            ]
            results = interleave_chunks(sides, args.repeat, chunk=args.chunk)
            print_report(f"{store}: cycles/s", results, "unlimited", unit="cycles/s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
