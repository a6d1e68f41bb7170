"""What priorities cost a claim, on every store: claim throughput with jobs spread over
``--levels`` priorities (default 5: -2 to 2) against the same jobs all at the default
priority, the same tenure code on two stores open at once, taking turns in the same run.

    python benchmarks/priority_cost.py [--store sqlite,postgres,redis] [--jobs 1000]
        [--repeat 7] [--chunk 50] [--levels 5] [--mode cycle|claim] [--dir DIR]
        [--pg postgresql://postgres@127.0.0.1:5432/postgres] [--redis redis://127.0.0.1:6379/0]

Each repetition gives each side a fresh store holding ``--jobs`` ready jobs (submitted
untimed with ``submit_many``; on the priority side job i has priority ``r mod levels -
levels // 2`` for a seeded random r, so the claim order is not the submit order), drained
by the public sync API in turns of ``--chunk`` operations (A B, B A, ...:
benchmarks/_common.py), so a noise burst on the machine hits both sides alike.

``--mode cycle`` (the default) times ``claim_next`` then ``complete``, what a worker does
per job; ``--mode claim`` times ``claim_next`` alone (the leases stay held until the
repetition ends), the claim's own cost undiluted by the complete. Prints median claims/s of
each side and the paired ratio priorities / default (the issue #18 target: at least 0.90).
After every repetition it checks that every job was claimed (and, in cycle mode, is done)
and, on the priority side, that the claims came highest priority first. Exits 0.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from collections.abc import Callable

from _common import Side, fresh_store, interleave_chunks, machine_line, print_report

import tenure

OWNER = "bench-worker"


class Claims:
    """claim_next (+ complete in cycle mode) on one store, ``limit`` per step; keeps the
    priority of each claim, in order, for the check."""

    def __init__(self, store: tenure.Store, complete: bool) -> None:
        self.store = store
        self.complete = complete
        self.order: list[str] = []

    def step(self, limit: int) -> int:
        for done in range(limit):
            lease = self.store.claim_next(OWNER, 600)
            if lease is None:
                return done
            self.order.append(lease.job_id)
            if self.complete:
                self.store.complete(lease)
        return limit

    def close(self) -> None:
        self.store.close()


def _priorities(jobs: int, levels: int) -> dict[str, int]:
    rng = random.Random(f"priority-cost:{jobs}:{levels}")
    low = -(levels // 2)
    return {f"j{i:06d}": low + rng.randrange(levels) for i in range(jobs)}


def _prepare(url: str, priorities: dict[str, int] | None, jobs: int) -> None:
    ids = [f"j{i:06d}" for i in range(jobs)]
    with tenure.connect(url) as store:
        for start in range(0, jobs, 500):
            store.submit_many(
                [
                    {"job_id": job_id, "priority": priorities[job_id] if priorities else 0}
                    for job_id in ids[start : start + 500]
                ]
            )


def _check(
    url: str, claims: Claims, jobs: int, done: int, priorities: dict[str, int] | None
) -> None:
    assert done == jobs, (done, jobs)
    assert len(set(claims.order)) == jobs
    if priorities is not None:  # one claimer, nothing retried: strictly by priority
        got = [priorities[job_id] for job_id in claims.order]
        assert got == sorted(got, reverse=True), "claims not highest priority first"
    with tenure.connect(url) as store:
        last = store.get(claims.order[-1])
        assert last.state == ("done" if claims.complete else "leased"), last.state


def side(store: str, name: str, args: argparse.Namespace, levels: int | None) -> Side:
    priorities = _priorities(args.jobs, levels) if levels else None

    def open_side() -> tuple[Claims, Callable[[int], None]]:
        url, analyze, drop = fresh_store(store, folder=args.dir, pg=args.pg, redis_url=args.redis)
        _prepare(url, priorities, args.jobs)
        analyze()
        claims = Claims(tenure.connect(url), args.mode == "cycle")

        def verify(done: int) -> None:
            _check(url, claims, args.jobs, done, priorities)
            drop()

        return claims, verify

    return Side(name, open_side)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sqlite,postgres,redis")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--levels", type=int, default=5)
    parser.add_argument("--mode", choices=("cycle", "claim"), default="cycle")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    what = "claim_next + complete cycles" if args.mode == "cycle" else "claim_next calls"
    print(f"priority cost, {what}, {args.jobs} jobs; {machine_line()}")
    directory = args.dir or tempfile.mkdtemp(prefix="tenure-priorities-")
    args.dir = directory
    levels = f"{args.levels} priorities"
    try:
        for store in args.store.split(","):
            sides = [side(store, "default", args, None), side(store, levels, args, args.levels)]
            results = interleave_chunks(sides, args.repeat, chunk=args.chunk)
            print_report(f"{store}: claims/s", results, "default", unit="claims/s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
