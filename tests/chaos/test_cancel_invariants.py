"""The checker's units on hand-built histories with cancels and requeues (the cancel
fault): what a correct store's answers look like passes, and each way a store could get
cancel wrong is flagged by the invariant it breaks."""

from __future__ import annotations

from tenure.chaos._checker import check_history
from tenure.chaos._context import Context
from tenure.chaos._invariants import (
    UNITS,
    exclusivity,
    nothing_lost,
    one_completion,
    stale_rejection,
    tokens,
)
from tenure.chaos._verdict import Violation
from tests.chaos._histories import A, B, History


def _messages(found: list[Violation], invariant: str) -> list[str]:
    assert {v.invariant for v in found} <= {invariant}, [v.line() for v in found]
    return [v.message for v in found]


def _cancelled_and_rerun(*, record_cancel: bool = True) -> History:
    """A holds j1 at gen 1 (lease until 3.0); the harness cancels it at 1.5 (the store
    moves it to gen 2) and requeues it at 1.8; B claims gen 3 at 2.0, before A's lease
    would have run out, and completes; A's late completion is refused as cancelled."""
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    if record_cancel:
        h.fault("cancel", at=1.5, target="harness")
        h.cancel("j1", at=1.5, row_gen=2)
        h.requeue("j1", at=1.8, row_gen=2)
    h.claim("w2.1", B, "j1", 3, at=2.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=2.2, outcome="fail", row_gen=3)
    h.holder("complete", "w2.1", B, "j1", 3, at=2.5)
    h.final("j1", "done", 3)
    return h


def _cancelled_under_its_holder() -> History:
    """A holds j1 at gen 1; the harness cancels it at 1.5 (the store moves it to gen 2), and
    A's next renewal is refused as cancelled."""
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.fault("cancel", at=1.5, target="harness")
    h.cancel("j1", at=1.5, row_gen=2)
    h.holder("renew", "w1.1", A, "j1", 1, at=1.6, outcome="fail", row_gen=2, row_state="cancelled")
    return h


def test_a_cancel_and_requeue_done_right_passes_every_unit() -> None:
    ctx = Context(_cancelled_and_rerun().events)
    for unit in UNITS:
        assert unit(ctx) == [], unit.__name__
    assert (ctx.counts["cancels"], ctx.counts["requeues"]) == (1, 1)
    verdict = check_history(_cancelled_and_rerun().events)
    assert verdict.status == "VALID"  # the cancelled holder's completion was refused
    assert verdict.counts["holder_calls_refused_cancelled"] == 0  # (it found gen 3 leased)
    assert "1 cancels" in verdict.headline()


def test_a_claim_right_after_a_requeue_is_not_ended_by_it() -> None:
    # Seen in a Redis chaos run (seed 7047): the requeue at store time t, the next claim
    # (generation 3) 60 µs later. The requeue found generation 2: the lease of generation 3
    # was granted after it, however close in time, and its completion is the holder's own.
    h = _cancelled_under_its_holder()
    h.requeue("j1", at=1.8, row_gen=2)
    h.claim("w2.1", B, "j1", 3, at=1.8 + 60e-6)
    h.holder("complete", "w2.1", B, "j1", 3, at=2.0)
    h.final("j1", "done", 3)
    assert stale_rejection(Context(h.events)) == []
    assert check_history(h.events).status == "VALID"


def test_a_cancelled_holder_refused_is_a_fault_that_bit() -> None:
    h = _cancelled_under_its_holder()
    h.final("j1", "cancelled", 2)
    verdict = check_history(h.events)
    assert verdict.counts["holder_calls_refused_cancelled"] == 1
    assert verdict.counts["stale_completions_rejected"] == 0
    assert verdict.status == "VALID"
    assert verdict.headline().endswith("; 1 cancels, 1 calls of cancelled holders refused")


def test_without_the_recorded_cancel_the_gap_and_the_overlap_are_flagged() -> None:
    ctx = Context(_cancelled_and_rerun(record_cancel=False).events)
    assert "generation(s) 2 were never granted" in _messages(tokens(ctx), "I1")[0]
    assert "overlaps generation 1" in _messages(exclusivity(ctx), "I2")[0]


