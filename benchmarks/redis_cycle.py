"""claim -> complete cycles on Redis: tenure against a raw redis-py loop running the very same
Lua scripts, in the same run; and batch claims against single claims.

    python benchmarks/redis_cycle.py [--url redis://127.0.0.1:6379/0] [--jobs 2000]
                                     [--repeat 5] [--workers 1,4,16] [--batch 50]

Each run gets a fresh key prefix holding ``--jobs`` ready jobs (filled untimed through the
driver's own ``submit`` script, pipelined), then W workers (W = 1: this process; W > 1:
W OS processes released together) drain it with cycles of claim + complete:

* **tenure**: ``tenure.connect(url)``, the public sync API (``claim_next`` + ``complete``):
  argument validation, a fresh lease secret and its SHA-256 per claim, the `Lease`, the
  driver's own connection handling;
* **raw redis-py**: a ``redis.Redis`` client and ``register_script`` objects (EVALSHA,
  reloaded on NOSCRIPT) of the same ``claim_next`` and ``complete`` scripts with the same
  KEYS and ARGV, a fixed secret hash, only the reply fields the next call needs: the
  ceiling for this design.

The sides alternate (ABBA...) and the script prints median cycles/s and tenure/raw for each
W (and, for W = 1, the client CPU time per cycle of each side, which depends much less on
other load on the machine than throughput does). Then, in one process, it compares claims
alone: ``claim_next`` one at a time against ``claim_many(owner, ttl, --batch)`` (one script
run per batch), and the full cycle with batch claims. After every run it checks that every
job was claimed exactly once (done, or leased, at generation 1), so a broken loop cannot pass
for a fast one.

The raw loop mirrors ``tenure/stores/redis/_aio.py``: if the driver's KEYS/ARGV change,
change ``raw_cycles`` with it. Exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from _common import Case, contend, interleave, machine_line, print_report, timed

import tenure
from tenure.stores.redis import Keys, encode, parse_redis_url
from tenure.stores.redis._common import SCRIPTS

OWNER = "bench-worker"
TTL = 60.0
QUEUE = "default"
RAW_SECRET_HASH = "0" * 64  # as long as a real one (sha256 hex)


def store_url(base: str, prefix: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}prefix={prefix}"


def client(base: str) -> Any:
    return redis.Redis.from_url(parse_redis_url(base).redis_url, decode_responses=True, protocol=2)


# -- the two sides -----------------------------------------------------------------------


def tenure_cycles(url: str, owner: str) -> Callable[[], int]:
    store = tenure.connect(url)

    def loop() -> int:
        done = 0
        try:
            while (lease := store.claim_next(owner, TTL)) is not None:
                store.complete(lease)
                done += 1
        finally:
            store.close()
        return done

    return loop


def raw_cycles(url: str, owner: str) -> Callable[[], int]:
    r = client(url)
    keys = Keys(parse_redis_url(url).prefix)
    claim_next = r.register_script(SCRIPTS["claim_next"].text)
    complete = r.register_script(SCRIPTS["complete"].text)
    claim_keys = [keys.clock, keys.candidates(QUEUE)]
    claim_args = ["", owner, repr(TTL), keys.job_prefix, RAW_SECRET_HASH]
    r.ping()

    def loop() -> int:
        done = 0
        try:
            while True:
                reply = claim_next(keys=claim_keys, args=claim_args)
                if len(reply) < 2:
                    return done
                row = reply[1]
                job_id, generation = row[0], row[4]
                complete(
                    keys=[keys.job(job_id), keys.clock],
                    args=["", owner, generation, RAW_SECRET_HASH, "", "0"],
                )
                done += 1
        finally:
            r.close()

    return loop


SIDES: dict[str, Callable[[str, str], Callable[[], int]]] = {
    "tenure": tenure_cycles,
    "raw redis-py": raw_cycles,
}


def worker(index: int, side: str, url: str) -> Callable[[], int]:
    """`contend` factory: runs in a child process."""
    return SIDES[side](url, f"{OWNER}-{index}")


# -- runs --------------------------------------------------------------------------------


class Stores:
    """Fresh prefixes filled with ``jobs`` ready jobs; checked and deleted after each run."""

    def __init__(self, base: str, jobs: int) -> None:
        self.base = base
        self.jobs = jobs
        self.r = client(base)

    def fresh(self) -> str:
        prefix = f"bench-{uuid.uuid4().hex[:10]}"
        keys = Keys(prefix)
        submit = SCRIPTS["submit"]
        self.r.script_load(submit.text)
        pipe = self.r.pipeline(transaction=False)
        for number in range(self.jobs):
            job_id = f"job-{number:07d}"
            pipe.evalsha(
                submit.sha,
                7,
                keys.job(job_id),
                keys.candidates(QUEUE),
                keys.listing(QUEUE),
                keys.jobs,
                keys.seq,
                keys.clock,
                keys.wake(QUEUE),
                "",
                job_id,
                QUEUE,
                encode(job_id),
                f'{{"n": {number}}}',
                "1",
                "0.0",
                "5",
            )
            if len(pipe) >= 500:
                pipe.execute()
        pipe.execute()
        return store_url(self.base, prefix)

    def check_and_remove(self, url: str, claimed: int, state: str = "done") -> None:
        prefix = parse_redis_url(url).prefix
        keys = Keys(prefix)
        if claimed != self.jobs:
            raise SystemExit(f"benchmark bug: {claimed} claims for {self.jobs} jobs")
        pipe = self.r.pipeline(transaction=False)
        for number in range(self.jobs):
            pipe.hmget(keys.job(f"job-{number:07d}"), "s", "g")
        wrong = [fields for fields in pipe.execute() if fields != [state, "1"]]
        if wrong:
            raise SystemExit(f"benchmark bug: {len(wrong)} jobs not {state} at generation 1")
        doomed = list(self.r.scan_iter(match="{" + prefix + "}:*", count=1000))
        for start in range(0, len(doomed), 1000):
            self.r.delete(*doomed[start : start + 1000])


# Client CPU time per cycle of the single-process runs, per side: unlike throughput, it
# hardly depends on what else the machine is doing.
CPU_PER_CYCLE: dict[str, list[float]] = {}


def cycles_case(stores: Stores, side: str, workers: int) -> Case:
    def run() -> tuple[int, float]:
        url = stores.fresh()
        if workers == 1:
            loop = SIDES[side](url, OWNER)
            cpu = time.process_time()
            cycles, seconds = timed(loop)
            cpu = time.process_time() - cpu
            CPU_PER_CYCLE.setdefault(side, []).append(cpu / cycles)
        else:
            cycles, seconds = contend(worker, workers, side, url)
        stores.check_and_remove(url, cycles)
        return cycles, seconds

    return Case(side, run)


def claims_case(stores: Stores, name: str, batch: int, complete: bool) -> Case:
    """One process claiming (and completing, if asked) every job, ``batch`` at a time."""

    def run() -> tuple[int, float]:
        url = stores.fresh()
        store = tenure.connect(url)

        def loop() -> int:
            done = 0
            while leases := (
                store.claim_many(OWNER, TTL, batch)
                if batch > 1
                else [lease for lease in [store.claim_next(OWNER, TTL)] if lease]
            ):
                done += len(leases)
                if complete:
                    for lease in leases:
                        store.complete(lease)
            return done

        try:
            claimed, seconds = timed(loop)
        finally:
            store.close()
        stores.check_and_remove(url, claimed, "done" if complete else "leased")
        return claimed, seconds

    return Case(name, run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0", help="Redis server")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per run (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="measured runs per side")
    parser.add_argument("--workers", default="1,4,16", help="worker counts (default 1,4,16)")
    parser.add_argument("--batch", type=int, default=50, help="claim_many size (default 50)")
    args = parser.parse_args(argv)
    worker_counts = [int(part) for part in args.workers.split(",") if part]
    if args.jobs < 1 or args.repeat < 1 or not worker_counts or min(worker_counts) < 1:
        parser.error("--jobs, --repeat and --workers must be at least 1")

    r = client(args.url)
    info = r.info("server")
    r.close()
    print(
        f"redis_cycle: claim -> complete, {args.jobs} jobs per run, {args.repeat} runs per "
        f"side (+1 warm-up)"
    )
    print(f"{machine_line()}, Redis {info['redis_version']}, redis-py {redis.__version__}")
    stores = Stores(args.url, args.jobs)
    summary = []
    for workers in worker_counts:
        results = interleave([cycles_case(stores, side, workers) for side in SIDES], args.repeat)
        label = "1 worker (this process)" if workers == 1 else f"{workers} worker processes"
        ratios = print_report(
            f"claim_next -> complete, {label}", results, "raw redis-py", unit="cycles/s"
        )
        summary.append(f"{workers}w tenure/raw = {ratios['tenure']:.1%}")
        if workers == 1:
            # The first value of each side is the warm-up repetition's.
            cpu = {side: statistics.median(values[1:]) for side, values in CPU_PER_CYCLE.items()}
            print(
                "  client CPU per cycle (median): "
                + ", ".join(f"{side} {seconds * 1e6:.0f} us" for side, seconds in cpu.items())
                + f"; raw/tenure = {cpu['raw redis-py'] / cpu['tenure']:.1%}"
            )
            summary.append(f"CPU raw/tenure = {cpu['raw redis-py'] / cpu['tenure']:.1%}")

    results = interleave(
        [
            claims_case(stores, "claim_next", 1, complete=False),
            claims_case(stores, f"claim_many({args.batch})", args.batch, complete=False),
        ],
        args.repeat,
    )
    ratios = print_report("claims alone, 1 process", results, "claim_next", unit="claims/s")
    summary.append(f"batch/single claims = {ratios[f'claim_many({args.batch})']:.2f}x")

    results = interleave(
        [
            claims_case(stores, "claim_next", 1, complete=True),
            claims_case(stores, f"claim_many({args.batch})", args.batch, complete=True),
        ],
        args.repeat,
    )
    ratios = print_report(
        "claim -> complete cycles, 1 process", results, "claim_next", unit="cycles/s"
    )
    summary.append(f"batch/single cycles = {ratios[f'claim_many({args.batch})']:.2f}x")
    print("\n" + "; ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
