"""Store time is the server's: a worker whose clock is an hour off neither steals a live
lease nor loses its own early.

The skewed worker is a separate process run under ``faketime`` (Debian's faketime package:
the whole process, libpq included, sees the shifted clock). Without faketime the child
shifts Python's time.time() itself (in CI faketime is required).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tenure
from tests.backends import IN_CI

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys, time
offset = float(os.environ.get("TENURE_TEST_CLOCK_OFFSET", "0"))
if offset:  # no faketime: shift this process's wall clock by hand
    _real = time.time
    time.time = lambda: _real() + offset
import tenure

store = tenure.connect(sys.argv[1])
report = {"client_time": time.time(), "store_now": store.now()}
report["stole_theirs"] = store.claim("theirs", "skewed", 2.0) is not None
taken = store.claim_many("skewed", 1.0, 5)
report["claim_next_took"] = [lease.job_id for lease in taken]
mine = taken[0]
report["mine_until"] = mine.lease_until
report["mine_store_now"] = store.now()
renewals = 0
for _ in range(3):  # hold it for longer than its TTL by renewing within it
    time.sleep(0.4)
    mine = store.renew(mine)
    renewals += 1
report["renewals"] = renewals
store.complete(mine, "done by the skewed worker")
store.close()
print(json.dumps(report))
"""


def _run_skewed(url: str, offset_seconds: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", CHILD, url]
    faketime = shutil.which("faketime")
    if faketime:
        command = [faketime, "-f", f"{offset_seconds:+d}s", *command]
    elif IN_CI:
        pytest.fail("faketime is not installed (apt-get install faketime); CI needs it")
    else:
        env["TENURE_TEST_CLOCK_OFFSET"] = str(offset_seconds)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("offset", [3600, -3600])
def test_worker_an_hour_off_neither_steals_nor_loses(
    open_real_store: Callable[..., tenure.Store], url: str, offset: int
) -> None:
    honest = open_real_store()
    honest.submit("theirs")
    honest.submit("mine")
    theirs = honest.claim("theirs", "honest", 30)
    assert theirs is not None
    report = _run_skewed(url, offset)

    # The child's clock really was off; the store's time was not.
    assert abs(report["client_time"] - honest.now() - offset) < 30
    assert abs(report["store_now"] - report["client_time"] + offset) < 30
    assert abs(report["mine_store_now"] - time.time()) < 30
    # It did not take the live lease, by id or by claim_next (only its own job was free).
    assert report["stole_theirs"] is False
    assert report["claim_next_took"] == ["mine"]
    # Its own lease was measured on the server's clock and kept by renewing within the TTL.
    assert abs(report["mine_until"] - report["mine_store_now"] - 1.0) < 1.0
    assert report["renewals"] == 3
    mine = honest.get("mine")
    assert (mine.state, mine.owner, mine.result) == ("done", "skewed", "done by the skewed worker")
    assert mine.generation == 1
    job = honest.get("theirs")
    assert (job.state, job.owner, job.generation) == ("leased", "honest", 1)
    honest.complete(theirs)
