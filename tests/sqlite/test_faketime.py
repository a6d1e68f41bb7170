"""Real processes: a process of the same host whose wall clock is two hours off (an NTP step
in it alone, modelled by libfaketime with only the wall clock faked) neither takes a live
lease nor moves the SQLite store's time; the holder renews and completes as if nothing
happened. Nor does one whose boot clock a Linux time namespace shifts. (test_clock.py tells
the same story on manual clocks.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tenure
from tests.backends import unavailable

ROOT = Path(__file__).resolve().parents[2]
TTL = 30.0
CLOSE = 5.0  # seconds: "within a few seconds of real time"

pytestmark = pytest.mark.skipif(
    tenure.SystemClock().boot() is None,
    reason="no boot clock on this platform: SQLite store time is wall clock and floor",
)

# No sleeping in the child: with FAKETIME_DONT_FAKE_MONOTONIC=1 libfaketime 0.9.10 makes
# time.sleep fail (see tenure.chaos._proc), and the story needs none.
CHILD = r"""
import json, sys, time
import tenure

store = tenure.connect(sys.argv[1])
report = {"wall": time.time(), "store_now": store.now()}
report["took_live"] = store.claim("live", "skewed", 30.0) is not None
report["claim_next_took"] = [lease.job_id for lease in store.claim_many("skewed", 30.0, 5)]
job = store.get("live")
report["live"] = [job.owner, job.generation, job.lease_expired, job.as_of]
report["store_now_after"] = store.now()
store.close()
print(json.dumps(report))
"""


def run_child(url: str, wrapper: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """CHILD on the store at ``url``, started through ``wrapper`` (faketime, unshare)."""
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [*wrapper, sys.executable, "-c", CHILD, url],
        env={**os.environ, "PYTHONPATH": path, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def faketime(offset: str) -> list[str]:
    found = shutil.which("faketime")
    if found is None:
        unavailable("faketime is not installed (apt-get install faketime)")
        raise AssertionError("unreachable: unavailable() skips or fails")
    return [found, "-f", offset]


def time_namespace(url: str, boottime: int) -> dict[str, Any]:
    """CHILD in a new time namespace whose CLOCK_BOOTTIME runs ``boottime`` s ahead."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    done = run_child(url, [unshare, "--time", "--boottime", str(boottime)])
    if done.returncode != 0 and "unshare" in done.stderr:
        # Creating a time namespace takes CAP_SYS_ADMIN (and Linux 5.6): a privilege this
        # test may not have, not a missing tool.
        pytest.skip(f"cannot create a time namespace here: {done.stderr.strip()[-200:]}")
    return report_of(done)


def held(url: str) -> tuple[tenure.Store, tenure.Lease]:
    """This process, on the real clock: a store with a job leased to it and a free one."""
    holder = tenure.connect(url)
    holder.submit("live")
    lease = holder.claim("live", "holder", TTL)
    assert lease is not None
    holder.submit("free")
    return holder, lease


@pytest.mark.parametrize(("offset", "seconds"), [("+2h", 7200.0), ("-2h", -7200.0)])
def test_a_process_two_hours_off_neither_steals_nor_moves_store_time(
    tmp_path: Path, offset: str, seconds: float
) -> None:
    url = f"sqlite:///{tmp_path / 'tenure.db'}"
    wrapper = faketime(offset)
    holder, lease = held(url)
    try:
        # The wall clock alone, as an NTP step moves it: faked, CLOCK_BOOTTIME would be too.
        report = report_of(run_child(url, wrapper, FAKETIME_DONT_FAKE_MONOTONIC="1"))
        real = time.time()

        # The child's wall clock really was off; the store's time was not.
        assert abs(report["wall"] - real - seconds) < CLOSE, report
        assert abs(report["store_now"] - real) < CLOSE, report
        assert abs(report["store_now_after"] - real) < CLOSE, report
        # It did not take the live lease, by id or by claim_next (only the free job).
        assert report["took_live"] is False
        assert report["claim_next_took"] == ["free"]
        assert report["live"][:3] == ["holder", 1, False]
        # And it left store time where real time is: the holder renews and completes, its
        # lease measured from now, not from two hours away.
        assert abs(holder.now() - time.time()) < CLOSE
        lease = holder.renew(lease)
        assert abs(lease.lease_until - TTL - time.time()) < CLOSE
        holder.complete(lease, "by the holder")
        job = holder.get("live")
        assert (job.state, job.owner, job.generation, job.result) == (
            "done",
            "holder",
            1,
            "by the holder",
        )
    finally:
        holder.close()


def test_a_process_in_a_shifted_time_namespace_reads_the_hosts_boot_clock(tmp_path: Path) -> None:
    # Same boot id, but CLOCK_BOOTTIME two hours ahead in there (`unshare --time`, a
    # container restored by CRIU): its reading, with the namespace's shift taken off, is
    # the host's.
    url = f"sqlite:///{tmp_path / 'tenure.db'}"
    holder, lease = held(url)
    try:
        report = time_namespace(url, 7200)
        assert abs(report["store_now"] - time.time()) < CLOSE, report
        assert report["took_live"] is False
        assert report["claim_next_took"] == ["free"]
        holder.complete(holder.renew(lease))
    finally:
        holder.close()
