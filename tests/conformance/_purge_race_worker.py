"""One worker process of the purge race (tests/conformance/test_control_race_processes.py).

Run as ``python _purge_race_worker.py '<json config>'``. Until the parent creates the
``stop`` file, it walks a few shared job ids over and over: submits each (a purge by the
parent may have removed it since its last life), claims it by id and completes it, then
waits ``pause`` seconds (0: none). It prints one JSON document: every lease it got (job id
and generation).
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
    ids: list[str] = config["ids"]
    rng = random.Random(config["seed"])
    stop = Path(config["stop"])
    pause: float = config.get("pause", 0.0)
    claims: list[dict[str, Any]] = []
    with tenure.connect(config["url"]) as store:
        while not stop.exists():
            if pause:
                time.sleep(pause)
            job_id = rng.choice(ids)
            store.submit(job_id)
            try:
                lease = store.claim(job_id, owner, ttl=30.0)
            except tenure.JobNotFound:
                continue  # purged between this submit and this claim
            if lease is None:
                continue  # held by another process, or done and not purged yet
            claims.append({"job": job_id, "generation": lease.generation})
            store.complete(lease)  # a LeaseLost here (none is expected) fails the test
    print(json.dumps({"owner": owner, "claims": claims}))


if __name__ == "__main__":
    main()
