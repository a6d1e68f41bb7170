"""Each unit of the checker alone, on hand-built histories: what it accepts and what it
flags (test_checker.py checks the composed verdict)."""

from __future__ import annotations

from tenure.chaos._context import Context
from tenure.chaos._invariants import (
    UNITS,
    current_holder,
    destinations,
    done_by_its_completion,
    exclusivity,
    nothing_lost,
    one_completion,
    repeat_answer,
    tokens,
)
from tenure.chaos._timeline import fault_spans, marks
from tenure.chaos._verdict import Violation
from tests.chaos._histories import T0, TTL, A, B, History, clean

C = "host:3:cccccc"


def _messages(found: list[Violation], invariant: str) -> list[str]:
    assert {v.invariant for v in found} <= {invariant}, [v.line() for v in found]
    return [v.message for v in found]


def _one_job(*, final_gen: int = 1) -> History:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)  # lease until 3.0
    h.final("j1", "done", final_gen)
    return h


def test_every_unit_accepts_the_clean_history() -> None:
    ctx = Context(clean().events)
    assert len(UNITS) == 8
    for unit in UNITS:
        assert unit(ctx) == [], unit.__name__


# -- I1 tokens -----------------------------------------------------------------------------


def test_tokens_a_generation_granted_twice() -> None:
    h = _one_job()
    op = h.claim("w2.1", B, "j1", 1, at=5.0)
    [message] = _messages(tokens(Context(h.events)), "I1")
    assert "generation 1 was granted 2 times" in message
    assert op in message


def test_tokens_generations_going_backwards() -> None:
    h = _one_job(final_gen=2)
    h.claim("w2.1", B, "j1", 2, at=0.5)  # generation 2 before generation 1
    assert any("went backwards" in m for m in _messages(tokens(Context(h.events)), "I1"))


def test_tokens_the_store_shows_a_lower_generation_after_the_run() -> None:
    h = _one_job(final_gen=0)
    [message] = _messages(tokens(Context(h.events)), "I1")
    assert "shows generation 0 after the run, lower than generation 1" in message


def test_tokens_a_gap_is_explained_by_a_lost_claim_of_that_job() -> None:
    h = _one_job(final_gen=2)  # generation 2 was never granted by a recorded claim
    [message] = _messages(tokens(Context(h.events)), "I1")
    assert "generation(s) 2 were never granted" in message
    h.op("w2.1", "claim", "unknown", 2.0, {"job": "j1", "owner": B, "ttl": TTL})
    assert tokens(Context(h.events)) == []


# -- I2 exclusivity ------------------------------------------------------------------------


def test_exclusivity_a_claim_before_the_lease_ran_out() -> None:
    h = _one_job(final_gen=2)
    h.claim("w2.1", B, "j1", 2, at=2.5)
    [message] = _messages(exclusivity(Context(h.events)), "I2")
    assert "overlaps generation 1" in message
    assert "by 0.500 s" in message


def test_exclusivity_a_settle_ends_the_lease_before_its_time() -> None:
    h = _one_job(final_gen=2)
    h.holder("release", "w1.1", A, "j1", 1, at=2.0)
    h.claim("w2.1", B, "j1", 2, at=2.5)
    assert exclusivity(Context(h.events)) == []


def test_exclusivity_a_true_repeat_ends_the_lease_its_lost_settle_ended() -> None:
    h = _one_job(final_gen=2)
    h.holder("release", "w1.1", A, "j1", 1, at=2.0, outcome="unknown")
    h.holder("release", "w1.1", A, "j1", 1, at=2.2, repeat=True, row_state="ready")
    h.claim("w2.1", B, "j1", 2, at=2.5)
    assert exclusivity(Context(h.events)) == []


def test_exclusivity_an_accepted_renewal_extends_the_lease() -> None:
    h = _one_job(final_gen=2)
    h.holder("renew", "w1.1", A, "j1", 1, at=2.0)  # now until 4.0
    h.claim("w2.1", B, "j1", 2, at=3.5)
    [message] = _messages(exclusivity(Context(h.events)), "I2")
    assert "by 0.500 s" in message


# -- I3: the current holder, per accepted call ----------------------------------------------


def _step_check(h: History, op: str) -> str | None:
    ctx = Context(h.events)
    found = current_holder(ctx, ctx.leases.step_of(op))
    assert found is None or found.invariant == "I3"
    return None if found is None else found.message


def test_current_holder_accepts_the_holder_in_time() -> None:
    h = _one_job()
    renew = h.holder("renew", "w1.1", A, "j1", 1, at=2.5)
    complete = h.holder("complete", "w1.1", A, "j1", 1, at=4.0)  # in the renewed lease
    assert _step_check(h, renew) is None
    assert _step_check(h, complete) is None


def test_current_holder_another_owner_of_the_generation() -> None:
    h = _one_job()
    op = h.holder("complete", "w2.1", B, "j1", 1, at=1.5)
    message = _step_check(h, op)
    assert message is not None
    assert f"but generation 1 was granted to {A}" in message


