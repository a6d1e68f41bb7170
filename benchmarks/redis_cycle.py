"""claim -> complete cycles on Redis: tenure against a raw redis-py loop running the very same
Lua scripts, in the same run; and batch claims against single claims.

    python benchmarks/redis_cycle.py [--url redis://127.0.0.1:6379/0] [--jobs 2000]
                                     [--repeat 7] [--chunk 50] [--workers 1,4,16]
                                     [--batch 50]

Each side of a repetition gets a fresh key prefix holding ``--jobs`` ready jobs (filled
untimed through the driver's own ``submit`` script, pipelined). A *cycle* is a claim then a
complete, until nothing is left to claim:

* **tenure**: ``tenure.connect(url)``, the public sync API (``claim_next`` + ``complete``):
  argument validation, a fresh lease secret and its SHA-256 per claim, the `Lease` and its
  seal, the driver's reply decoding and connection handling;
* **raw redis-py**: a ``redis.Redis`` client and ``register_script`` objects (EVALSHA,
  reloaded on NOSCRIPT) of the same ``claim_next`` and ``complete`` scripts with the same
  KEYS and ARGV, a fixed secret hash, only the reply fields the next call needs: what
  anyone would write with redis-py, the baseline of the ratio;
* **raw conn**: the same requests on one redis-py connection used directly (no client, no
  pool), as tenure's driver sends them: the least work redis-py can do for them. tenure's
  driver keeps recently used connections out of the pool, so it can beat the first raw
  loop; this one shows what is left.

Method (docs/benchmarks.md): with 1 worker both sides are open in this process and take
turns of ``--chunk`` cycles (A B, B A, ...) until both are drained; with W workers, W OS
processes run each turn together on one side's data (a barrier releases them), then on the
other's. For 1 worker the script also prints the client CPU time per cycle of each side,
which depends much less on other load on the machine than throughput does. Then, in one
process, it compares claims alone: ``claim_next`` one at a time against
``claim_many(owner, ttl, --batch)`` (one script run per batch), and the full cycle with
batch claims, completed one ``complete`` per job or one ``complete_many`` per batch. After
every repetition it checks that every job was claimed exactly once (done, or leased, at
generation 1), so a broken loop cannot pass for a fast one. ``--workers ''`` runs only the
batch comparisons.

The raw loop mirrors ``tenure/stores/redis/_driver_async.py``: if the driver's KEYS/ARGV change,
change ``RawCycles`` with it. Exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from _common import Result, Side, contend_chunks, interleave_chunks, machine_line, print_report

import tenure
from tenure.stores.redis import Keys, parse_redis_url
from tenure.stores.redis._common import SCRIPTS

OWNER = "bench-worker"
TTL = 60.0
QUEUE = "default"
RAW_SECRET_HASH = "0" * 64  # as long as a real one (sha256 hex)
RAW_RECEIPT = "1" * 64  # what a settle leaves in its place, as long as a real receipt


def store_url(base: str, prefix: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}prefix={prefix}"


def store_keys(r: Any, url: str) -> Keys:
    """The key names of the store at ``url`` (its clock key is named by its store id)."""
    prefix = parse_redis_url(url).prefix
    store_id = r.hget(Keys(prefix).meta, "store_id")
    if isinstance(store_id, bytes):
        store_id = store_id.decode()
    return Keys(prefix, store_id)


def client(base: str) -> Any:
    return redis.Redis.from_url(parse_redis_url(base).redis_url, decode_responses=True, protocol=2)


# -- the two sides -----------------------------------------------------------------------
# Each opens its connection (untimed), then ``step(limit)`` runs up to ``limit`` cycles and
# returns how many it ran: fewer means the queue is empty (that last, empty claim is part
# of the run on both sides). ``cpu`` accumulates the process CPU time spent in ``step``.


class TenureCycles:
    """The public API: ``tenure.connect``, ``claim_next``, ``complete``."""

    def __init__(self, url: str, owner: str) -> None:
        self.owner = owner
        self.store = tenure.connect(url)
        self.cpu = 0.0

    def step(self, limit: int) -> int:
        store, owner = self.store, self.owner
        cpu = time.process_time()
        done = 0
        while done < limit and (lease := store.claim_next(owner, TTL)) is not None:
            store.complete(lease)
            done += 1
        self.cpu += time.process_time() - cpu
        return done

    def close(self) -> None:
        self.store.close()


def claim_keys(keys: Keys) -> list[str]:
    """claim_next.lua's KEYS for one queue, as the driver passes them."""
    return [keys.clock, keys.paused, keys.limits, keys.rates, keys.candidates(QUEUE)]


