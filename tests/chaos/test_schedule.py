"""--seed makes the fault schedule reproducible."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenure.chaos import KINDS, make_schedule
from tenure.chaos._nemesis import OPT_IN, SERVER_ONLY, STORE_FAULTS
from tenure.cli import main


def _schedule(seed: int, store: str = "postgres") -> list[dict[str, object]]:
    faults = make_schedule(seed, store=store, workers=8, ttl=2.0, duration=600, interval=2.0)
    return [f.as_json() for f in faults]


def test_same_seed_same_schedule() -> None:
    first, again, other = _schedule(7), _schedule(7), _schedule(8)
    assert first == again
    assert first != other
    assert 200 < len(first) < 400  # a fault every ~2 s for 600 s
    # Every kind but the store faults and cancel, which are only scheduled when named.
    assert {f["kind"] for f in first} == set(KINDS) - set(OPT_IN)
    assert all(0 < f["at"] < 600 for f in first)  # type: ignore[operator]
    for fault in first:
        if str(fault["kind"]).startswith("pause"):
            assert 2.0 <= fault["params"]["duration"] <= 6.0  # type: ignore[index]
        if fault["kind"] in ("pause", "skew", "kill"):
            assert 1 <= fault["target"] <= 8  # type: ignore[operator]


def test_the_opt_in_kinds_left_the_default_schedules_as_they_were() -> None:
    # seed 7's schedule before cancel was a kind (hashed on main at the time): adding an
    # opt-in kind must not move an existing seed's faults.
    digest = hashlib.sha256(json.dumps(_schedule(7), sort_keys=True).encode()).hexdigest()
    assert digest[:16] == "52a5777e2a650867"


def test_cancel_only_when_named() -> None:
    faults = make_schedule(3, store="sqlite", workers=2, ttl=2.0, duration=60, kinds=("cancel",))
    assert {f.kind for f in faults} == {"cancel"}
    for fault in faults:
        assert fault.target is None
        assert 1 <= fault.params["jobs"] <= 3
        assert 1.0 <= fault.params["requeue_after"] <= 4.0
        assert fault.params["requeue"] in (0.0, 1.0)


def test_sqlite_schedules_have_no_proxy_faults() -> None:
    kinds = {f["kind"] for f in _schedule(7, "sqlite")}
    assert not kinds & set(SERVER_ONLY)
    assert "store-pause" in kinds


def test_dry_run_prints_the_same_schedule_for_the_same_seed() -> None:
    runner = CliRunner()
    args = ["--store", "redis://127.0.0.1:6379/0", "chaos", "--seed", "42", "--dry-run"]
    first = runner.invoke(main, [*args, "--duration", "60"])
    again = runner.invoke(main, [*args, "--duration", "60"])
    assert first.exit_code == 0, first.output
    assert first.output == again.output
    printed = json.loads(first.output)
    assert printed["seed"] == 42
    expected = make_schedule(42, store="redis", workers=4, ttl=2.0, duration=60, interval=2.0)
    assert printed["faults"] == [f.as_json() for f in expected]
    other = runner.invoke(main, [*args[:-3], "--seed", "43", "--dry-run", "--duration", "60"])
    assert other.exit_code == 0, other.output
    assert other.output != first.output


def test_bad_fault_kind_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["chaos", "--faults", "pause,meteor", "--dry-run"])
    assert result.exit_code == 2
    assert "meteor" in result.output


def test_store_faults_are_scheduled_only_when_named() -> None:
    named = make_schedule(
        7,
        store="postgres",
        workers=4,
        ttl=2.0,
        duration=120,
        interval=2.0,
        kinds=("store-restart", "store-kill", "failover", "pause"),
    )
    kinds = [f.kind for f in named]
    assert {"store-restart", "store-kill", "failover", "pause"} == set(kinds)
    for fault in named:
        if fault.kind in STORE_FAULTS:
            assert fault.target is None
            # Down for 0.1-0.25 TTL between the stop and the start (a failover: between
            # the primary's kill and the replica's promotion): well within a lease.
            assert 0.2 <= fault.params["outage"] <= 0.5, fault
    # A default schedule has none (so a seed's default schedule did not change with them).
    default = make_schedule(7, store="postgres", workers=4, ttl=2.0, duration=120)
    assert not {f.kind for f in default} & set(STORE_FAULTS)


def test_store_restart_is_refused_on_sqlite() -> None:
    result = CliRunner().invoke(
        main, ["chaos", "--faults", "store-restart,pause", "--dry-run", "--seed", "1"]
    )
    assert result.exit_code == 2, result.output
    assert "store-restart does not apply to SQLite: there is no server" in result.output
    # store-kill does apply (the run's SQLite writer killed mid-transaction).
    result = CliRunner().invoke(main, ["chaos", "--faults", "store-kill", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert {f["kind"] for f in json.loads(result.output)["faults"]} == {"store-kill"}


def test_store_faults_without_the_server_binaries_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on it
    args = ["--store", "redis://127.0.0.1:6379/0", "chaos", "--faults", "store-kill"]
    result = CliRunner().invoke(main, [*args, "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "redis-server not found on PATH" in result.output
    assert "leave store-kill out" in result.output
