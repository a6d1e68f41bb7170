"""What Redis's per-queue bookkeeping (issue #20) costs to read and to build: `queue_stats`
on a store of ``--jobs`` jobs (4 queues x 3 priorities, 250 leased per queue, 100 more of
the first queue leased and expired), then the first open of the same store as if written by
an older tenure (layout 2: no leases sets, no known queues), which indexes every job
(index_leases.lua), and a second open. A scratch key prefix, deleted at the end.

    python benchmarks/redis_queue_stats.py [--jobs 100000] [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import redis

import tenure

QUEUES = [f"q{n}" for n in range(4)]


def _fill(store: tenure.Store, jobs: int) -> None:
    for start in range(0, jobs, 1000):
        store.submit_many(
            [
                {"job_id": f"j{i}", "queue": QUEUES[i % 4], "priority": i % 3}
                for i in range(start, min(jobs, start + 1000))
            ]
        )
    for queue in QUEUES:
        store.claim_many("w", 600, 250, queues=[queue])
    store.claim_many("x", 0.05, 100, queues=[QUEUES[0]])
    time.sleep(0.2)  # those 100 leases expired


def _counts(store: tenure.Store) -> list[tuple[Any, ...]]:
    stats = store.queue_stats()
    assert stats is not None
    return [(q.queue, q.ready, q.scheduled, q.leased, q.expired) for q in stats.queues]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    prefix = f"bench-stats-{uuid.uuid4().hex[:8]}"
    tag = "{" + prefix + "}"
    url = f"{args.redis}{'&' if '?' in args.redis else '?'}prefix={prefix}"
    raw = redis.Redis.from_url(args.redis)
    try:
        with tenure.connect(url) as store:
            _fill(store, args.jobs)
            times = []
            for _ in range(20):
                start = time.perf_counter()
                counts = _counts(store)
                times.append(time.perf_counter() - start)
        median, low = statistics.median(times) * 1000, min(times) * 1000
        print(f"queue_stats, {args.jobs:,} jobs: median {median:.2f} ms, min {low:.2f} ms")
        print(f"  (queue, ready, scheduled, leased, expired): {counts}")
        # As a store of layout 2 left it: no leases sets, no known queues.
        raw.delete(tag + ":queues", *raw.scan_iter(match=tag + ":q:*:leased", count=1000))
        raw.hset(tag + ":meta", "layout", "2")
        start = time.perf_counter()
        with tenure.connect(url) as store:
            opened = time.perf_counter() - start
            assert _counts(store) == counts
        print(f"first open of it as a layout-2 store (index_leases): {opened:.2f} s, same counts")
        start = time.perf_counter()
        with tenure.connect(url):
            pass
        print(f"open again (layout 3): {(time.perf_counter() - start) * 1000:.1f} ms")
    finally:
        keys = list(raw.scan_iter(match=tag + ":*", count=5000))
        for n in range(0, len(keys), 5000):
            raw.delete(*keys[n : n + 5000])
        raw.close()


if __name__ == "__main__":
    main()
