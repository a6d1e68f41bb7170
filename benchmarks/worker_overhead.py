"""The worker runtime's own CPU per job, without a store: `tenure.Worker` drains N no-op
jobs from an in-memory stand-in for the store (every call answers at once, after one turn
of the event loop), so what is measured is the runtime alone: claiming, slots, leases and
their keeper, handlers, settles and group commit.

    python benchmarks/worker_overhead.py [--jobs 10000] [--repeat 3] [--concurrency 10] [--sync]

It prints the process CPU time (all threads: the keeper's too) per job of each repetition
and their median. Run it on two trees (``PYTHONPATH=<tree>/src``) to compare them; the
stand-in only uses the worker's public seams (the store methods it calls).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from _common import machine_line

import tenure
import tenure.worker._worker as worker_module
from tenure import models
from tenure._clock import SystemClock

CLOCK = SystemClock()


class Stand:
    """Answers the worker's store calls from memory: ``left`` jobs to hand out."""

    url = "memory://"

    def __init__(self, template: models.Job) -> None:
        self.clock = CLOCK
        self.left = 0
        self.issued = 0
        self._template = template

    def _claims(self, owner: str, ttl: float, limit: int) -> list[Any]:
        claims = []
        while self.left > 0 and len(claims) < limit:
            self.left -= 1
            self.issued += 1
            job_id = f"job-{self.issued}"
            lease = models.Lease(
                job_id, owner, 1, 0.0, ttl, 1, CLOCK.monotonic() + ttl, "s" * 48, "memory"
            )
            claims.append((lease, dataclasses.replace(self._template, job_id=job_id)))
        return claims

    async def claim_jobs(self, owner: str, ttl: float, limit: int, **_: Any) -> list[Any]:
        await anyio.lowlevel.checkpoint()
        return self._claims(owner, ttl, limit)

    async def complete_and_claim_jobs(
        self, leases: list[Any], owner: str, ttl: float, limit: int, **_: Any
    ) -> tuple[list[Any], list[Any]]:
        await anyio.lowlevel.checkpoint()
        return [], self._claims(owner, ttl, limit)

    async def complete_many(self, leases: list[Any], results: Any = None) -> list[Any]:
        await anyio.lowlevel.checkpoint()
        return []

    async def complete(self, lease: Any, result: Any = None) -> None:
        await anyio.lowlevel.checkpoint()

    async def wait_for_jobs(self, **_: Any) -> None:
        await anyio.sleep(0.001)

    async def close(self) -> None:
        return None


class Renewer:
    """The keeper's own connection (sync): every renewal answers the same lease."""

    def renew(self, lease: Any) -> Any:
        return lease

    def close(self) -> None:
        return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--sync", action="store_true", help="a sync handler (default async)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'template.db'}"
        with tenure.connect(url) as store:  # one real job snapshot to copy
            store.submit("template", payload={"n": 1})
            template = store.get("template")
        stand = Stand(template)

        async def connect_stand(url: str, **options: Any) -> Stand:
            return stand

        # The worker opens its stores through these two names: the stand-in answers both.
        worker_module.connect_async = connect_stand  # type: ignore[assignment]
        worker_module.connect = lambda url, **options: Renewer()  # type: ignore[assignment]
        print(f"worker_overhead: {args.jobs} no-op jobs per run; {machine_line()}")
        costs = []
        for _ in range(args.repeat + 1):  # the first is a warm-up
            stand.left = args.jobs
            worker = tenure.Worker(url, concurrency=args.concurrency, ttl=60, summary_every=0)
            if args.sync:
                worker.register("default", lambda ctx: None)
            else:

                async def noop(ctx: tenure.JobContext) -> None:
                    return None

                worker.register("default", noop)
            started = time.process_time()
            worker.run(burst=True, install_signal_handlers=False)
            costs.append((time.process_time() - started) / args.jobs * 1e6)
            assert worker.stats()["completed"] == args.jobs, worker.stats()
    measured = costs[1:]
    kind = "sync" if args.sync else "async"
    print(
        f"{kind} handler, concurrency {args.concurrency}: CPU per job "
        f"{statistics.median(measured):.1f} us (runs: {', '.join(f'{c:.1f}' for c in measured)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