class RawCycles:
    """A redis-py client running the driver's scripts through ``register_script`` objects
    (EVALSHA, reloaded on NOSCRIPT) with the driver's KEYS and ARGV: the ceiling (no
    validation, no secret, no Lease, only the reply fields the next call needs)."""

    def __init__(self, url: str, owner: str) -> None:
        self.r = client(url)
        keys = store_keys(self.r, url)
        self.keys = keys
        self.claim_next = self.r.register_script(SCRIPTS["claim_next"].text)
        self.complete = self.r.register_script(SCRIPTS["complete"].text)
        self.claim_keys = claim_keys(keys)
        self.claim_args = ["", owner, repr(TTL), keys.job_prefix, RAW_SECRET_HASH]
        self.owner = owner
        self.cpu = 0.0
        self.r.ping()

    def step(self, limit: int) -> int:
        keys, owner = self.keys, self.owner
        cpu = time.process_time()
        done = 0
        while done < limit:
            # The script answers one JSON string: [now, row, ...].
            reply = json.loads(self.claim_next(keys=self.claim_keys, args=self.claim_args))
            if len(reply) < 2:
                break
            row = reply[1]
            job_id, generation = row[1], row[5]  # each item: [status, *JOB_COLUMNS]
            self.complete(
                keys=[keys.job(job_id), keys.clock],
                args=["", owner, generation, RAW_SECRET_HASH, RAW_RECEIPT, "", "0"],
            )
            done += 1
        self.cpu += time.process_time() - cpu
        return done

    def close(self) -> None:
        self.r.close()


class RawConnectionCycles:
    """The same scripts on one redis-py connection used directly (``send_command`` and
    ``read_response``: no client, no pool), EVALSHA with EVAL on NOSCRIPT, as the driver
    does: the least work redis-py can do for these requests."""

    def __init__(self, url: str, owner: str) -> None:
        options = parse_redis_url(url)
        self.pool = redis.ConnectionPool.from_url(
            options.redis_url, decode_responses=True, protocol=2
        )
        self.conn = self.pool.make_connection()
        self.conn.connect()
        lookup = client(url)
        keys = store_keys(lookup, url)
        lookup.close()
        self.keys = keys
        self.owner = owner
        self.claim_call = (len(claim_keys(keys)), *claim_keys(keys))
        self.claim_call += ("", owner, repr(TTL), keys.job_prefix, RAW_SECRET_HASH)
        self.cpu = 0.0

    def _eval(self, name: str, *call: Any) -> Any:
        script = SCRIPTS[name]
        self.conn.send_command("EVALSHA", script.sha, *call)
        try:
            return self.conn.read_response()
        except redis.exceptions.NoScriptError:
            self.conn.send_command("EVAL", script.text, *call)
            return self.conn.read_response()

    def step(self, limit: int) -> int:
        keys, owner = self.keys, self.owner
        cpu = time.process_time()
        done = 0
        while done < limit:
            reply = json.loads(self._eval("claim_next", *self.claim_call))
            if len(reply) < 2:
                break
            row = reply[1]
            job_id, generation = row[1], row[5]  # each item: [status, *JOB_COLUMNS]
            self._eval(
                "complete",
                2,
                keys.job(job_id),
                keys.clock,
                "",
                owner,
                generation,
                RAW_SECRET_HASH,
                RAW_RECEIPT,
                "",
                "0",
            )
            done += 1
        self.cpu += time.process_time() - cpu
        return done

    def close(self) -> None:
        self.conn.disconnect()
        self.pool.disconnect()


