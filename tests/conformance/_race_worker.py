"""One worker process of the race test (tests/conformance/test_races.py).

Run as ``python _race_worker.py '<json config>'``. It opens the store with real clocks and
takes jobs with claim_next until none is left, doing what a worker does most of the time
(complete, sometimes after a renewal) and, now and then, what goes wrong: it stalls past a
short lease, gives the job back, or fails it. It prints one JSON document: every request it
made, with the monotonic times it sent it and got the answer (CLOCK_MONOTONIC is one clock
for every process on the host), so the parent can check the histories against each other.
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

import tenure


def main() -> None:
    config = json.loads(sys.argv[1])
    owner: str = config["owner"]
    rng = random.Random(config["seed"])
    events: list[dict[str, Any]] = []
    store = tenure.connect(config["url"])

    def record(kind: str, lease: tenure.Lease, sent: float, ok: bool, **extra: Any) -> None:
        events.append(
            {
                "kind": kind,
                "job": lease.job_id,
                "generation": lease.generation,
                "owner": lease.owner,
                "sent": sent,
                "received": time.monotonic(),
                "ok": ok,
                **extra,
            }
        )

    def act(kind: str, lease: tenure.Lease, call: Any, **extra: Any) -> Any:
        sent = time.monotonic()
        try:
            result = call()
        except tenure.LeaseLost as exc:
            record(kind, lease, sent, False, error=str(exc), **extra)
            return None
        record(kind, lease, sent, True, **extra)
        return result

    try:
        while True:
            roll = rng.random()
            plan = (
                "stall"
                if roll < config["stall"]
                else "release"
                if roll < config["stall"] + config["release"]
                else "fail"
                if roll < config["stall"] + config["release"] + config["fail"]
                else "renew"
                if roll < 0.2
                else "complete"
            )
            ttl = config["short_ttl"] if plan == "stall" else config["ttl"]
            sent = time.monotonic()
            lease = store.claim_next(owner, ttl)
            if lease is None:
                if not store.jobs(state="ready", limit=1) and not store.jobs(
                    state="leased", limit=1
                ):
                    break
                store.wait_for_jobs(timeout=0.05)
                continue
            record(
                "claim",
                lease,
                sent,
                True,
                lease_until=lease.lease_until,
                ttl=lease.ttl,
                plan=plan,
            )
            if plan == "stall":
                time.sleep(config["short_ttl"] * 1.5)  # past the lease, by any clock
                act(
                    "complete",
                    lease,
                    lambda lease=lease: store.complete(lease, owner),
                    stalled=True,
                )
            elif plan == "release":
                act("release", lease, lambda lease=lease: store.release(lease))
            elif plan == "fail":
                act("fail", lease, lambda lease=lease: store.fail(lease, "planned", retry_in=0))
            else:
                if plan == "renew":
                    renewed = act("renew", lease, lambda lease=lease: store.renew(lease))
                    if renewed is not None:
                        events[-1]["lease_until"] = renewed.lease_until
                        lease = renewed
                act("complete", lease, lambda lease=lease: store.complete(lease, owner))
    finally:
        store.close()
    json.dump({"owner": owner, "events": events}, sys.stdout)


if __name__ == "__main__":
    main()
