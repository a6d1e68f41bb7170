"""Real chaos runs with the store faults: ``tenure chaos --faults store-restart,store-kill``
restarts and kill -9s a store server of the run's own (never the --store one), and the
run must be VALID with no re-execution caused by them (their outages are shorter than
the lease: 0.1-0.25 TTL down between the stop and the start, plus the start's own time).

Skipped with a reason where the server binaries are missing (a failure under CI=true).
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tenure.chaos import make_schedule, store_kind
from tenure.chaos._servers import missing_binaries
from tests.backends import POSTGRES, REDIS, SQLITE, Backend, unavailable

pytestmark = pytest.mark.slow

WORKERS, TTL, DURATION, INTERVAL = 3, 3.0, 10.0, 2.0


def _seed(url: str, kinds: tuple[str, ...]) -> int:
    """The first seed whose schedule has every one of ``kinds`` in the first half."""
    for seed in range(1, 1000):
        faults = make_schedule(
            seed,
            store=store_kind(url),
            workers=WORKERS,
            ttl=TTL,
            duration=DURATION,
            interval=INTERVAL,
            kinds=kinds,
        )
        if {f.kind for f in faults if f.at < DURATION / 2} == set(kinds):
            return seed
    raise AssertionError("no seed found")


def _chaos(url: str, out: Path, kinds: tuple[str, ...]) -> tuple[int, dict[str, object], str]:
    command = [
        *(sys.executable, "-m", "tenure", "--json", "--store", url, "chaos"),
        *("--workers", str(WORKERS), "--jobs", "200", "--ttl", str(TTL)),
        *("--duration", str(DURATION), "--fault-interval", str(INTERVAL)),
        *("--faults", ",".join(kinds), "--seed", str(_seed(url, kinds))),
        *("--storm", "0", "--drain-timeout", "40", "--no-png", "--out", str(out)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=150)
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), done.stderr


def _check_valid(code: int, answer: dict[str, object], kinds: tuple[str, ...], log: str) -> None:
    counts = answer["counts"]
    assert isinstance(counts, dict)
    shown = f"{answer['headline']}\n{log[-3000:]}"
    assert code == 0, shown
    assert answer["verdict"] == "VALID", shown
    assert answer["violations"] == [], shown
    faults = answer["faults"]
    assert isinstance(faults, dict)
    for kind in kinds:  # each kind was injected, and ended: the server came back
        assert faults.get(kind, 0) >= 1, shown
    assert counts["store_outages"] == sum(faults[kind] for kind in kinds), shown
    assert 0 < counts["store_outage_longest_ms"] < TTL * 1000, shown
    assert counts["store_outage_calls"] > 0, shown  # the workers were caught by them
    assert counts["reexecutions_store_faults"] == 0, shown
    assert answer["reexecutions"] == {
        "store_faults": 0,
        "all": counts["reexecutions"],
        "store_outages": counts["store_outages"],
        "failover": 0,
    }
    assert counts["jobs_done"] == 200, shown
    assert counts["jobs_stranded"] == 0, shown
    assert "0 re-executions caused by them" in str(answer["headline"]), shown


def _needs(backend: Backend) -> None:
    missing = missing_binaries(backend.name)
    if missing is not None:
        unavailable(f"{missing}: no throwaway {backend.name} server for the store faults")


@pytest.mark.parametrize("backend", [POSTGRES, REDIS], ids=str)
def test_store_restart_and_kill_on_a_server_of_the_runs_own(
    backend: Backend, tmp_path: Path
) -> None:
    _needs(backend)
    kinds = ("store-restart", "store-kill")
    with backend.isolated_url(tmp_path) as url:
        code, answer, log = _chaos(url, tmp_path / "run", kinds)
        _check_valid(code, answer, kinds, log)
        # The run said where its own server was, and removed it at the end.
        found = re.search(r"server of the run's own, 127\.0\.0\.1:(\d+)", log)
        assert found is not None, log[-2000:]
        port = int(found.group(1))
        assert f":{port}" not in url  # not the --store server
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        assert (tmp_path / "run" / "logs" / f"{backend.name}-server.log").exists()


def test_store_kill_on_sqlite_kills_a_writer_mid_transaction(tmp_path: Path) -> None:
    kinds = ("store-kill",)
    with SQLITE.isolated_url(tmp_path) as url:
        code, answer, log = _chaos(url, tmp_path / "run", kinds)
        _check_valid(code, answer, kinds, log)
        path = url.removeprefix("sqlite:///").partition("?")[0]
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            # The killed writer's changes (a space after each payload) were rolled back.
            changed = "SELECT count(*) FROM tenure_jobs WHERE payload LIKE '% '"
            assert conn.execute(changed).fetchone() == (0,)
