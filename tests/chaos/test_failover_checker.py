"""The checker across a PostgreSQL failover (tenure.chaos._failover), on hand-built
histories: what the promoted replica may lack (an old-primary lease it never saw, a
completion or a submit only the old primary had) is allowed and counted across the
failover's start, and still a violation without one."""

from __future__ import annotations

from tenure.chaos import check_history
from tests.chaos._histories import T0, A, B, History

BASE_2 = 1 << 40


def overlapped(*, failover: bool) -> History:
    """A holds j's generation 1 from the old primary, renewed to 3.8; the primary dies at
    2.0; the new primary, which never saw A's claim, grants j to B at 2^40 at 2.6; A's
    renewal at 3.0 is refused there; B completes."""
    h = History()
    h.submit("j")
    h.claim("w1.1", A, "j", 1, at=1.0)
    h.write("w1.1", A, "j", 1, 1, at=1.1)
    h.holder("renew", "w1.1", A, "j", 1, at=1.8)
    if failover:
        h.outage("failover", 2.0, 2.5)
    h.claim("w2.1", B, "j", BASE_2, at=2.6)
    h.write("w2.1", B, "j", BASE_2, 1, at=2.7)
    h.holder("renew", "w1.1", A, "j", 1, at=3.0, outcome="fail", row_gen=BASE_2)
    h.write("w1.1", A, "j", 1, 2, at=3.1, stale=True)
    h.holder("complete", "w2.1", B, "j", BASE_2, at=3.2)
    h.final("j", "done", BASE_2, attempts=2)
    return h


def test_an_old_primary_lease_overlapped_by_the_new_primary_is_counted() -> None:
    verdict = check_history(overlapped(failover=True).events)
    assert verdict.violations == []
    assert verdict.status == "VALID"  # the stale write was rejected
    assert verdict.counts["failovers"] == 1
    assert verdict.counts["failover_overlaps"] == 1
    assert "1 failover(s)" in verdict.headline()


def test_the_same_overlap_without_a_failover_is_an_i2_violation() -> None:
    verdict = check_history(overlapped(failover=False).events)
    assert [v.invariant for v in verdict.violations] == ["I2"]


def claimed_during_the_kill(*, second_on_old_timeline: bool = False) -> History:
    """The failover starts at 2.0 and the old primary dies a little later: it still grants
    j to A at 2.05 (lease to 5.05); the new primary, promoted before the window's end at
    2.5, never saw it and grants j to B at 2^40 at 2.2. (As seen in a CI run.)"""
    h = History()
    h.submit("j")
    h.outage("failover", 2.0, 2.5)
    h.claim("w1.1", A, "j", 1, at=2.05)
    h.write("w1.1", A, "j", 1, 1, at=2.1)
    gen = 2 if second_on_old_timeline else BASE_2
    h.claim("w2.1", B, "j", gen, at=2.2)
    h.write("w2.1", B, "j", gen, 1, at=2.3)
    h.holder("complete", "w1.1", A, "j", 1, at=2.4, outcome="fail", row_gen=gen)
    h.holder("complete", "w2.1", B, "j", gen, at=2.6)
    h.final("j", "done", gen, attempts=2)
    return h


def test_a_lease_the_dying_primary_granted_inside_the_window_may_overlap() -> None:
    verdict = check_history(claimed_during_the_kill().events)
    assert verdict.violations == []
    assert verdict.counts["failover_overlaps"] == 1


def test_an_overlap_on_one_timeline_is_a_violation_even_inside_the_window() -> None:
    # Both leases from the same primary (generations 1 and 2): no failover explains it.
    verdict = check_history(claimed_during_the_kill(second_on_old_timeline=True).events)
    assert [v.invariant for v in verdict.violations] == ["I2"]


def lost_completion(*, failover: bool) -> History:
    """A completes j at 1.5 on the old primary, which dies at 2.0 before it replicated; the
    new primary grants j again at 2^40, and B completes it."""
    h = History()
    h.submit("j")
    h.claim("w1.1", A, "j", 1, at=1.0)
    h.write("w1.1", A, "j", 1, 1, at=1.1)
    h.holder("complete", "w1.1", A, "j", 1, at=1.5)
    if failover:
        h.outage("failover", 2.0, 2.5)
    h.claim("w2.1", B, "j", BASE_2, at=2.6)
    h.write("w2.1", B, "j", BASE_2, 1, at=2.7)
    h.holder("complete", "w2.1", B, "j", BASE_2, at=2.8)
    h.final("j", "done", BASE_2, attempts=2)
    return h


def test_a_completion_lost_with_the_old_primary_is_a_reexecution_caused_by_it() -> None:
    verdict = check_history(lost_completion(failover=True).events)
    assert verdict.violations == []
    assert verdict.counts["completions_lost_failover"] == 1
    assert verdict.counts["reexecutions"] == 1
    assert verdict.counts["reexecutions_failover"] == 1
    assert verdict.counts["reexecutions_finished"] == 1


