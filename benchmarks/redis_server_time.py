"""Redis's own time per job: what the scripts of a claim -> complete cycle cost the server.

    PYTHONPATH=<tree>/src python benchmarks/redis_server_time.py
        [--url redis://127.0.0.1:6379/5] [--jobs 4000] [--batch 8] [--repeat 3]

The Worker's path on Redis: ``claim_many(batch)``, then ``complete_and_claim`` of each batch
until the queue is drained (one script run per batch). Before each repetition the script
runs ``CONFIG RESETSTAT``, after it reads ``INFO commandstats``: the time Redis spent in
``EVALSHA`` per job (the script runs, Lua included) and, per command the scripts called,
calls and µs per job (Redis counts the commands a script calls too). The server's time is
work, not waiting: it moves far less with the machine's load than jobs/s, and it is what a
fleet's workers share at 4 and 16 processes on two cores. Resets the server's statistics:
run it on a server of its own. Checks that every job was claimed once and is done.
Exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from collections import defaultdict

import redis
from _common import machine_line

import tenure

OWNER = "bench-worker"


def drain(
    url: str, client: redis.Redis, jobs: int, batch: int
) -> tuple[float, dict[str, tuple[float, float]]]:
    """One repetition: µs of EVALSHA per job, and per command (calls, µs) per job."""
    prefix = "st" + uuid.uuid4().hex[:10]
    store = tenure.connect(f"{url}?prefix={prefix}")
    try:
        for start in range(0, jobs, 1000):
            store.submit_many([{"job_id": f"j{n}"} for n in range(start, min(jobs, start + 1000))])
        client.config_resetstat()
        leases = store.claim_many(OWNER, 60, batch)
        done = 0
        claimed: set[str] = set()
        while leases:
            done += len(leases)
            claimed.update(lease.job_id for lease in leases)
            lost, leases = store.complete_and_claim(leases, OWNER, 60, batch)
            assert not lost
        stats = client.info("commandstats")
        assert done == len(claimed) == jobs, (done, len(claimed), jobs)  # each job once
        per_command = {
            name.removeprefix("cmdstat_"): (value["calls"] / done, value["usec"] / done)
            for name, value in stats.items()
            if name not in ("cmdstat_evalsha", "cmdstat_config|resetstat")
        }
        return stats["cmdstat_evalsha"]["usec"] / done, per_command
    finally:
        store.close()
        for key in client.scan_iter(f"*{prefix}*", count=1000):
            client.delete(key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/5")
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    client = redis.Redis.from_url(args.url)
    print(f"{machine_line()}, Redis {client.info('server')['redis_version']}")
    print(f"{args.jobs} jobs, batches of {args.batch}, {args.repeat} repetitions (+1 warm-up)")
    drain(args.url, client, min(args.jobs, 1000), args.batch)  # loads the scripts
    totals: list[float] = []
    commands: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for _ in range(args.repeat):
        total, per_command = drain(args.url, client, args.jobs, args.batch)
        totals.append(total)
        for name, figures in per_command.items():
            commands[name].append(figures)
    print(
        f"EVALSHA, server µs per job: median {statistics.median(totals):.1f} "
        f"({', '.join(f'{t:.1f}' for t in totals)})"
    )
    print(f"{'command':>18} {'calls/job':>10} {'µs/job':>8}")
    rows = sorted(
        (
            (statistics.median(u for _, u in v), statistics.median(c for c, _ in v), name)
            for name, v in commands.items()
        ),
        reverse=True,
    )
    for micros, calls, name in rows:
        print(f"{name:>18} {calls:10.2f} {micros:8.2f}")
    print(
        f"{'all called':>18} {sum(c for _, c, _ in rows):10.2f} {sum(u for u, _, _ in rows):8.2f}"
    )


if __name__ == "__main__":
    main()