def test_a_cancel_whose_outcome_is_unknown_may_have_taken_the_generation() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.2)
    h.requeue("j1", at=1.3, row_gen=1)
    h.claim("w1.1", A, "j1", 2, at=1.4)
    h.cancel("j1", at=1.5, row_gen=3, outcome="unknown")
    h.final("j1", "cancelled", 3)
    ctx = Context(h.events)
    assert tokens(ctx) == []
    assert nothing_lost(ctx) == []


def test_a_completion_accepted_after_the_cancel_is_flagged() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    cancel = h.cancel("j1", at=1.5, row_gen=2)
    late = h.holder("complete", "w1.1", A, "j1", 1, at=1.7)  # the store took it: a bug
    h.final("j1", "done", 1)
    found = stale_rejection(Context(h.events))
    [message] = _messages(found, "I3")
    assert f"accepted after its lease had ended ({cancel})" in message
    assert found[0].ops == [late, cancel]


def test_a_renewal_accepted_after_the_cancel_is_flagged() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.cancel("j1", at=1.5, row_gen=2)
    h.holder("renew", "w1.1", A, "j1", 1, at=1.6)
    h.final("j1", "cancelled", 2)
    assert len(_messages(stale_rejection(Context(h.events)), "I3")) == 1


def test_a_requeued_done_job_may_be_completed_once_more_not_twice() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.2)
    h.requeue("j1", at=1.5, row_gen=1)
    h.claim("w2.1", B, "j1", 2, at=1.6)
    h.holder("complete", "w2.1", B, "j1", 2, at=1.8)
    h.final("j1", "done", 2)
    assert one_completion(Context(h.events)) == []
    # A third completion in the same life is one too many.
    h.claim("w2.1", B, "j1", 3, at=4.0)
    h.holder("complete", "w2.1", B, "j1", 3, at=4.1)
    [message] = _messages(one_completion(Context(h.events)), "I3")
    assert "completed 2 times since its requeue number 1" in message


def test_a_cancelled_job_counts_as_ended() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.cancel("j1", at=1.5, row_gen=2)
    h.cancel("j1", at=1.6, row_gen=2, outcome="fail")  # the second answers as the first
    h.final("j1", "cancelled", 2)
    ctx = Context(h.events)
    assert nothing_lost(ctx) == []
    assert (ctx.counts["jobs_cancelled"], ctx.counts["cancels_refused"]) == (1, 1)


def test_a_requeued_job_must_end_again() -> None:
    h = History()
    h.submit("j1")
    h.submit("j2")
    h.cancel("j1", at=1.0, row_gen=0)
    h.requeue("j1", at=1.5, row_gen=0)
    h.final("j1", "cancelled", 0)  # requeued, and yet cancelled with no cancel after
    h.final("j2", "cancelled", 0)  # no cancel at all
    messages = _messages(nothing_lost(Context(h.events)), "I5")
    assert len(messages) == 2
    assert "j1 was requeued" in messages[0]
    assert "never ended again" in messages[0]
    assert messages[1] == "job j2 is cancelled, but no recorded cancel took it"


def test_a_requeued_job_left_ready_is_stranded() -> None:
    h = History()
    h.submit("j1")
    h.cancel("j1", at=1.0, row_gen=0)
    h.requeue("j1", at=1.5, row_gen=0)
    h.final("j1", "ready", 0)
    [message] = _messages(nothing_lost(Context(h.events)), "I5")
    assert "stranded: ready" in message


def test_cancels_and_requeues_are_marked_on_the_report() -> None:
    from tenure.chaos._report import render
    from tenure.chaos._timeline import marks

    h = _cancelled_and_rerun()
    found = [(m.kind, m.gen) for m in marks(Context(h.events))["j1"]]
    assert ("cancelled", 2) in found
    assert ("requeued", 2) in found
    page = render(check_history(h.events))
    assert 'class="cancelled"' in page
    assert 'class="requeued"' in page
