"""One process of the unique-key race (tests/conformance/test_unique_race_processes.py).

Run as ``python _unique_race_worker.py '<json config>'``. It opens the store on real clocks,
says it is ready (a file), waits for the go (another file), then submits one job of its own
per key as fast as it can: even keys one by one, odd keys in one submit_many. It prints one
JSON list: each answer's job id, created flag and unique key.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import tenure


def main() -> None:
    config = json.loads(sys.argv[1])
    owner, keys = config["owner"], config["keys"]
    with tenure.connect(config["url"]) as store:
        store.now()  # connected (and the schema checked) before the start
        Path(config["ready"]).touch()
        go = Path(config["go"])
        while not go.exists():
            time.sleep(0.001)
        answers = [store.submit(f"{owner}-k{k}", unique_key=f"k{k}") for k in range(0, keys, 2)]
        answers += store.submit_many(
            [{"job_id": f"{owner}-k{k}", "unique_key": f"k{k}"} for k in range(1, keys, 2)]
        )
    json.dump(
        [{"job_id": j.job_id, "created": j.created, "unique_key": j.unique_key} for j in answers],
        sys.stdout,
    )


if __name__ == "__main__":
    main()
