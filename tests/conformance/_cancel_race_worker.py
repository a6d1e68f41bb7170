"""One worker process of the cancel race (tests/conformance/test_control_race_processes.py).

Run as ``python _cancel_race_worker.py '<json config>'``. It takes jobs with claim_next
until none is left once the parent has created the ``stop`` file (a requeue may make a job
ready again until then), renews each once or twice (a short pause between, so cancels from the
parent land on held leases) and completes it, and prints one JSON document: every lease it
got and what the store answered to each of its calls, with the reason of each `LeaseLost`.
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
    rng = random.Random(config["seed"])
    stop = Path(config["stop"])
    events: list[dict[str, Any]] = []
    with tenure.connect(config["url"]) as store:
        while True:
            lease = store.claim_next(owner, ttl=30.0)
            if lease is None:
                if stop.exists():
                    break
                time.sleep(0.002)
                continue
            events.append({"kind": "claim", "job": lease.job_id, "generation": lease.generation})
            try:
                for _ in range(rng.randint(1, 2)):
                    time.sleep(rng.uniform(0.0, 0.01))
                    lease = store.renew(lease)
                    events.append({"kind": "renew", "job": lease.job_id, "ok": True})
                store.complete(lease, owner)
                events.append(
                    {"kind": "complete", "job": lease.job_id, "generation": lease.generation}
                )
            except tenure.LeaseLost as lost:
                events.append(
                    {
                        "kind": "lost",
                        "job": lease.job_id,
                        "generation": lease.generation,
                        "reason": lost.reason,
                    }
                )
    print(json.dumps({"owner": owner, "events": events}))


if __name__ == "__main__":
    main()