class Claims:
    """Claims through the public API, ``batch`` per store operation (``claim_next`` when 1,
    ``claim_many`` otherwise); the jobs stay leased, or are completed one ``complete`` each,
    or (``many``) all of a batch in one ``complete_many``."""

    def __init__(self, url: str, owner: str, batch: int, complete: bool, many: bool) -> None:
        self.store = tenure.connect(url)
        self.owner = owner
        self.batch = batch
        self.complete = complete
        self.many = many

    def step(self, limit: int) -> int:
        store, owner = self.store, self.owner
        done = 0
        while done < limit:
            if self.batch == 1:
                lease = store.claim_next(owner, TTL)
                leases = [] if lease is None else [lease]
            else:
                leases = store.claim_many(owner, TTL, min(self.batch, limit - done))
            if not leases:
                break
            if self.many:
                if lost := store.complete_many(leases):
                    raise SystemExit(f"benchmark bug: {len(lost)} leases lost")
            elif self.complete:
                for lease in leases:
                    store.complete(lease)
            done += len(leases)
        return done

    def close(self) -> None:
        self.store.close()


Cycles = TenureCycles | RawCycles | RawConnectionCycles
SIDES: dict[str, type[Cycles]] = {
    "tenure": TenureCycles,
    "raw redis-py": RawCycles,
    "raw conn": RawConnectionCycles,
}


def open_side(index: int, side: str, urls: dict[str, str]) -> Cycles:
    """`contend_chunks` factory, run in each child process."""
    return SIDES[side](urls[side], f"{OWNER}-{index}")


# -- runs --------------------------------------------------------------------------------


class Stores:
    """Fresh prefixes filled with ``jobs`` ready jobs; checked and deleted after each run."""

    def __init__(self, base: str, jobs: int) -> None:
        self.base = base
        self.jobs = jobs
        self.r = client(base)

    def fresh(self) -> str:
        prefix = f"bench-{uuid.uuid4().hex[:10]}"
        url = store_url(self.base, prefix)
        # Untimed: the store made and filled through tenure's public batch submit.
        store = tenure.connect(url)
        try:
            for first in range(0, self.jobs, 1000):
                numbers = range(first, min(self.jobs, first + 1000))
                store.submit_many(
                    [
                        {"job_id": f"job-{n:07d}", "queue": QUEUE, "payload": {"n": n}}
                        for n in numbers
                    ]
                )
        finally:
            store.close()
        return store_url(self.base, prefix)

    def check_and_remove(self, url: str, claimed: int, state: str = "done") -> None:
        prefix = parse_redis_url(url).prefix
        keys = Keys(prefix)
        try:
            if claimed != self.jobs:
                raise SystemExit(f"benchmark bug: {claimed} claims for {self.jobs} jobs")
            pipe = self.r.pipeline(transaction=False)
            for number in range(self.jobs):
                pipe.hmget(keys.job(f"job-{number:07d}"), "s", "g")
            wrong = [fields for fields in pipe.execute() if fields != [state, "1"]]
            if wrong:
                raise SystemExit(
                    f"benchmark bug: {len(wrong)} jobs not {state} at generation 1 "
                    f"(first: {wrong[0]})"
                )
        finally:
            doomed = list(self.r.scan_iter(match="{" + prefix + "}:*", count=1000))
            for start in range(0, len(doomed), 1000):
                self.r.delete(*doomed[start : start + 1000])


# CPU time per cycle of each single-process repetition, per side: unlike throughput, it
# hardly depends on what else the machine is doing.
CPU_PER_CYCLE: dict[str, list[float]] = {}


def single(stores: Stores, side: str) -> Side:
    def open_() -> tuple[Cycles, Callable[[int], None]]:
        url = stores.fresh()
        runner = SIDES[side](url, OWNER)

        def verify(done: int) -> None:
            stores.check_and_remove(url, done)
            CPU_PER_CYCLE.setdefault(side, []).append(runner.cpu / done)

        return runner, verify

    return Side(side, open_)


def contending(stores: Stores, workers: int, chunk: int, repeat: int) -> list[Result]:
    """Like `interleave_chunks`, with ``workers`` processes in every turn."""
    results = [Result(side) for side in SIDES]
    for rep in range(1 + repeat):  # the first is a warm-up
        urls = {side: stores.fresh() for side in SIDES}
        try:
            totals = contend_chunks(open_side, workers, list(SIDES), stores.jobs, chunk, urls)
        except BaseException:
            for url in urls.values():
                stores.check_and_remove(url, -1)
            raise
        for result, (done, seconds) in zip(results, totals, strict=True):
            stores.check_and_remove(urls[result.name], done)
            if rep:
                result.rates.append(done / seconds)
    return results


