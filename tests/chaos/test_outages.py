"""The store faults in a history (tenure.chaos._outages), on hand-built histories: the
outage windows, the store calls they caught, and the re-executions, in all and those the
store faults caused."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tenure.chaos import check_history
from tenure.chaos._context import Context
from tenure.chaos._outages import outages, reexecutions
from tenure.cli import main
from tests.chaos._histories import A, B, History, clean


def _run_through(h: History, outage: tuple[float, float]) -> History:
    """Job j3: A claims gen 1 at 10.0 (lease to 12.0), writes both records, renews at 10.5
    (lease to 12.5); the store goes down for ``outage``; A's complete at 11.0 fails without
    reaching it, and is retried at 11.6."""
    h.submit("j3")
    h.claim("w1.1", A, "j3", 1, at=10.0)
    h.write("w1.1", A, "j3", 1, 1, at=10.1)
    h.holder("renew", "w1.1", A, "j3", 1, at=10.5)
    h.write("w1.1", A, "j3", 1, 2, at=10.6)
    h.outage("store-restart", *outage)
    h.unreached("complete", "w1.1", A, "j3", 1, at=11.0)
    return h


def _short() -> History:
    """An outage shorter than the lease: the retried complete lands, nothing runs twice."""
    h = _run_through(History(), (10.9, 11.5))
    h.holder("complete", "w1.1", A, "j3", 1, at=11.6)
    h.final("j3", "done", 1)
    return h


def _long() -> History:
    """An outage longer than the lease: A's retries fail until its lease is gone, B claims
    gen 2 after the store is back and runs the handler again."""
    h = _run_through(History(), (10.9, 14.0))
    h.unreached("complete", "w1.1", A, "j3", 1, at=11.8, outcome="unknown")
    h.claim("w2.1", B, "j3", 2, at=14.5)
    h.write("w2.1", B, "j3", 2, 1, at=14.6)
    h.write("w2.1", B, "j3", 2, 2, at=14.7)
    h.holder("complete", "w2.1", B, "j3", 2, at=14.8)
    h.final("j3", "done", 2)
    return h


def test_an_outage_shorter_than_the_lease_costs_no_reexecution() -> None:
    verdict = check_history(_short().events)
    c = verdict.counts
    assert verdict.violations == []
    assert c["store_outages"] == 1
    assert c["store_outage_longest_ms"] == 600
    # The failed complete is a call that did not reach the store, not a stale rejection.
    assert c["store_outage_errors"] == 1
    assert c["holder_calls_unreached"] == 1
    assert c["stale_completions_rejected"] == 0
    assert c["store_outage_calls"] == 1
    assert c["reexecutions"] == 0
    assert c["reexecutions_store_faults"] == 0
    # Nothing stale was caught, but the outage caught a call in flight and was ridden out.
    assert verdict.status == "VALID"
    assert "1 store outages caught 1 store calls in flight, 0 re-executions" in (verdict.headline())
    assert any(line.startswith("store outages: 1 (longest 0.6 s down)") for line in verdict.lines())


def test_an_outage_longer_than_the_lease_costs_the_lease_it_outlived() -> None:
    h = _long()
    verdict = check_history(h.events)
    c = verdict.counts
    assert verdict.violations == []
    assert c["reexecutions"] == 1
    assert c["reexecutions_finished"] == 1  # A had finished: only its completion was lost
    assert c["reexecutions_store_faults"] == 1
    assert c["store_outage_calls"] == 2
    [found] = reexecutions(Context(h.events))
    assert (found.job, found.lost.gen, found.again.gen, found.finished) == ("j3", 1, 2, True)
    assert found.outage is not None
    assert found.outage.kind == "store-restart"
    # The report shows it on the job's row, where A's lease ended.
    [mark] = [m for m in verdict.marks["j3"] if m.kind == "reexecuted"]
    assert mark.at == found.lost.end
    assert "during a store-restart outage" in mark.detail


def test_a_lost_lease_outside_any_outage_is_counted_but_not_against_the_store() -> None:
    # clean(): j1's gen 1 was paused past its lease, gen 2 ran the handler again.
    h = _short()
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.write("w1.1", A, "j1", 1, 1, at=1.1)
    h.claim("w2.1", B, "j1", 2, at=4.0)
    h.write("w2.1", B, "j1", 2, 1, at=4.1)
    h.holder("complete", "w2.1", B, "j1", 2, at=4.3)
    h.submit("j1")
    h.final("j1", "done", 2)
    c = check_history(h.events).counts
    assert c["reexecutions"] == 1
    assert c["reexecutions_finished"] == 0  # A never got to its complete
    assert c["reexecutions_store_faults"] == 0


def test_a_lease_cancelled_after_an_outage_it_lived_through_is_not_counted_against_it() -> None:
    # A's lease of j lives through a store-kill (renewed before and after it); the harness
    # cancels j at 3.0 and requeues it; B runs it again. The cancel took the lease: a
    # re-execution, not one the store fault caused. (Seen in a `--workload flow` run with
    # `failover` and `cancel`, seed 305.)
    h = History()
    h.submit("j")
    h.claim("w1.1", A, "j", 1, at=1.0)
    h.write("w1.1", A, "j", 1, 1, at=1.1)
    h.holder("renew", "w1.1", A, "j", 1, at=1.5)
    h.outage("store-kill", 2.0, 2.3)
    h.holder("renew", "w1.1", A, "j", 1, at=2.5)
    h.cancel("j", at=3.0, row_gen=2)
    h.holder("renew", "w1.1", A, "j", 1, at=3.5, outcome="fail", row_gen=2, row_state="cancelled")
    h.requeue("j", at=4.0, row_gen=2)
    h.claim("w2.1", B, "j", 3, at=4.1)
    h.write("w2.1", B, "j", 3, 1, at=4.2)
    h.holder("complete", "w2.1", B, "j", 3, at=4.3, row_state="done")
    h.final("j", "done", 3)
    verdict = check_history(h.events)
    assert verdict.violations == []
    assert verdict.counts["reexecutions"] == 1
    assert verdict.counts["reexecutions_store_faults"] == 0
    [found] = reexecutions(Context(h.events))
    assert (found.lost.gen, found.again.gen, found.outage) == (1, 3, None)


def test_what_is_not_a_reexecution() -> None:
    h = History()
    h.outage("store-kill", 1.0, 6.0)
    # A claim whose reply was lost in the outage: its lease ran nothing, so the claim
    # after it is the first run.
    h.submit("j4")
    h.lost_claim("w1.1", A, at=1.5)
    h.claim("w2.1", B, "j4", 2, at=7.0)
    h.write("w2.1", B, "j4", 2, 1, at=7.1)
    h.holder("complete", "w2.1", B, "j4", 2, at=7.2)
    h.final("j4", "done", 2)
    # A lease its holder released on purpose (an accepted settle) and ran again.
    h.submit("j5")
    h.claim("w1.1", A, "j5", 1, at=0.5)
    h.write("w1.1", A, "j5", 1, 1, at=0.6)
    h.holder("release", "w1.1", A, "j5", 1, at=1.2)
    h.claim("w2.1", B, "j5", 2, at=6.5)
    h.write("w2.1", B, "j5", 2, 1, at=6.6)
    h.holder("complete", "w2.1", B, "j5", 2, at=6.7)
    h.final("j5", "done", 2)
    ctx = Context(h.events)
    assert [(o.kind, o.end - o.start) for o in outages(ctx)] == [("store-kill", 5.0)]
    assert reexecutions(ctx) == []
    verdict = check_history(h.events)
    assert verdict.violations == [], verdict.lines()
    assert verdict.counts["reexecutions"] == 0


def test_an_outage_that_never_ended_lasts_to_the_end_of_the_history() -> None:
    h = _run_through(History(), (10.9, 14.0))
    h.events = [e for e in h.events if not (e.get("f") == "fault" and e["phase"] == "end")]
    [outage] = outages(Context(h.events))
    assert outage.end == float("inf")
    assert outage.down is None


def test_runs_without_store_faults_show_no_store_line() -> None:
    verdict = check_history(clean().events)
    assert verdict.counts["store_outages"] == 0
    assert verdict.store_line() is None
    assert "store outages" not in verdict.headline()
    assert not any(line.startswith("store outages") for line in verdict.lines())
    # clean()'s j1: gen 1 wrote, was stopped past its lease, gen 2 ran it again.
    assert verdict.counts["reexecutions"] == 1


def test_tenure_check_reports_the_reexecutions(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in _long().events), encoding="utf-8")
    result = CliRunner().invoke(main, ["check", str(path), "--no-png", "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["reexecutions"] == {
        "store_faults": 1,
        "all": 1,
        "store_outages": 1,
        "failover": 0,
    }
    assert answer["counts"]["reexecutions_store_faults"] == 1
    assert "1 re-executions caused by them" in answer["headline"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'class="reexecuted"' in page
    assert "store-restart" in page