def test_current_holder_a_lease_no_claim_granted_unless_a_claim_was_lost() -> None:
    h = _one_job()
    op = h.holder("complete", "w2.1", B, "j1", 7, at=1.5)
    assert "no recorded claim granted" in (_step_check(h, op) or "")
    h.lost_claim("w2.1", B, at=1.2)  # its reply may have granted it
    assert _step_check(h, op) is None


def test_current_holder_a_newer_generation_was_granted_first() -> None:
    h = _one_job(final_gen=2)
    h.claim("w2.1", B, "j1", 2, at=3.5)
    op = h.holder("renew", "w1.1", A, "j1", 1, at=4.0)
    assert "generation 2 had been granted to" in (_step_check(h, op) or "")


def test_current_holder_after_the_lease_was_ended() -> None:
    h = _one_job()
    release = h.holder("release", "w1.1", A, "j1", 1, at=1.5)
    op = h.holder("complete", "w1.1", A, "j1", 1, at=2.0)
    message = _step_check(h, op) or ""
    assert f"after its lease had ended ({release})" in message


def _renewal_racing_the_completion(*, overlapping: bool) -> tuple[History, str]:
    """A worker's completion reads the store's clock at 1.50 and its renewal at 1.51 (both
    accepted); with ``overlapping`` the completion's call returned only after the renewal
    had been sent (its row lock came after the renewal's commit)."""
    h = _one_job()
    h.holder("complete", "w1.1", A, "j1", 1, at=1.50)
    if overlapping:
        h.events[-1]["t"] = T0 + 1.52
    op = h.holder("renew", "w1.1", A, "j1", 1, at=1.51)
    return h, op


def test_current_holder_a_renewal_serialized_before_an_overlapping_completion() -> None:
    h, op = _renewal_racing_the_completion(overlapping=True)
    assert _step_check(h, op) is None
    ctx = Context(h.events)
    assert ctx.counts["settles_serialized_after_renewal"] == 1
    # The lease ended with the completion, after the renewal: I2 sees it held until then.
    [interval] = ctx.claims.intervals["j1"]
    assert interval.end == T0 + 1.51


def test_current_holder_a_renewal_after_a_completion_that_had_returned() -> None:
    h, op = _renewal_racing_the_completion(overlapping=False)
    assert "after its lease had ended" in (_step_check(h, op) or "")


def test_current_holder_after_expiry_unless_a_renewal_was_lost() -> None:
    h = _one_job()
    op = h.holder("complete", "w1.1", A, "j1", 1, at=3.5)
    assert "0.500 s after its lease expired" in (_step_check(h, op) or "")
    h.holder("renew", "w1.1", A, "j1", 1, at=2.5, outcome="unknown")  # it may have applied
    assert _step_check(h, op) is None


def test_the_step_holds_the_lease_as_the_call_found_it() -> None:
    h = _one_job()
    renew = h.holder("renew", "w1.1", A, "j1", 1, at=2.0)
    ctx = Context(h.events)
    step = ctx.leases.step_of(renew)
    assert step.until == T0 + 3.0  # before the renewal
    assert step.lease is not None
    assert step.lease.until == T0 + 4.0


# -- I3: repeat answers -------------------------------------------------------------------


def _repeat(h: History, op: str) -> str | None:
    found = repeat_answer(Context(h.events).leases.step_of(op))
    assert found is None or found.invariant == "I3"
    return None if found is None else found.message


def test_repeat_answer_after_the_same_settle_accepted_or_unknown() -> None:
    for outcome in ("ok", "unknown"):
        h = _one_job()
        h.holder("complete", "w1.1", A, "j1", 1, at=1.5, outcome=outcome)
        op = h.holder("complete", "w1.1", A, "j1", 1, at=1.6, repeat=True, row_state="done")
        assert _repeat(h, op) is None, outcome


def test_repeat_answer_with_no_earlier_settle() -> None:
    h = _one_job()
    op = h.holder("fail", "w1.1", A, "j1", 1, at=1.5, repeat=True, row_state="ready")
    message = _repeat(h, op) or ""
    assert "answered as a repeat of an earlier fail" in message
    assert "no earlier fail of this lease was accepted or left unknown" in message


def test_repeat_answer_after_a_settle_of_another_kind() -> None:
    h = _one_job()
    release = h.holder("release", "w1.1", A, "j1", 1, at=1.5)
    op = h.holder("fail", "w1.1", A, "j1", 1, at=1.6, repeat=True, row_state="ready")
    assert f"the lease was ended by release [op {release}]" in (_repeat(h, op) or "")


def test_repeat_answer_of_a_renewal_is_always_true() -> None:
    h = _one_job()
    op = h.holder("renew", "w1.1", A, "j1", 1, at=1.5, repeat=True)
    assert _repeat(h, op) is None


# -- I3: one completion, and the final state -----------------------------------------------


def test_one_completion_per_job() -> None:
    h = _one_job()
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5)
    assert one_completion(Context(h.events)) == []
    h.holder("complete", "w1.1", A, "j1", 1, at=1.6)
    [message] = _messages(one_completion(Context(h.events)), "I3")
    assert "job j1 was completed 2 times" in message


