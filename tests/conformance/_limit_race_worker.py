"""One worker process of the queue-limit race (tests/conformance/test_queue_limit_race.py).

Run as ``python _limit_race_worker.py '<json config>'``. It opens the store with real
clocks and takes jobs of the one limited queue by every kind of claim (claim_next,
claim_many, complete_and_claim, claim of a named job) until the parent says stop or no job
is left, holding each lease a moment and then completing, releasing or failing it, and now
and then letting one expire (a stalled holder: its place must come free). It prints one
JSON document: each lease it was granted and each renewal, with the lease's end by store
time, so the parent can tell where every lease ended even when it expired.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import tenure


def main() -> None:
    config = json.loads(sys.argv[1])
    owner: str = config["owner"]
    queues = [config["queue"]]
    jobs: list[str] = config["jobs"]
    rng = random.Random(config["seed"])
    stop = Path(config["stop"])
    leases: list[dict[str, Any]] = []
    store = tenure.connect(config["url"])
    store.now()  # connected: say so, the parent starts the race's clock once all are
    (stop.parent / f"ready-{owner}").touch()

    def granted(*taken: tenure.Lease) -> list[tenure.Lease]:
        for lease in taken:
            leases.append(
                {
                    "job": lease.job_id,
                    "generation": lease.generation,
                    "lease_until": lease.lease_until,
                }
            )
        return list(taken)

    # The first worker's first settled lease always stalls, so that every run has a lease
    # that expires (a 10 % chance per lease alone left some runs without one).
    stall_first: bool = config.get("stall_first", False)
    stalled = False

    def settle(lease: tenure.Lease) -> None:
        nonlocal stalled
        roll = rng.random()
        try:
            if roll < 0.1 or (stall_first and not stalled):
                stalled = True
                return  # stalled: the lease runs out by itself
            time.sleep(rng.uniform(0, 0.004))
            if roll < 0.2:
                renewed = store.renew(lease)
                granted(renewed)
                lease = renewed
            if roll < 0.3:
                store.release(lease)
            elif roll < 0.4:
                store.fail(lease, "planned", retry_in=0)
            else:
                store.complete(lease)
        except tenure.LeaseLost:
            pass  # cancelled by nobody here; only a lease that ran out ends so

    try:
        held: list[tenure.Lease] = []
        while not stop.exists():
            roll = rng.random()
            ttl = config["ttl"]
            if roll < 0.3:
                lease = store.claim_next(owner, ttl, queues=queues)
                taken = granted(lease) if lease else []
            elif roll < 0.55:
                taken = granted(*store.claim_many(owner, ttl, rng.randint(2, 5), queues=queues))
            elif roll < 0.8 and held:
                _lost, more = store.complete_and_claim(
                    held, owner, ttl, rng.randint(1, 4), queues=queues
                )
                held = []
                taken = granted(*more)
            else:
                lease = store.claim(rng.choice(jobs), owner, ttl)
                taken = granted(lease) if lease else []
            if not taken:
                time.sleep(0.001)
                continue
            # Keep one to complete with the next complete_and_claim, settle the others.
            for lease in taken:
                if not held and rng.random() < 0.5:
                    held.append(lease)
                else:
                    settle(lease)
        for lease in held:
            settle(lease)
    finally:
        store.close()
    json.dump({"owner": owner, "leases": leases}, sys.stdout)


if __name__ == "__main__":
    main()