def test_two_completions_without_a_failover_are_a_violation() -> None:
    verdict = check_history(lost_completion(failover=False).events)
    assert "I3" in {v.invariant for v in verdict.violations}


def test_a_submit_only_the_old_primary_had_is_counted_not_stranded() -> None:
    h = lost_completion(failover=True)
    h.submit("gone")
    h._event(
        "harness",
        type="event",
        f="final",
        t=T0 + 100,
        job="gone",
        state="unknown",
        error="job 'gone' does not exist in this store; submit it first",
    )
    verdict = check_history(h.events)
    assert verdict.violations == []
    assert verdict.counts["submits_lost_failover"] == 1
    assert verdict.counts["jobs_stranded"] == 0


def test_generations_are_counted_per_timeline() -> None:
    """The jump to the new timeline's base is no I1 gap; a gap on a timeline still is."""
    verdict = check_history(lost_completion(failover=True).events)
    assert not [v for v in verdict.violations if v.invariant == "I1"]
    h = lost_completion(failover=True)
    h.submit("k")
    h.claim("w2.1", B, "k", BASE_2 + 3, at=3.0)  # BASE_2 .. BASE_2 + 2 never granted
    h.holder("complete", "w2.1", B, "k", BASE_2 + 3, at=3.1)
    h.final("k", "done", BASE_2 + 3, attempts=1)
    assert "I1" in {v.invariant for v in check_history(h.events).violations}


def held_across_a_failover() -> History:
    """A holds j's generation 1, renewed at 1.8 (replicated); the primary dies at 2.0 and
    the replica is promoted at 2.5."""
    h = History()
    h.submit("j")
    h.claim("w1.1", A, "j", 1, at=1.0)
    h.write("w1.1", A, "j", 1, 1, at=1.1)
    h.holder("renew", "w1.1", A, "j", 1, at=1.8)
    h.outage("failover", 2.0, 2.5)
    return h


def given_back(*, released_at: float) -> History:
    """`held_across_a_failover`, then A releases j at ``released_at``; B takes it at 2^40
    at 2.7 and completes it. (Before the kill: the old primary took the release; after the
    promotion: the new one did, as in a `--workload locks` run with `failover`.)"""
    h = held_across_a_failover()
    h.holder("release", "w1.1", A, "j", 1, at=released_at, row_state="ready")
    h.claim("w2.1", B, "j", BASE_2, at=2.7)
    h.write("w2.1", B, "j", BASE_2, 1, at=2.8)
    h.holder("complete", "w2.1", B, "j", BASE_2, at=2.9)
    h.final("j", "done", BASE_2, attempts=2)
    return h


def test_a_release_across_a_failover_is_no_reexecution() -> None:
    # A release gives the job back: the next attempt is its due, whichever primary took the
    # release. (The checker once counted both as re-executions caused by the failover.)
    for released_at in (1.9, 2.6):
        verdict = check_history(given_back(released_at=released_at).events)
        assert verdict.violations == [], released_at
        assert verdict.counts["reexecutions"] == 0, released_at
        assert verdict.counts["reexecutions_failover"] == 0, released_at


def test_a_completion_the_new_primary_accepted_was_not_lost_with_the_old_one() -> None:
    # A's complete of generation 1 is answered after the promotion: the new primary has it,
    # and nothing ran j again.
    h = held_across_a_failover()
    h.holder("complete", "w1.1", A, "j", 1, at=2.6)
    h.final("j", "done", 1, attempts=1)
    verdict = check_history(h.events)
    assert verdict.violations == []
    assert verdict.counts["reexecutions"] == 0
    assert verdict.counts["completions_lost_failover"] == 0


def test_a_done_job_requeued_after_a_failover_runs_again_as_its_due() -> None:
    # A completes j at 1.5 on the old primary, which replicated it; the primary dies at 2.0;
    # the harness requeues the done job at 2.6 on the new primary (the cancel fault), and
    # B runs it at 2^40. A new life, not a re-execution. (Seen in a `--workload flow` run
    # with `failover` and `cancel`, seed 305.)
    h = History()
    h.submit("j")
    h.claim("w1.1", A, "j", 1, at=1.0)
    h.write("w1.1", A, "j", 1, 1, at=1.1)
    h.holder("complete", "w1.1", A, "j", 1, at=1.5, row_state="done")
    h.outage("failover", 2.0, 2.5)
    h.requeue("j", at=2.6, row_gen=1)
    h.claim("w2.1", B, "j", BASE_2, at=2.7)
    h.write("w2.1", B, "j", BASE_2, 1, at=2.8)
    h.holder("complete", "w2.1", B, "j", BASE_2, at=2.9, row_state="done")
    h.final("j", "done", BASE_2, attempts=2)
    verdict = check_history(h.events)
    assert verdict.violations == []
    assert verdict.counts["reexecutions"] == 0
    assert verdict.counts["reexecutions_failover"] == 0
    assert verdict.counts["completions_lost_failover"] == 0
