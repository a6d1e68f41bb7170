"""The checker on hand-built histories of the locks workload (``tenure chaos --workload
locks``): a lock is a job taken by id and given back with release, so I1-I4 judge it as
they judge jobs; I5 asks that the lock can still be taken after the run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from tenure.chaos import check_history
from tenure.chaos._checker import Verdict
from tenure.cli import main
from tests.chaos._histories import T0, TTL, A, B, History

LOCK = "lock:L"
C = "host:3:cccccc"


def _claim(h: History, proc: str, owner: str, gen: int, at: float) -> str:
    """A lock's acquire: a claim by id."""
    done: dict[str, Any] = {"job": LOCK, "row_gen": gen, "store_now": T0 + at}
    done.update(lease_until=T0 + at + TTL, attempts=1, max_attempts=1_000_000)
    invoke = {"job": LOCK, "owner": owner, "ttl": TTL}
    return h.op(proc, "claim", "ok", at, invoke, status="applied", **done)


def _run(*, lost_release: bool = True, stale_write_accepted: bool = False) -> History:
    """A holds gen 1 and is stopped mid-write; B takes the lock at gen 2 after A's lease
    ran out, writes and releases; A's late write and release are refused. C holds gen 3
    and releases, the reply lost; A takes gen 4 at once; C's resent release is refused."""
    h = History()
    h.config(workload="locks", store="sqlite", workers=3, ttl=TTL, seed=1)
    h.submit(LOCK)
    _claim(h, "w1.1", A, 1, at=1.0)
    h.write("w1.1", A, LOCK, 1, 1, at=1.1)
    h.holder("renew", "w1.1", A, LOCK, 1, at=1.5)
    h.fault("pause-handler", at=1.6)
    _claim(h, "w2.1", B, 2, at=4.0)  # A's lease ran to 3.5
    h.write("w2.1", B, LOCK, 2, 1, at=4.1)
    h.write("w2.1", B, LOCK, 2, 2, at=4.2)
    h.holder("release", "w2.1", B, LOCK, 2, at=4.3, row_state="ready")
    h.write("w1.1", A, LOCK, 1, 2, at=4.6, stale=not stale_write_accepted)
    h.holder("release", "w1.1", A, LOCK, 1, at=4.7, outcome="fail", row_gen=2, row_state="ready")
    _claim(h, "w3.1", C, 3, at=5.0)
    h.write("w3.1", C, LOCK, 3, 1, at=5.1)
    if lost_release:
        h.holder("release", "w3.1", C, LOCK, 3, at=5.2, outcome="unknown")
    _claim(h, "w1.1", A, 4, at=5.25)
    h.holder("release", "w3.1", C, LOCK, 3, at=5.3, outcome="fail", row_gen=4)
    h.holder("release", "w1.1", A, LOCK, 4, at=5.4, row_state="ready")
    return h


def _check(h: History, final: str = "ready", gen: int = 4) -> Verdict:
    h.final(LOCK, final, gen)
    return check_history(h.events)


def test_a_lock_run_is_valid_and_its_verdict_speaks_of_the_lock() -> None:
    verdict = _check(_run())
    assert verdict.status == "VALID", verdict.lines()
    c = verdict.counts
    assert (c["claims"], c["locks"], c["jobs_submitted"], c["jobs_stranded"]) == (4, 1, 0, 0)
    assert (c["stale_writes_rejected"], c["stale_releases_rejected"]) == (1, 2)
    # C's release was sent before A's claim and its answer lost: no overlap is proven.
    assert c["overlaps_unknown_settle"] == 1
    assert verdict.headline().startswith(
        "VALID: I1-I5 held on 1 lock over 4 holdings (tokens up to 4); faults bit: 1 stale "
        "writes rejected by the sink"
    )
    assert "locks: 1 lock, 4 holdings, tokens up to 4" in verdict.lines()


def test_a_claim_over_a_live_lease_without_a_release_is_an_overlap() -> None:
    verdict = _check(_run(lost_release=False))
    assert {v.invariant for v in verdict.violations} == {"I2"}, verdict.lines()
    assert "generation 4" in verdict.violations[0].message


def test_a_stale_holders_write_accepted_after_a_newer_one() -> None:
    verdict = _check(_run(stale_write_accepted=True))
    assert {v.invariant for v in verdict.violations} == {"I4"}, verdict.lines()


def test_a_lock_job_that_ended_cannot_be_taken_again() -> None:
    verdict = _check(_run(), final="dead")
    assert [v.invariant for v in verdict.violations] == ["I5"], verdict.lines()
    assert "can no longer be taken" in verdict.violations[0].message


def test_a_locks_schedule_has_no_storm_cancel_or_pause_complete() -> None:
    done = CliRunner().invoke(main, ["chaos", "--workload", "locks", "--seed", "4", "--dry-run"])
    assert done.exit_code == 0, done.output
    kinds = {fault["kind"] for fault in json.loads(done.output)["faults"]}
    assert kinds
    assert not kinds & {"storm", "cancel", "pause-complete"}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--faults", "pause,storm"], "--faults: not with --workload locks: storm"),
        (["--faults", "cancel,pause-complete"], "cancel, pause-complete"),
        (["--unsafe", "no-fence"], "--unsafe: applies to the jobs and flow workloads only"),
    ],
)
def test_what_a_locks_run_cannot_do_is_refused(options: list[str], named: str) -> None:
    done = CliRunner().invoke(main, ["chaos", "--workload", "locks", *options, "--dry-run"])
    assert done.exit_code == 2, done.output
    assert named in done.output


def test_a_refused_stale_release_alone_bites_in_a_locks_run() -> None:
    """No stale write reached the sink (A's late write was withheld, say), but the store
    refused the stale holder's release: the faults bit."""
    h = History()
    h.config(workload="locks", store="sqlite", workers=2, ttl=TTL, seed=1)
    h.submit(LOCK)
    _claim(h, "w1.1", A, 1, at=1.0)
    h.fault("pause", at=1.2)
    _claim(h, "w2.1", B, 2, at=4.0)
    h.holder("release", "w2.1", B, LOCK, 2, at=4.3, row_state="ready")
    h.holder("release", "w1.1", A, LOCK, 1, at=4.7, outcome="fail", row_gen=2, row_state="ready")
    verdict = _check(h, gen=2)
    assert verdict.status == "VALID", verdict.lines()
    h = History()
    h.config(workload="locks", store="sqlite", workers=2, ttl=TTL, seed=1)
    h.submit(LOCK)
    _claim(h, "w1.1", A, 1, at=1.0)
    h.fault("pause", at=1.2)
    h.holder("release", "w1.1", A, LOCK, 1, at=1.3, row_state="ready")
    verdict = _check(h, gen=1)
    assert verdict.status == "UNPROVEN", verdict.lines()
    assert "no stale write, renewal or release was rejected" in verdict.headline()
