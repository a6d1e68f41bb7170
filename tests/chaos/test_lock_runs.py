"""A real chaos run of the locks workload: `tenure chaos --workload locks` as a user runs
it. Three processes take one named lock under pauses, kills and clock skew, each holding
writing to the fenced sink with the lock's token; the checker must find I1-I5 held (no
token issued twice, tokens growing, one holder at a time by the store's clock, stale
renewals and releases refused, the sink's writes never going back to a lower token) and
the faults must have bitten: a stale holder's write refused by the sink.

Kept short (CI's time is tight): one run of a few seconds on each store, and another with
the next seed only when a run's faults did not bite (two at most).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure.chaos import Fault, make_schedule, store_kind
from tenure.chaos._lock_mode import LOCK_KINDS
from tests.backends import BACKENDS, Backend

pytestmark = pytest.mark.slow

TAKERS, TTL, DURATION, INTERVAL = 3, 1.0, 6.0, 0.6
# Pauses (aimed and not), kills and clock skew: the faults that make stale holders. The
# proxy and store faults of the default mix slow every holder down (fewer holdings, fewer
# takeovers in a short run); `tenure chaos --workload locks` runs them by default.
FAULTS = ("pause", "pause-handler", "pause-renew", "kill", "skew")
# Seeds to try before a run whose stale writes never reached the sink fails: two, as the
# schedules `_seeds` asks for are rare (seeds 620 and 4251 of the first 6,000).
STALL_RUNS = 2


def _clean_stall(fault: Fault, faults: list[Fault]) -> bool:
    """A mid-write stop that will likely bite: early enough (not in the first second,
    while the takers may still be starting; in the first half), long enough (1.5 TTL or
    more), and alone on its taker: no kill of it from a second before to the end of the
    stop (a restarting process reaches no point; a kill of the stopped one takes its late
    write with it), and no other pause of it meanwhile (one arm replaces the other, and
    another pause's end would resume it early)."""
    if fault.kind != "pause-handler" or fault.params["duration"] < 1.5 * TTL:
        return False
    if not 1.0 <= fault.at < DURATION / 2:
        return False
    end = fault.at + fault.params["window"] + fault.params["duration"]
    for other in faults:
        if other is fault or other.target != fault.target:
            continue
        if other.kind == "kill" and fault.at - 1.0 <= other.at <= end:
            return False
        if other.kind.startswith("pause") and fault.at - 3 * TTL <= other.at <= end:
            return False
    return True


def _seeds(url: str, count: int = STALL_RUNS) -> list[int]:
    """The first seeds whose schedule stops a lock taker mid-write (between stamping a write
    and sending it) twice in the first half of the run (not in its first second, while the
    takers may still be starting), each time for 1.5 TTL or more, and kills one: a stopped
    holder's lease runs out within a TTL, the next taker (woken at the expiry) takes the
    lock and writes with a greater token, so the stopped holder's write, sent when it
    resumes, reaches the sink after that one and is refused. (A kill of the stopped
    process while it is stopped would take that write with it.)"""
    found = []
    for seed in range(1, 10_000):
        faults = make_schedule(
            seed,
            store=store_kind(url),
            workers=TAKERS,
            ttl=TTL,
            duration=DURATION,
            interval=INTERVAL,
            kinds=FAULTS,
        )
        kills = [f for f in faults if f.kind == "kill"]
        stalls = [f for f in faults if _clean_stall(f, faults)]
        if len(stalls) >= 2 and kills:
            found.append(seed)
            if len(found) == count:
                return found
    raise AssertionError("no seed found")


def _lock_chaos(url: str, out: Path, seed: int) -> dict[str, Any]:
    """One locks run: its verdict (``--json``; the progress goes to stderr), its exit status
    and validity checked."""
    command = [
        *(sys.executable, "-m", "tenure", "--store", url, "--json", "chaos"),
        *("--workload", "locks", "--workers", str(TAKERS), "--ttl", str(TTL)),
        *("--duration", str(DURATION), "--fault-interval", str(INTERVAL), "--seed", str(seed)),
        *("--faults", ",".join(FAULTS)),
        *("--out", str(out), "--no-png"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert done.stdout.strip(), done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout)
    shown = json.dumps(answer, indent=1)
    assert done.returncode == 0, shown
    assert answer["verdict"] == "VALID", shown
    assert answer["headline"].startswith("VALID: I1-I5 held on 1 lock over "), shown
    assert sorted(answer["invariants"]) == ["I1", "I2", "I3", "I4", "I5"], shown
    assert all(found["violations"] == 0 for found in answer["invariants"].values()), shown
    return answer


# Every store (about 12 s each): a lock is a job, and the lock conformance suite and its
# state machine run on every store, but only here do a store's lock tokens meet pauses,
# kills and clock skew end to end (on a server store, whose clock is the server's, a taker
# also runs with its whole process's clock minutes off: faketime).
@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_lock_chaos_run_is_valid_and_stale_writes_are_refused(
    backend: Backend, tmp_path: Path
) -> None:
    assert set(FAULTS) <= set(LOCK_KINDS)  # all in a locks run's own mix
    # The faults must bite: a stale holder's write reaches the sink and is refused. A run in
    # which none did (a stop aimed at a taker that did not reach its point in time, or a
    # stopped holder that resumed to find its lock lost and withheld the write: timing on
    # a loaded machine) proves nothing either way, and is run again with the next seed.
    # A run that is not VALID fails at once.
    seeds: list[int] = []
    for number in range(STALL_RUNS):
        with backend.isolated_url(tmp_path / str(number)) as url:
            seeds = seeds or _seeds(url)  # one search: every run's store is of one kind
            answer = _lock_chaos(url, tmp_path / str(number) / "run", seeds[number])
            with tenure.connect(url) as store:
                finals = [job.state for job in store.jobs()]
        counts = answer["counts"]
        if counts["stale_writes_rejected"] >= 1:
            break
    shown = json.dumps(answer, indent=1)
    assert counts["stale_writes_rejected"] >= 1, shown
    assert counts["writes_accepted"] >= 4, shown
    assert (counts["locks"], counts["claims"] >= 3) == (1, True), shown
    assert answer["top_token"] >= counts["claims"], shown  # one token per holding at least
    assert answer["faults"].get("pause-handler", 0) >= 1, shown
    assert "storm" not in answer["faults"], shown  # not in a locks run's mix
    # The lock can still be taken: released by its last holder (or left to expire).
    assert finals in (["ready"], ["leased"]), (finals, shown)
    print(shown)  # the counts, for whoever runs it with -s
