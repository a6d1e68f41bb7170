"""I6 queue limits (``tenure chaos --workload flow``) on hand-built histories: what the unit
accepts (a lease that ended, expired or made room in the same statement; a renewal still in
flight; a settle whose answer was lost; leases of a rate-limited queue within its bucket)
and what it flags (more leases of a limited queue live at once than its limit, more leases
of a rate-limited queue started in a window than its bucket allows), and the verdict around
it."""

from __future__ import annotations

from tenure.chaos import check_history
from tenure.chaos._context import Context
from tenure.chaos._invariants import UNITS
from tenure.chaos._limits import queue_limits
from tests.chaos._histories import TTL, A, B, History

C = "host:3:cccccc"
Q = "chaos-q-limit2"


def _limited(limit: int = 2, jobs: int = 3, queue: str = Q) -> History:
    """``jobs`` jobs in ``queue``, limited to ``limit`` leases, and one in a free queue."""
    h = History()
    h.queue_limit(queue, limit)
    for n in range(1, jobs + 1):
        h.submit(f"j{n}", queue)
    h.submit("free", "chaos-q")
    return h


def _done(h: History, jobs: int = 3) -> History:
    for n in range(1, jobs + 1):
        h.final(f"j{n}", "done", 1)
    h.final("free", "done", 1)
    return h


def _check(h: History) -> tuple[list[str], dict[str, object]]:
    ctx = Context(h.events)
    found = queue_limits(ctx)
    assert {v.invariant for v in found} <= {"I6"}
    return [v.message for v in found], ctx.info


def test_i6_is_a_unit() -> None:
    assert queue_limits in UNITS


def test_leases_within_the_limit() -> None:
    h = _limited()
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.claim("w2.1", B, "j2", 1, at=1.2)
    h.claim("w3.1", C, "free", 1, at=1.3)  # another queue: not counted
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5)
    h.claim("w3.1", C, "j3", 1, at=1.6)  # j1 ended: room for one
    messages, info = _check(_done(h))
    assert messages == []
    assert info["limits"] == [{"queue": Q, "limit": 2, "peak": 2, "leases": 3}]


def test_more_leases_than_the_limit_are_flagged() -> None:
    h = _limited()
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.claim("w2.1", B, "j2", 1, at=1.2)
    third = h.claim("w3.1", C, "j3", 1, at=1.4)  # j1 and j2 still held: three at once
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5)
    [message], info = _check(_done(h))
    assert f"queue {Q} (at most 2 leased): 3 leases were live" in message
    for named in (third, "job j1 gen 1", "job j2 gen 1"):
        assert named in message
    assert info["limits"] == [{"queue": Q, "limit": 2, "peak": 3, "leases": 3}]


def test_an_expired_lease_frees_its_place() -> None:
    h = _limited(limit=1, jobs=2)
    h.claim("w1.1", A, "j1", 1, at=1.0)  # until 1.0 + TTL, never renewed
    h.claim("w2.1", B, "j2", 1, at=1.0 + TTL + 0.01)
    assert _check(_done(h, 2))[0] == []


def test_a_renewed_lease_holds_its_place() -> None:
    h = _limited(limit=1, jobs=2)
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("renew", "w1.1", A, "j1", 1, at=1.5)  # until 1.5 + TTL, answered at once
    h.claim("w2.1", B, "j2", 1, at=1.0 + TTL + 0.2)  # past the claim's lease, not the renewal's
    [message], _ = _check(_done(h, 2))
    assert "1 leased): 2 leases were live" in message


def test_a_renewal_still_in_flight_is_not_counted() -> None:
    # The renewal read the store's clock before the lease ran out and was answered after
    # the other claim: it may have committed after it, when the claim saw the lease expired.
    h = _limited(limit=1, jobs=2)
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("renew", "w1.1", A, "j1", 1, at=2.9, answered=3.5)
    h.claim("w2.1", B, "j2", 1, at=3.1)
    assert _check(_done(h, 2))[0] == []


def test_completed_and_claimed_in_one_statement() -> None:
    # complete_and_claim: the completion makes room for the claim, at the same store time.
    h = _limited(limit=1, jobs=2)
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5)
    h.claim("w1.1", A, "j2", 1, at=1.5)
    assert _check(_done(h, 2))[0] == []


def test_a_settle_whose_answer_was_lost_may_have_made_room() -> None:
    h = _limited(limit=1, jobs=2)
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.4, outcome="unknown")
    h.claim("w2.1", B, "j2", 1, at=1.6)
    assert _check(_done(h, 2))[0] == []


def test_a_lease_starts_when_its_claim_granted_it() -> None:
    # PostgreSQL: a limited queue's claim reads its time after the queue's lock, so its
    # lease starts after the statement's clock reading (the claim's store_now); j1's
    # completion came between the two.
    h = _limited(limit=1, jobs=2)
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.5)
    h.claim("w2.1", B, "j2", 1, at=1.4, lease_from=1.55)
    assert _check(_done(h, 2))[0] == []


def test_a_cancel_ends_the_lease() -> None:
    h = _limited(limit=1, jobs=2)
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.cancel("j1", at=1.2, row_gen=2)
    h.claim("w2.1", B, "j2", 1, at=1.3)
    assert _check(_done(h, 2))[0] == []


