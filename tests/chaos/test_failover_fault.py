"""A real chaos run with the ``failover`` fault: ``tenure chaos --faults failover`` on
PostgreSQL builds a primary and a streaming replica of the run's own (initdb,
``pg_basebackup -R``, spare ports), gives the workers a multi-host URL, kills the primary
with kill -9 mid-run and promotes the replica. The run must be VALID, and ``tenure check``
on its recorded history must find no generation granted twice for any job.

Refused on other stores. Skipped with a reason where the PostgreSQL server binaries or
runuser are missing (a failure under CI=true).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tenure.chaos import make_schedule
from tenure.chaos._servers import missing_binaries
from tests.backends import POSTGRES, unavailable

pytestmark = pytest.mark.slow

WORKERS, TTL, DURATION, INTERVAL, JOBS = 3, 3.0, 10.0, 8.0, 150


def _seeds(count: int = 2) -> list[int]:
    """The first seeds whose failover comes once the workers are busy (they take a second
    or two to start on a loaded machine) and well before the end: 4-6 s in."""
    found = []
    for seed in range(1, 1000):
        faults = make_schedule(
            seed,
            store="postgres",
            workers=WORKERS,
            ttl=TTL,
            duration=DURATION,
            interval=INTERVAL,
            kinds=("failover",),
        )
        if faults and 4.0 <= faults[0].at <= 6.0:
            found.append(seed)
            if len(found) == count:
                return found
    raise AssertionError("no seed found")


def _command(url: str, out: Path, *rest: str) -> list[str]:
    return [
        *(sys.executable, "-m", "tenure", "--json", "--store", url, "chaos"),
        *("--workers", str(WORKERS), "--jobs", str(JOBS), "--ttl", str(TTL)),
        *("--duration", str(DURATION), "--fault-interval", str(INTERVAL)),
        *("--storm", "0", "--drain-timeout", "40", "--no-png", "--out", str(out)),
        *rest,
    ]


def test_failover_on_a_primary_and_replica_of_the_runs_own(tmp_path: Path) -> None:
    missing = missing_binaries("postgres")
    if missing is not None:
        unavailable(f"{missing}: no throwaway primary and replica for the failover fault")
    # A run whose one failover did not bite proves nothing either way: UNPROVEN, not
    # INVALID. It is run again with the next seed; any other verdict is judged at once.
    # (Seen once on a machine under twice CI's load, when the replica was promoted as soon
    # as the primary was killed: down 0.14 s, and no call in flight then. The promotion
    # now waits 0.1-0.25 TTL, as a failover manager would.)
    for seed in _seeds():
        out = tmp_path / f"run-{seed}"
        with POSTGRES.isolated_url(tmp_path) as url:
            command = _command(url, out, "--faults", "failover", "--seed", str(seed))
            done = subprocess.run(command, capture_output=True, text=True, timeout=200)
            assert done.stdout.strip(), done.stderr[-3000:]
            answer = json.loads(done.stdout)
        if answer["verdict"] != "UNPROVEN":
            break
    shown = f"{answer['headline']}\n{done.stderr[-3000:]}"
    counts = answer["counts"]
    assert done.returncode == 0, shown
    assert answer["verdict"] == "VALID", shown
    assert answer["faults"].get("failover") == 1, shown  # once: then there is no replica
    assert counts["failovers"] == 1, shown
    assert counts["store_outage_calls"] > 0, shown
    assert counts["store_outage_longest_ms"] >= 0.1 * TTL * 1000, shown  # kill to promotion
    assert "replica" in done.stderr, shown
    # Every job done once the new primary served, but those whose submit only the old
    # primary had (asynchronous replication): counted, not stranded.
    assert counts["jobs_stranded"] == 0, shown
    assert counts["jobs_done"] + counts["submits_lost_failover"] == JOBS, shown
    assert answer["reexecutions"]["failover"] == counts["reexecutions_failover"]
    assert "failover(s)" in answer["headline"], shown

    # The recorded history, through tenure check: VALID again, and no (job, generation)
    # granted twice; generations after the promotion are on timeline 2 (2^40 and above).
    history = out / "history.jsonl"
    checked = subprocess.run(
        [sys.executable, "-m", "tenure", "--json", "check", str(history), "--no-png"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert json.loads(checked.stdout)["verdict"] == "VALID"
    events = [json.loads(line) for line in history.read_text().splitlines()]
    granted = Counter(
        (claim["job"], claim["gen"])
        for e in events
        if e.get("f") == "claim_next" and e.get("type") == "ok"
        for claim in e.get("claims", [])
    )
    assert granted, "no claim recorded"
    assert [key for key, n in granted.items() if n > 1] == []
    assert any(gen >= 1 << 40 for _, gen in granted), "no claim on the new primary"


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_failover_is_refused_on_other_stores(store: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}" if store == "sqlite" else "redis://127.0.0.1:6379/0"
    done = subprocess.run(
        _command(url, tmp_path / "run", "--faults", "failover"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "failover" in done.stderr + done.stdout
    assert "PostgreSQL" in done.stderr + done.stdout  # refused before anything starts
