"""The checker on hand-built histories: a clean one passes; each invariant, violated once,
is caught and the offending operations are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenure.chaos import check_history
from tenure.chaos._checker import Verdict
from tenure.cli import main
from tests.chaos._histories import T0, A, B, History, clean


def _check(h: History) -> Verdict:
    return check_history(h.events)


def _only(verdict: Verdict, invariant: str) -> list[str]:
    """The messages of ``invariant``'s violations; no other invariant may be violated."""
    assert verdict.status == "INVALID", verdict.lines()
    others = {v.invariant for v in verdict.violations} - {invariant}
    assert not others, [v.line() for v in verdict.violations]
    return [v.message for v in verdict.violations]


def test_clean_history_is_valid_and_faults_bit() -> None:
    verdict = _check(clean())
    assert verdict.status == "VALID", verdict.lines()
    c = verdict.counts
    assert c["claims"] == 3
    assert c["stale_completions_rejected"] == 1
    assert c["stale_writes_rejected"] == 1
    assert c["completions"] == 1  # j2's completion is known by its repeat only
    assert c["completion_repeats"] == 1
    assert (c["jobs_submitted"], c["jobs_done"], c["jobs_stranded"]) == (2, 2, 0)
    assert verdict.faults == {"pause-handler": 1}
    assert verdict.headline().startswith("VALID")


def test_no_stale_rejection_means_unproven() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.2)
    h.fault("pause", at=0.5)
    h.final("j1", "done", 1)
    verdict = _check(h)
    assert verdict.status == "UNPROVEN"
    assert not verdict.violations


@pytest.mark.parametrize("ending", ["fail", "release"])
def test_a_refused_stale_fail_or_release_bites(ending: str) -> None:
    """A's lease ran out while it was stopped; B took the job over and completed it; A's
    fail (a timeout, say) or release is refused: the same bite as a stale completion."""
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.fault("pause-handler", at=1.2)
    h.claim("w2.1", B, "j1", 2, at=4.0)
    h.holder("complete", "w2.1", B, "j1", 2, at=4.3)
    h.holder(ending, "w1.1", A, "j1", 1, at=4.7, outcome="fail", row_gen=2, row_state="done")
    h.final("j1", "done", 2)
    verdict = _check(h)
    assert verdict.status == "VALID", verdict.lines()
    assert verdict.counts[f"stale_{ending}s_rejected"] == 1
    assert verdict.headline().endswith(", 1 stale fails or releases refused")
    # Without A's refused call nothing bit.
    h.events = [e for e in h.events if e.get("f") != ending]
    assert _check(h).status == "UNPROVEN"


def test_i1_a_generation_granted_twice() -> None:
    h = clean()
    # Generation 2 granted again, to someone else, after B's lease had ended.
    op = h.claim("w3.1", "host:3:cccccc", "j1", 2, at=6.0)
    messages = _only(_check(h), "I1")
    assert any("generation 2 was granted 2 times" in m and op in m for m in messages), messages


def test_i1_generations_going_backwards() -> None:
    h = History()
    h.submit("j1")
    first = h.claim("w1.1", A, "j1", 2, at=1.0)
    h.holder("release", "w1.1", A, "j1", 2, at=1.5)
    second = h.claim("w2.1", B, "j1", 1, at=2.0)
    h.holder("complete", "w2.1", B, "j1", 1, at=2.5)
    h.final("j1", "done", 2)
    verdict = _check(h)
    messages = [v.message for v in verdict.violations if v.invariant == "I1"]
    assert any("went backwards" in m and first in m and second in m for m in messages), messages


def test_i1_unexplained_gap() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("release", "w1.1", A, "j1", 1, at=1.2)
    h.claim("w1.1", A, "j1", 3, at=2.0)  # who took generation 2?
    h.holder("complete", "w1.1", A, "j1", 3, at=2.1)
    h.final("j1", "done", 3)
    assert any("generation(s) 2 were never granted" in m for m in _only(_check(h), "I1"))
    # A claim whose reply was lost explains it.
    h.lost_claim("w2.1", B, at=1.5)
    assert not [v for v in _check(h).violations if v.invariant == "I1"]