def claims_side(stores: Stores, name: str, batch: int, complete: bool, many: bool = False) -> Side:
    def open_() -> tuple[Claims, Callable[[int], None]]:
        url = stores.fresh()
        return Claims(url, OWNER, batch, complete, many), lambda done: stores.check_and_remove(
            url, done, "done" if complete else "leased"
        )

    return Side(name, open_)


def _ratios(results: list[Result], name: str, baseline: str) -> str:
    mine = next(result for result in results if result.name == name)
    base = next(result for result in results if result.name == baseline)
    return f"{statistics.median(mine.paired(base)):.1%} ({mine.median / base.median:.1%})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0", help="Redis server")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per run (default 2000)")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions (default 7)")
    parser.add_argument(
        "--chunk", type=int, default=50, help="cycles per turn and process (default 50)"
    )
    parser.add_argument("--workers", default="1,4,16", help="worker counts (default 1,4,16)")
    parser.add_argument("--batch", type=int, default=50, help="claim_many size (default 50)")
    args = parser.parse_args(argv)
    worker_counts = [int(part) for part in args.workers.split(",") if part]
    if min(args.jobs, args.repeat, args.chunk, args.batch, *worker_counts) < 1:
        parser.error("--jobs, --repeat, --chunk, --batch and --workers must be at least 1")

    r = client(args.url)
    info = r.info("server")
    r.close()
    print(
        f"redis_cycle: claim -> complete, {args.jobs} jobs per run, {args.repeat} repetitions "
        f"(+1 warm-up), turns of {args.chunk} cycles per process"
    )
    print(f"{machine_line()}, Redis {info['redis_version']}, redis-py {redis.__version__}")
    stores = Stores(args.url, args.jobs)
    summary = []
    for workers in worker_counts:
        if workers == 1:
            results = interleave_chunks(
                [single(stores, side) for side in SIDES], args.repeat, chunk=args.chunk
            )
            title = "claim_next -> complete, 1 worker (this process)"
        else:
            results = contending(stores, workers, args.chunk, args.repeat)
            title = f"claim_next -> complete, {workers} worker processes (aggregate)"
        print_report(title, results, "raw redis-py", unit="cycles/s")
        summary.append(
            f"{workers} worker(s): tenure/raw redis-py "
            f"{_ratios(results, 'tenure', 'raw redis-py')}, tenure/raw conn "
            f"{_ratios(results, 'tenure', 'raw conn')}"
        )
        if workers == 1:
            # The first value of each side is the warm-up repetition's.
            cpu = {side: statistics.median(values[1:]) for side, values in CPU_PER_CYCLE.items()}
            print(
                "  client CPU per cycle (median): "
                + ", ".join(f"{side} {seconds * 1e6:.0f} us" for side, seconds in cpu.items())
            )
            summary.append(
                "client CPU per cycle, raw/tenure: "
                + ", ".join(
                    f"{side} {cpu[side] / cpu['tenure']:.1%}" for side in SIDES if side != "tenure"
                )
            )

    batch = f"claim_many({args.batch})"
    for complete, what, unit in (
        (False, "claims alone", "claims/s"),
        (True, "claim -> complete", "cycles/s"),
    ):
        sides = [
            claims_side(stores, "claim_next", 1, complete),
            claims_side(stores, batch, args.batch, complete),
        ]
        if complete:
            sides.append(claims_side(stores, f"{batch}+many", args.batch, True, many=True))
        results = interleave_chunks(
            sides,
            args.repeat,
            chunk=2 * args.batch,
        )
        print_report(
            f"{what}, 1 process (turns of {2 * args.batch})", results, "claim_next", unit=unit
        )
        summary.append(f"{what}: {batch}/claim_next {_ratios(results, batch, 'claim_next')}")
        if complete:
            summary.append(
                f"{what}: {batch}+complete_many/claim_next "
                f"{_ratios(results, f'{batch}+many', 'claim_next')}"
            )
    print("\nmedian of paired ratios (ratio of medians):")
    print("\n".join(f"  {line}" for line in summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
