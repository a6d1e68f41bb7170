"""Real chaos runs with the cancel fault: ``tenure chaos --faults cancel`` cancels jobs
(leased ones first) through the store during the run and requeues most of them later;
the checker must find I1-I5 kept: the cancelled holders' completions refused, every job
ended (done, or cancelled and never requeued after)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():  # starlette 1.x would rather have httpx2 behind TestClient
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import tenure
from tenure.chaos import make_schedule, store_kind
from tenure.dashboard import create_app
from tests.backends import BACKENDS, Backend

pytestmark = pytest.mark.slow

WORKERS, TTL, DURATION, INTERVAL, JOBS = 3, 2.0, 8.0, 1.0, 120


def _seed(url: str) -> int:
    """The first seed with at least three cancels, one requeued and one left cancelled."""
    for seed in range(1, 1000):
        faults = make_schedule(
            seed,
            store=store_kind(url),
            workers=WORKERS,
            ttl=TTL,
            duration=DURATION,
            interval=INTERVAL,
            kinds=("cancel",),
        )
        early = [f for f in faults if f.at < DURATION * 0.6]
        requeued = {f.params["requeue"] for f in early}
        if len(early) >= 3 and requeued == {0.0, 1.0}:
            return seed
    raise AssertionError("no seed found")


# Every store (about 16 s each): the cancel races of the public store API are proven on
# every store by the conformance suite (test_control_races.py and kin), but only here do a
# store's cancels and requeues meet its holders' completions end to end.
@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_cancel_fault_run_is_valid(backend: Backend, tmp_path: Path) -> None:
    with backend.isolated_url(tmp_path) as url:
        command = [
            *(sys.executable, "-m", "tenure", "--json", "--store", url, "chaos"),
            *("--workers", str(WORKERS), "--jobs", str(JOBS), "--ttl", str(TTL)),
            *("--duration", str(DURATION), "--fault-interval", str(INTERVAL)),
            *("--faults", "cancel", "--seed", str(_seed(url)), "--storm", "0"),
            *("--drain-timeout", "10", "--no-png", "--out", str(tmp_path / "run")),
        ]
        began = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - began
        assert done.stdout.strip(), done.stderr[-3000:]
        # The run names the dashboard command that shows its store, and it does.
        look = json.loads(done.stdout)["dashboard"]
        assert look == f"tenure dashboard --store {shlex.quote(url)}"
        shown = shlex.split(look)[-1]
        with tenure.connect(shown) as store, TestClient(create_app(store)) as client:
            finished = client.get("/jobs", params={"state": "done"}).text
            assert "chaos-" in finished
            # A done job requeued by the fault ran again: two completed lives, the second
            # at a higher generation, and it ended done.
            events = (tmp_path / "run" / "history.jsonl").read_text().splitlines()
            rerun = [
                job for line in events for job in (json.loads(line).get("requeued_done") or [])
            ]
            assert rerun, "no done job was requeued"
            completed = [
                a.generation
                for a in store.attempts(rerun[0])
                if a.ending == tenure.AttemptEnding.COMPLETED
            ]
            assert len(completed) >= 2, completed
            assert completed == sorted(set(completed)), completed
            assert store.get(rerun[0]).state == "done"
    assert done.stdout.strip(), done.stderr[-3000:]
    answer = json.loads(done.stdout)
    shown = f"{answer['headline']}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, shown
    assert answer["verdict"] == "VALID", shown
    assert answer["violations"] == [], shown
    counts = answer["counts"]
    assert answer["faults"].get("cancel", 0) >= 1, shown
    assert counts["cancels"] >= 1, shown
    assert counts["requeues"] >= 1, shown
    # Every job ended: done, or cancelled by a cancel no requeue came after.
    assert counts["jobs_done"] + counts["jobs_cancelled"] == JOBS, shown
    assert counts["jobs_stranded"] == 0, shown
    assert took < 25, f"the run took {took:.1f} s"
    history = [
        json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()
    ]
    cancels = [e for e in history if e.get("f") == "cancel" and e.get("type") == "ok"]
    assert cancels
    assert all(e.get("row_state") == "cancelled" for e in cancels)


def test_the_dashboard_command_hides_a_password() -> None:
    from tenure.cli._chaos import dashboard_command

    assert (
        dashboard_command("sqlite:////tmp/a b.db")
        == "tenure dashboard --store 'sqlite:////tmp/a b.db'"
    )
    shown = dashboard_command("postgresql://ops:s3cret@db:5432/app?schema=q")
    assert shown == "tenure dashboard --store 'postgresql://ops:PASSWORD@db:5432/app?schema=q'"
    assert "s3cret" not in dashboard_command("redis://:s3cret@cache:6379/0")