def test_i1_a_lost_batch_claim_explains_up_to_its_size() -> None:
    def history(limit: int) -> History:
        h = History()
        for job in ("j1", "j2"):
            h.submit(job)
            h.claim("w1.1", A, job, 2, at=4.0)  # generation 1 of each went to a lost reply
            h.holder("complete", "w1.1", A, job, 2, at=4.1)
            h.final(job, "done", 2)
        h.lost_claim("w2.1", B, at=1.0, limit=limit)
        return h

    assert len(_only(_check(history(1)), "I1")) == 2  # a lost claim of one job: 2 gaps
    assert _check(history(2)).status == "UNPROVEN"  # a lost batch of 2 explains both


def test_i2_overlapping_ownership() -> None:
    h = clean()
    # B's claim of generation 2 moved to before A's lease (until 3.5) ran out.
    for event in h.events:
        for claim in event.get("claims", []):
            if claim["job"] == "j1" and claim["gen"] == 2:
                claim["store_now"] = T0 + 3.0
    messages = _only(_check(h), "I2")
    assert len(messages) == 1
    assert "generation 2" in messages[0]
    assert "overlaps generation 1" in messages[0]
    assert "by 0.500 s" in messages[0]
    violation = _check(h).violations[0]
    assert len(violation.ops) == 2


def test_i3_stale_completion_accepted() -> None:
    h = clean()
    # A's late completion was *accepted* instead of rejected.
    for event in h.events:
        if event.get("f") == "complete" and event.get("proc") == "w1.1" and event["type"] == "fail":
            event["type"] = "ok"
            event["status"] = "applied"
    verdict = _check(h)
    messages = _only(verdict, "I3")
    stale = [m for m in messages if "stale w1.1 complete gen 1" in m]
    assert stale, messages
    assert "generation 2 had been granted" in stale[0], messages
    assert any("was completed 2 times" in m for m in messages), messages
    offending = {op for v in verdict.violations for op in v.ops}
    assert any(op.startswith("w1.1/") for op in offending)


def test_i3_renewal_after_expiry_accepted() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)  # lease until 3.0
    op = h.holder("renew", "w1.1", A, "j1", 1, at=3.5)  # accepted, but expired at 3.0
    h.holder("complete", "w1.1", A, "j1", 1, at=3.6)
    h.final("j1", "done", 1)
    messages = _only(_check(h), "I3")
    assert any("after its lease expired" in m and op in m for m in messages), messages


def test_i3_completion_by_a_stranger() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    op = h.holder("complete", "w2.1", B, "j1", 1, at=1.5)  # B never held generation 1
    h.final("j1", "done", 1)
    messages = _only(_check(h), "I3")
    assert any(f"granted to {A}" in m and op in m for m in messages), messages


def test_i3_rejected_operation_changed_the_job() -> None:
    h = clean()
    # The store says j1 ended done by generation 1, whose completion it had rejected.
    for event in h.events:
        if event.get("f") == "final" and event["job"] == "j1":
            event["gen"] = 1
            event["result"] = {"gen": 1}
    verdict = _check(h)
    messages = [v.message for v in verdict.violations if v.invariant == "I3"]
    assert any("ended done at generation 1" in m for m in messages), verdict.lines()


@pytest.mark.parametrize("answered_as", ["repeat", "applied"])
def test_i3_another_settle_of_an_ended_lease_accepted(answered_as: str) -> None:
    """release, then fail on the same lease answered ok: whether the store called it a
    repeat (the hole of issue #12: it took any earlier settle for this one) or applied it,
    the fail was not the current holder's, and its error was never recorded."""
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    release = h.holder("release", "w1.1", A, "j1", 1, at=1.2)
    fail = h.holder(
        "fail", "w1.1", A, "j1", 1, at=1.3, repeat=answered_as == "repeat", row_state="ready"
    )
    h.claim("w2.1", B, "j1", 2, at=1.5)
    h.holder("complete", "w2.1", B, "j1", 2, at=1.6)
    h.final("j1", "done", 2)
    verdict = _check(h)
    messages = _only(verdict, "I3")
    assert any(fail in m for m in messages), messages
    if answered_as == "repeat":
        assert any(f"ended by release [op {release}]" in m for m in messages), messages