def test_the_verdict_lists_i6_and_the_peaks() -> None:
    h = _limited()
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.claim("w2.1", B, "j2", 1, at=1.2)
    h.claim("w3.1", C, "j3", 1, at=1.4)
    verdict = check_history(_done(h).events)
    assert verdict.status == "INVALID"
    assert "I6 x1" in verdict.headline()
    lines = verdict.lines()
    assert any(line.startswith("I6 queue limits") and "VIOLATED x1" in line for line in lines)
    assert f"limits: {Q} at most 2 (peak 3 over 3 leases)" in "\n".join(lines)


def test_no_i6_without_limits() -> None:
    h = History()
    h.submit("j1")
    h.claim("w1.1", A, "j1", 1, at=1.0)
    h.holder("complete", "w1.1", A, "j1", 1, at=1.2)
    h.final("j1", "done", 1)
    verdict = check_history(h.events)
    assert not any(line.startswith(("I6", "limits:")) for line in verdict.lines())
    assert "I6" not in verdict.shown_invariants()


def test_timed_out_attempts_are_counted_and_must_end_again() -> None:
    h = _limited(limit=1, jobs=1)
    h.claim("w1.1", A, "j1", 1, at=1.0)
    invoke = {"job": "j1", "gen": 1, "owner": A, "reason": "timeout: handler ran longer than 0.4"}
    h.op("w1.1", "fail", "ok", 1.4, invoke, job="j1", gen=1, store_now=1.4 + 1_700_000_000.0)
    h.final("j1", "ready", 1)  # the retry never ran: stranded
    h.final("free", "done", 1)
    verdict = check_history(h.events)
    assert verdict.counts["timeouts"] == 1
    assert any(v.invariant == "I5" and "stranded" in v.message for v in verdict.violations)


R = "chaos-q-rate"


def _rated(jobs: int, per_second: float = 2.0, burst: int = 2) -> History:
    h = History()
    h.queue_rate(R, per_second, burst)
    for n in range(1, jobs + 1):
        h.submit(f"r{n}", R)
    return h


def _rated_done(h: History, jobs: int) -> History:
    for n in range(1, jobs + 1):
        h.final(f"r{n}", "done", 1)
    return h


def _start_and_end(h: History, job: str, at: float) -> None:
    h.claim("w1.1", A, job, 1, at=at)
    h.holder("complete", "w1.1", A, job, 1, at=at + 0.01)


def test_leases_within_the_rate() -> None:
    # A full bucket of 2, then one token each half second (2 a second), exactly.
    h = _rated(5)
    for n, at in enumerate((1.0, 1.0, 1.5, 2.0, 2.5), start=1):
        _start_and_end(h, f"r{n}", at)
    messages, info = _check(_rated_done(h, 5))
    assert messages == []
    [rated] = info["limits"]  # type: ignore[misc]
    assert rated == {"queue": R, "per_second": 2.0, "burst": 2, "drawn": 2.0, "leases": 5}


def test_more_leases_started_than_the_rate_allows_are_flagged() -> None:
    # The bucket's 2, then a third 0.1 s later, where the next token is due at 1.5.
    h = _rated(3)
    for n, at in enumerate((1.0, 1.0, 1.1), start=1):
        _start_and_end(h, f"r{n}", at)
    [message], info = _check(_rated_done(h, 3))
    assert f"queue {R} (at most 2 started a second, burst 2): 3 leases started in" in message
    assert "(job r1 gen 1)" in message
    assert "(job r3 gen 1)" in message
    [rated] = info["limits"]  # type: ignore[misc]
    assert rated["drawn"] == 2.8  # type: ignore[index]


def test_a_slow_window_does_not_excuse_a_fast_one() -> None:
    # Spread out at first (the bucket refills to its burst and no further), then 3 at once.
    h = _rated(5, per_second=1.0, burst=2)
    for n, at in enumerate((1.0, 5.0, 9.0, 9.0, 9.0), start=1):
        _start_and_end(h, f"r{n}", at)
    [message], _ = _check(_rated_done(h, 5))
    assert "3 leases started in 0.000000 s" in message


def test_a_lease_found_after_its_claims_reply_was_lost_started_with_that_claim() -> None:
    # r1's claim at 1.0 took a token, but its reply was lost; the worker found the lease
    # by its secret at 1.52, after another worker's claim took the two tokens of 1.5.
    # The lease started at 1.0 (its lease_until less the TTL), not at the find's store
    # time: three leases from 1.0 to 1.5 are within 2 a second and a burst of 2.
    h = _rated(3)
    h.lost_claim("w1.1", A, at=1.0)
    for job in ("r2", "r3"):
        h.claim("w2.1", B, job, 1, at=1.5)
    h.claim("w1.1", A, "r1", 1, at=1.52, lease_from=1.0, found=True)
    messages, info = _check(_rated_done(h, 3))
    assert messages == []
    [rated] = info["limits"]  # type: ignore[misc]
    assert rated["drawn"] == 2.0  # type: ignore[index]


def test_the_verdict_lists_i6_and_the_rates_draw() -> None:
    h = _rated(2)
    for n, at in enumerate((1.0, 1.5), start=1):
        _start_and_end(h, f"r{n}", at)
    verdict = check_history(_rated_done(h, 2).events)
    lines = verdict.lines()
    assert any(line.startswith("I6 queue limits") and line.endswith(" ok") for line in lines)
    assert f"limits: {R} at most 2/s, burst 2 (drew 1 of 2 over 2 leases)" in "\n".join(lines)
