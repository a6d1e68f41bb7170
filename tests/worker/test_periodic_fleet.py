"""The fleet test of periodic jobs (issue #18): several real worker processes, their clocks
skewed and sped up by faketime, serve one second-granularity schedule for 80 simulated
seconds each (130 s from the first start to the last stop: a minute's turn included);
every tick of the window exists exactly once in the store.

Each worker runs under ``faketime -f '<offset> x10'`` (FAKETIME_DONT_FAKE_MONOTONIC=1, so
the worker's timers and the test's bound stay real): 8 s of real time are 80 s of each
worker's clock. Not faster: at x20, on a machine at load average 8, each of the four
workers submitting every tick (a write transaction each) fell behind its clock on SQLite, by
up to 44 s of it when it was stopped, so the last ticks of the window were never submitted.

The stores keep their own time (the servers', or SQLite's boot clock), so a worker ahead
submits ticks long before the store's time reaches them: they wait, as delayed jobs, and
are the same jobs the others submit when their clocks get there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

import tenure
from tests.backends import IN_CI

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
OFFSETS = ("+30s", "+0s", "-20s", "+7s")
SPEED = 10
REAL_SECONDS = 8.0

CHILD = r"""
import sys, threading, time
import tenure

# libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 makes time.sleep fail (EINVAL from
# clock_nanosleep); timed waits on a lock work (as tenure.chaos._proc does).
_waiter = threading.Event()
time.sleep = lambda seconds: _waiter.wait(seconds) if seconds > 0 else None

worker = tenure.Worker(sys.argv[1], poll_interval=0.2, summary_every=0)

@worker.periodic("* * * * * *", queue="beat", payload={"n": 1})
def beat(ctx):
    pass

stopped = []

def stop():
    stopped.append(time.time())  # the worker's clock when it is asked to stop
    worker.stop()

started = time.time()
threading.Timer(float(sys.argv[2]), stop).start()
worker.run(install_signal_handlers=False)
print(started, stopped[0])
"""


def _tick(job_id: str) -> int:
    moment = datetime.strptime(job_id.removeprefix("cron:beat:"), "%Y-%m-%dT%H:%M:%SZ")
    return int(moment.replace(tzinfo=timezone.utc).timestamp())


def _scaled_timeouts(url: str) -> str:
    """``url`` with Redis's socket timeouts SPEED times the default: libfaketime's speed-up
    shortens the waits of poll() too, so the default 5 s would be 0.25 s real, which a
    loaded machine's connect outlasts (the other stores' clients time out by the real
    clock or not at all)."""
    if not url.startswith("redis"):
        return url
    seconds = 5 * SPEED
    return f"{url}{'&' if '?' in url else '?'}timeout={seconds}&connect_timeout={seconds}"


def test_every_tick_of_a_skewed_fleet_exists_once(url: str) -> None:
    faketime = shutil.which("faketime")
    if faketime is None:
        if IN_CI:
            pytest.fail("faketime is not installed (apt-get install faketime); CI needs it")
        pytest.skip("faketime is not installed: the fleet's clocks cannot be skewed")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    worker_url = _scaled_timeouts(url)
    children = [
        subprocess.Popen(
            [
                faketime,
                "-f",
                f"{offset} x{SPEED}",
                sys.executable,
                "-c",
                CHILD,
                worker_url,
                str(REAL_SECONDS),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for offset in OFFSETS
    ]
    spans = []
    errors = []
    for child in children:
        out, err = child.communicate(timeout=REAL_SECONDS + 30)
        assert child.returncode == 0, err[-3000:]
        errors.append(err[-2000:])
        start, end = map(float, out.split()[-2:])
        spans.append((start, end))
    # REAL_SECONDS sped up, each (a loaded machine starts a worker late, not early).
    assert all(end - start >= 0.9 * REAL_SECONDS * SPEED for start, end in spans), spans
    store = tenure.connect(url)
    try:
        ids = []
        cursor = None
        while True:
            page = store.jobs(queue="beat", limit=1000, cursor=cursor)
            ids.extend(job.job_id for job in page)
            cursor = page.next_cursor
            if cursor is None:
                break
    finally:
        store.close()
    assert len(ids) == len(set(ids))
    ticks = sorted(_tick(job_id) for job_id in ids)
    # Every second of the run, none twice. The run's edges are left out by 1 s real (SPEED
    # s of the sped-up clocks) each, since a loaded machine stretches them that long: at
    # the start, each worker counts from when its loop starts, after connecting (its
    # recorded start is before); at the end, ticks after a worker's last look are never
    # its to submit. The first tick comes soon after the earliest start.
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    assert ticks
    assert ticks[0] <= first + 3.0 * SPEED, (ticks[0], first)
    expected = set(range(int(ticks[0] + 1.0 * SPEED), int(last - 1.0 * SPEED)))
    # Most of the 130 s from the earliest start to the latest stop (offsets 50 s apart),
    # less the edges and a first tick up to 30 s late.
    assert len(expected) >= 70, (ticks[0], last)
    missing = sorted(expected - set(ticks))
    assert not missing, (
        f"{len(missing)} ticks never submitted, e.g. {missing[:5]}, spans {spans}: {errors}"
    )
    assert len(ticks) == len(set(ticks))