def test_i3_a_repeat_after_its_own_unknown_settle_is_valid() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("fail", "w1.1", A, "j1", 1, at=1.2, outcome="unknown")
    h.holder("fail", "w1.1", A, "j1", 1, at=1.3, repeat=True, row_state="ready")
    h.claim("w2.1", B, "j1", 2, at=1.5)
    h.holder("complete", "w2.1", B, "j1", 2, at=1.6)
    h.write("w2.1", B, "j1", 2, 1, at=1.55)
    h.write("w1.1", A, "j1", 1, 1, at=1.7, stale=True)
    h.final("j1", "done", 2)
    verdict = _check(h)
    assert not verdict.violations, verdict.lines()


def test_i4_stale_write_accepted() -> None:
    h = clean()
    op, record = h.write("w1.1", A, "j1", 1, 3, at=4.8)  # generation 1 after generation 2
    messages = _only(_check(h), "I4")
    assert len(messages) == 1
    assert f"write of generation 1 (record {record}, [op {op}]" in messages[0]
    assert "after one of generation 2" in messages[0]


def test_i4_effect_key_applied_twice() -> None:
    h = clean()
    h._event("harness", type="event", f="sink-record", record=99, job="j2", gen=1, key="g1-s1")
    messages = _only(_check(h), "I4")
    assert any("effect key 'g1-s1' was accepted twice" in m for m in messages), messages


def test_i5_stranded_and_early_death() -> None:
    h = clean()
    h.submit("j3")
    h.claim("w1.1", A, "j3", 1, at=6.0)
    h.final("j3", "leased", 1)
    h.submit("j4")
    h.claim("w1.1", A, "j4", 1, at=6.0)
    h.final("j4", "dead", 1, attempts=1)
    messages = _only(_check(h), "I5")
    assert any("j3 is stranded: leased" in m for m in messages), messages
    assert any("j4 is dead after 1 of its 5 attempts" in m for m in messages), messages


def test_i5_missing_final_state() -> None:
    h = clean()
    h.submit("j9")
    messages = _only(_check(h), "I5")
    assert messages == ["job j9: no final state recorded"]


def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    lines = [json.dumps(e) for e in clean().events]
    path.write_text("\n".join(lines) + '\n{"seq": 99, "t": 1', encoding="utf-8")
    from tenure.chaos import read_history

    assert check_history(read_history(path)).status == "VALID"


@pytest.mark.parametrize(
    ("history", "code", "word"), [("clean", 0, "VALID"), ("bad", 1, "INVALID")]
)
def test_check_command(tmp_path: Path, history: str, code: int, word: str) -> None:
    h = clean()
    if history == "bad":
        h.write("w1.1", A, "j1", 1, 3, at=4.8)
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in h.events) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["check", str(path), "--no-png"])
    assert result.exit_code == code, result.output
    last = result.output.strip().splitlines()
    assert last[-2].startswith(f"verdict: {word}")
    assert last[-1] == f"report: {tmp_path / 'report.html'}"
    assert (tmp_path / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    if word == "INVALID":
        assert "I4 destinations        VIOLATED x1" in result.output
    # The JSON says the same: each invariant listed, with how many violations.
    result = CliRunner().invoke(main, ["check", str(path), "--no-png", "--json"])
    assert result.exit_code == code, result.output
    answer = json.loads(result.output)
    assert answer["verdict"] == word
    violated = {key: found["violations"] for key, found in answer["invariants"].items()}
    assert violated == {"I1": 0, "I2": 0, "I3": 0, "I4": int(word == "INVALID"), "I5": 0}
    assert answer["invariants"]["I4"]["name"] == "destinations"
    assert (answer["limits"], answer["top_token"]) == ([], 2)  # j1 claimed twice
