"""The error tree and what its messages say (pure)."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tenure._protocol import JobRow, Outcome, Status, claim_verdict, lease_lost


def test_the_tree() -> None:
    for error in (
        tenure.LeaseLost,
        tenure.StaleToken,
        tenure.JobNotFound,
        tenure.GenerationExhausted,
        tenure.InvalidArgument,
        tenure.StoreUnavailable,
    ):
        assert issubclass(error, tenure.TenureError)
    assert issubclass(tenure.InvalidArgument, ValueError)
    assert issubclass(tenure.JobNotFound, LookupError)
    assert issubclass(tenure.TenureError, Exception)
    assert issubclass(tenure.StoreLost, tenure.StoreUnavailable)


class _Refusing:
    """A driver whose clock read fails with ``error`` every time, counting the calls."""

    store_id = "s"
    url = "test://"

    def __init__(self, error: tenure.StoreUnavailable) -> None:
        self.error = error
        self.calls = 0

    def now(self) -> float:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize(
    ("error", "calls"),
    [
        (tenure.StoreUnavailable("down", operation="now", outcome_unknown=False), 3),
        (tenure.StoreLost("lost", operation="now", outcome_unknown=False), 1),
    ],
)
def test_the_store_retries_an_outage_but_not_a_lost_store(
    error: tenure.StoreUnavailable, calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tenure._store.pause", lambda seconds: None)
    driver = _Refusing(error)
    store = tenure.Store(driver, retries=2)  # type: ignore[arg-type]
    with pytest.raises(type(error)):
        store.now()
    assert driver.calls == calls


def test_invalid_argument_message() -> None:
    error = tenure.InvalidArgument("ttl", "must be positive")
    assert str(error) == "ttl: must be positive"
    assert (error.argument, error.rule) == ("ttl", "must be positive")


def test_job_not_found_message() -> None:
    error = tenure.JobNotFound("report 42")
    assert "'report 42'" in str(error)
    assert "(store.submit, tenure jobs submit)" in str(error)
    assert error.job_id == "report 42"


def test_generation_exhausted_message() -> None:
    error = tenure.GenerationExhausted("J", 2**63 - 1)
    assert "'J'" in str(error)
    assert str(2**63 - 1) in str(error)
    assert "new job id" in str(error)
    assert (error.job_id, error.generation) == ("J", 2**63 - 1)


def test_other_error_fields() -> None:
    lost = tenure.LeaseLost("m", job_id="J", generation=7, current_generation=8, current_owner="B")
    assert (lost.job_id, lost.generation, lost.current_generation, lost.current_owner) == (
        "J",
        7,
        8,
        "B",
    )
    stale = tenure.StaleToken("m", job_id="J", generation=7, highest_seen=8)
    assert (stale.job_id, stale.generation, stale.highest_seen) == ("J", 7, 8)
    down = tenure.StoreUnavailable("m", operation="claim", outcome_unknown=True)
    assert (down.operation, down.outcome_unknown) == ("claim", True)


# -- the messages the protocol core writes --------------------------------------------------


def row(**changes: Any) -> JobRow:
    base = JobRow(
        "J", "default", "leased", "B", 8, "hash-b", 130.0, 130.0, 2, 5, None, None, None, 0.0, 100.0
    )
    return base._replace(**changes)


LEASE_A = tenure.Lease("J", "A", 7, 110.0, 10.0, 1, 0.0, "secret-a", "store")


@pytest.mark.parametrize(
    ("current", "now", "words"),
    [
        (row(), 120.0, "now at generation 8, held by 'B'"),
        (row(generation=7, owner="A", state="done"), 120.0, "already ended (job is done)"),
        (row(generation=7, owner="A", lease_until=110.0), 112.5, "expired 2.500 s ago"),
        (row(generation=7, owner="A", lease_until=200.0), 120.0, "owner or secret does not match"),
    ],
)
def test_lease_lost_says_why(current: JobRow, now: float, words: str) -> None:
    error = lease_lost("complete", LEASE_A, Outcome(Status.MISSED, current, now))
    message = str(error)
    assert words in message
    assert message.startswith("complete rejected for job 'J' generation 7 (owner 'A')")
    assert "changed nothing" in message
    assert (error.job_id, error.generation) == ("J", 7)
    assert error.current_generation == current.generation
    assert error.current_owner == current.owner


def test_lease_lost_for_a_missing_job() -> None:
    error = lease_lost("renew", LEASE_A, Outcome(Status.MISSING, None, 0.0))
    assert "no longer exists" in str(error)
    assert "'J'" in str(error)
    assert error.current_generation is None


def test_claim_verdicts() -> None:
    now = 120.0
    free = row(state="ready", owner=None, generation=3, lease_until=None, available_at=100.0)
    assert claim_verdict(Outcome(Status.APPLIED, free, now), "J", "A", "h") == "claimed"
    assert claim_verdict(Outcome(Status.MISSED, row(), now), "J", "A", "h") == "held"
    mine = row(owner="A", secret_hash="h")
    assert claim_verdict(Outcome(Status.MISSED, mine, now), "J", "A", "h") == "already_yours"
    done = row(state="done")
    assert claim_verdict(Outcome(Status.MISSED, done, now), "J", "A", "h") == "not_claimable"
    buried = row(state="dead")
    assert claim_verdict(Outcome(Status.BURIED, buried, now), "J", "A", "h") == "buried"
    with pytest.raises(tenure.JobNotFound) as caught:
        claim_verdict(Outcome(Status.MISSING, None, now), "J", "A", "h")
    assert caught.value.job_id == "J"
    top = row(state="ready", generation=2**63 - 1, available_at=100.0, lease_until=None)
    with pytest.raises(tenure.GenerationExhausted):
        claim_verdict(Outcome(Status.MISSED, top, now), "J", "A", "h")
