"""A real chaos run of the flow workload: `tenure chaos --workload flow` as a user runs it.
Three workers run jobs of five priorities over four queues, two of them limited through
the store (to 1 and 3 leases at once, fleet-wide) and one rate-limited (4 jobs started a
second, in bursts of at most 2), some jobs with a timeout of their own
that their handler overruns, under pauses, kills and clock skew; the checker must find
I1-I5 held, and I6: no moment with more leases of a limited queue than its limit, no window
with more starts in the rated queue than its bucket allows.

Kept short for CI's time: one run of a few seconds, on SQLite, without storm processes
(each is a process to start and stop; the pauses here bite without them: a worker stopped
mid-complete or mid-write for over a TTL loses its lease to another worker).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tenure.chaos import Fault, make_schedule
from tests.backends import SQLITE

pytestmark = pytest.mark.slow

WORKERS, TTL, DURATION, INTERVAL, JOBS = 3, 1.0, 3.5, 0.4, 40
RUNS = 3  # seeds to try before a run that proved nothing fails the test
FAULTS = ("pause", "pause-handler", "pause-renew", "pause-complete", "kill", "skew")


def _bites(fault: Fault, faults: list[Fault]) -> bool:
    """A stop mid-complete or mid-write that will likely bite: once the workers are up (they
    take a second or so to start, while the faults already run), for 1.5 TTL or more, and
    early enough to last that long before the faults stop (the end of the faults resumes
    every stopped process), its worker not killed meanwhile (a restarting process reaches
    no point). Its lease then runs out and another worker takes the job over."""
    if fault.kind not in ("pause-complete", "pause-handler"):
        return False
    if fault.params["duration"] < 1.5 * TTL:
        return False
    if not 0.8 <= fault.at <= DURATION - 1.5 * TTL - 0.5:
        return False
    end = fault.at + fault.params["window"] + fault.params["duration"]
    return not any(
        other.kind == "kill" and other.target == fault.target and fault.at - 1.0 <= other.at <= end
        for other in faults
    )


def _seeds() -> list[int]:
    """The first seeds whose schedule has two stops that will likely bite."""
    found = []
    for seed in range(1, 2000):
        faults = make_schedule(
            seed,
            store="sqlite",
            workers=WORKERS,
            ttl=TTL,
            duration=DURATION,
            interval=INTERVAL,
            kinds=FAULTS,
        )
        if sum(_bites(f, faults) for f in faults) >= 2:
            found.append(seed)
            if len(found) == RUNS:
                return found
    raise AssertionError("no seed found")


def _run(tmp_path: Path, seed: int) -> tuple[int, list[str]]:
    with SQLITE.isolated_url(tmp_path / str(seed)) as url:
        out = tmp_path / str(seed) / "run"
        command = [
            *(sys.executable, "-m", "tenure", "--store", url, "chaos", "--workload", "flow"),
            *("--workers", str(WORKERS), "--ttl", str(TTL), "--duration", str(DURATION)),
            *("--jobs", str(JOBS), "--fault-interval", str(INTERVAL), "--seed", str(seed)),
            *("--faults", ",".join(FAULTS), "--storm", "0", "--drain-timeout", "30"),
            *("--out", str(out), "--no-png"),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=90)
        lines = done.stdout.strip().splitlines()
        assert lines, done.stderr[-3000:]
        return done.returncode, lines


def test_flow_chaos_run_keeps_i1_to_i6(tmp_path: Path) -> None:
    """A run whose faults did not bite (UNPROVEN, exit 3: a loaded machine can start the
    workers too late for the stops to meet them) violated nothing but proved nothing; the
    next seed runs then. Any violation fails at once."""
    for seed in _seeds():
        (tmp_path / str(seed)).mkdir()
        code, lines = _run(tmp_path, seed)
        output = "\n".join(lines)
        assert code in (0, 3), output
        if code == 0:
            break
    assert code == 0, f"{RUNS} runs, none of whose faults bit; the last:\n{output}"
    assert lines[-2].startswith(f"verdict: VALID: I1-I6 held on {JOBS} jobs"), output
    for line in lines:
        if line.startswith(("I1 ", "I2 ", "I3 ", "I4 ", "I5 ", "I6 ")):
            assert line.endswith(" ok"), output
    assert any(line.startswith("I6 queue limits") for line in lines), output
    assert f"{JOBS} done" in output, output
    assert "0 stranded" in output, output
    # Both limits were in force and used: the queue limited to 1 held one at a time;
    # the timeouts fired (and their jobs ended done all the same).
    limits = next(line for line in lines if line.startswith("limits: "))
    found = re.search(r"-limit1 at most 1 \(peak (\d+) over (\d+) leases\)", limits)
    assert found is not None, limits
    assert found[1] == "1", limits
    assert int(found[2]) >= 2, limits
    assert re.search(r"-limit3 at most 3 \(peak [1-3] over \d+ leases\)", limits), limits
    # The rate-limited queue started its jobs within its bucket, and some started at all.
    rated = re.search(
        r"-rate at most 4/s, burst 2 \(drew ([\d.]+) of 2 over (\d+) leases\)", limits
    )
    assert rated is not None, limits
    assert float(rated[1]) <= 2, limits
    assert int(rated[2]) >= 1, limits
    timeouts = re.search(r"timeouts: (\d+) attempts", limits)
    assert timeouts is not None, limits
    assert int(timeouts[1]) >= 1, limits
    print(output)  # the counts, for whoever runs it with -s