def test_done_without_an_accepted_completion_unless_one_is_unknown() -> None:
    h = _one_job()
    [message] = _messages(done_by_its_completion(Context(h.events)), "I3")
    assert "without any accepted completion" in message
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5, outcome="unknown")
    assert done_by_its_completion(Context(h.events)) == []


def test_done_at_another_generation_than_the_completion() -> None:
    h = _one_job(final_gen=2)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5)
    [message] = _messages(done_by_its_completion(Context(h.events)), "I3")
    assert "ended done at generation 2, but the completion the store accepted" in message


def test_done_with_the_result_of_another_generation() -> None:
    h = _one_job()
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5)
    for event in h.events:
        if event.get("f") == "final":
            event["result"] = {"gen": 3}
    [message] = _messages(done_by_its_completion(Context(h.events)), "I3")
    assert "with the result of generation 3" in message


# -- I4 destinations ----------------------------------------------------------------------


def _written(h: History) -> History:
    h.claim("w2.1", B, "j1", 2, at=4.0)
    return h


def test_destinations_in_order_then_a_lower_generation() -> None:
    h = _written(_one_job(final_gen=2))
    h.write("w1.1", A, "j1", 1, 1, at=1.5)
    h.write("w2.1", B, "j1", 2, 1, at=4.5)
    assert destinations(Context(h.events)) == []
    op, record = h.write("w1.1", A, "j1", 1, 2, at=4.6)
    [message] = _messages(destinations(Context(h.events)), "I4")
    assert f"a write of generation 1 (record {record}, [op {op}] by w1.1)" in message


def test_destinations_the_sender_counts_not_what_the_sink_was_shown() -> None:
    h = _written(_one_job(final_gen=2))
    h.write("w2.1", B, "j1", 2, 1, at=4.5)
    h.write("w1.1", A, "j1", 1, 2, at=4.6)
    for event in h.events:  # the late writer claimed generation 2 to the sink
        if event.get("f") == "sink-record" and event["gen"] == 1:
            event["gen"] = 2
    assert len(_messages(destinations(Context(h.events)), "I4")) == 1


def test_destinations_without_a_ledger_use_the_writers_view() -> None:
    h = _written(_one_job(final_gen=2))
    h.write("w2.1", B, "j1", 2, 1, at=4.5)
    h.write("w1.1", A, "j1", 1, 2, at=4.6)
    h.events = [e for e in h.events if e.get("f") != "sink-record"]
    assert len(_messages(destinations(Context(h.events)), "I4")) == 1


def test_destinations_an_effect_key_twice_and_an_unknown_writer() -> None:
    h = _one_job()
    h.write("w1.1", A, "j1", 1, 1, at=1.5)
    h._event("harness", type="event", f="sink-record", record=50, job="j1", gen=1, key="g1-s1")
    [message] = _messages(destinations(Context(h.events)), "I4")
    assert "effect key 'g1-s1' was accepted twice (records 1 and 50)" in message
    h._event("harness", type="event", f="sink-record", record=40, job="j1", gen=0, key=None)
    found = _messages(destinations(Context(h.events)), "I4")
    assert any("(record 40, (writer not recorded))" in m for m in found), found


# -- I5 nothing lost ----------------------------------------------------------------------


def test_nothing_lost_done_or_dead_after_every_attempt() -> None:
    h = _one_job()
    h.submit("j2")
    h.final("j2", "dead", 5, attempts=5)
    assert nothing_lost(Context(h.events)) == []


def test_nothing_lost_stranded_early_death_and_missing_state() -> None:
    h = _one_job()
    for job, state, attempts in (("j2", "ready", 1), ("j3", "dead", 2)):
        h.submit(job)
        h.final(job, state, 1, attempts=attempts)
    h.submit("j4")
    found = _messages(nothing_lost(Context(h.events)), "I5")
    assert found == [
        "job j2 is stranded: ready after the run (generation 1, owner None)",
        "job j3 is dead after 2 of its 5 attempts",
        "job j4: no final state recorded",
    ]


def test_nothing_lost_without_any_final_state() -> None:
    h = History()
    h.submit("j1")
    found = _messages(nothing_lost(Context(h.events)), "I5")
    assert found == ["the history has no final job states: nothing to check"]


# -- the report's faults and marks ---------------------------------------------------------


def test_fault_spans_and_missed_pause_points() -> None:
    h = clean()
    h._event("nemesis", type="event", f="fault", kind="pause-renew", phase="missed", t=T0 + 9)
    ctx = Context(h.events)
    faults, spans = fault_spans(ctx)
    assert faults == {"pause-handler": 1}
    assert [(s["kind"], s["start"], s["end"]) for s in spans] == [
        ("pause-handler", T0 + 1.6, T0 + 4.6)
    ]
    assert ctx.counts["pause_points_missed"] == 1


def test_marks_of_rejections_and_writes() -> None:
    found = marks(Context(clean().events))
    assert [m.kind for m in found["j1"]] == [
        "rejected-complete",
        "write-ok",
        "write-ok",
        "write-ok",
        "write-stale",
    ]
    assert [m.kind for m in found["j2"]] == ["write-ok"]
