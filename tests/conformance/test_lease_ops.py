"""renew, complete, release, fail; stale callers; repeats; generations (docs/design.md §1-§5)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure.stores import open_driver
from tests.backends import Backend
from tests.conformance._support import LosingReplies, forge, fresh_secret, job_view

T0 = tenure.ManualClock().time()
MAX_GENERATION = 2**63 - 1

# Each operation a lease holder can perform, called the way a worker would.
HOLDER_OPS: dict[str, Callable[[tenure.Store, tenure.Lease], object]] = {
    "renew": lambda store, lease: store.renew(lease),
    "complete": lambda store, lease: store.complete(lease, "result"),
    "release": lambda store, lease: store.release(lease),
    "fail": lambda store, lease: store.fail(lease, "boom", retry_in=0),
}
ops = pytest.mark.parametrize("op", list(HOLDER_OPS))


def claimed(
    store: tenure.Store, job_id: str = "J", owner: str = "A", ttl: float = 10
) -> tenure.Lease:
    lease = store.claim(job_id, owner, ttl)
    assert lease is not None
    return lease


def assert_rejected(
    store: tenure.Store, op: str, lease: tenure.Lease, *, current: int | None = None
) -> tenure.LeaseLost:
    """``op`` with ``lease`` must raise LeaseLost naming the job and generations, and leave
    every job exactly as it was."""
    before = [job_view(job) for job in store.jobs(limit=1000)]
    with pytest.raises(tenure.LeaseLost) as caught:
        HOLDER_OPS[op](store, lease)
    error = caught.value
    message = str(error)
    assert repr(lease.job_id) in message, message
    assert f"generation {lease.generation}" in message, message
    assert op in message, message
    assert (error.job_id, error.generation) == (lease.job_id, lease.generation)
    if current is not None:
        assert error.current_generation == current
        assert str(current) in message, message
    assert [job_view(job) for job in store.jobs(limit=1000)] == before
    return error


# -- renew -----------------------------------------------------------------------------


def test_renew_extends_from_store_now(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J")
    lease = claimed(store, ttl=10)
    clock.advance(6)
    renewed = store.renew(lease)
    assert renewed.lease_until == T0 + 16
    assert (renewed.job_id, renewed.owner, renewed.generation, renewed.ttl) == ("J", "A", 1, 10)
    assert renewed.secret == lease.secret
    assert renewed.attempt == 1
    assert renewed.local_deadline > lease.local_deadline
    longer = store.renew(renewed, 30)
    assert (longer.ttl, longer.lease_until) == (30.0, T0 + 36)
    shorter = store.renew(longer, timedelta(seconds=2))
    assert (shorter.ttl, shorter.lease_until) == (2.0, T0 + 8)  # a renewal may shorten it
    job = store.get("J")
    assert (job.state, job.generation, job.attempts, job.lease_until) == ("leased", 1, 1, T0 + 8)
    clock.advance(1.5)
    store.renew(lease)  # any copy of the same lease may renew: same owner, generation, secret
    assert store.get("J").lease_until == T0 + 17.5


def test_renew_keeps_others_out(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    store.submit("J")
    lease = claimed(store, ttl=10)
    other = open_store()
    for _ in range(5):
        clock.advance(8)
        lease = store.renew(lease)
        assert other.claim("J", "B", 10) is None
    assert store.get("J").generation == 1


def test_renew_after_expiry_is_rejected(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J")
    lease = claimed(store, ttl=10)
    clock.advance(10)
    error = assert_rejected(store, "renew", lease, current=1)
    assert "expired" in str(error)


# -- stale callers: every operation, every way of being stale ---------------------------


@ops
def test_stale_generation_is_rejected(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock, op: str
) -> None:
    store.submit("J")
    stale = claimed(store, owner="A")
    clock.advance(10)
    current = claimed(open_store(), owner="B")
    assert current.generation == 2
    error = assert_rejected(store, op, stale, current=2)
    assert error.current_owner == "B"
    assert "'B'" in str(error)
    store.complete(current)  # the current holder is unaffected


@ops
def test_stale_generation_same_owner_is_rejected(
    store: tenure.Store, clock: tenure.ManualClock, op: str
) -> None:
    store.submit("J")
    old = claimed(store, owner="A")
    clock.advance(10)
    new = claimed(store, owner="A")  # the same worker name, a new lease
    assert_rejected(store, op, old, current=2)
    HOLDER_OPS[op](store, new)


@ops
def test_expired_lease_is_rejected(store: tenure.Store, clock: tenure.ManualClock, op: str) -> None:
    store.submit("J")
    lease = claimed(store, ttl=10)
    clock.advance(10)  # nobody claimed it again, but it expired by store time
    error = assert_rejected(store, op, lease, current=1)
    assert "expired" in str(error)
    job = store.get("J")
    assert (job.state, job.generation, job.owner) == ("leased", 1, "A")


@ops
@pytest.mark.parametrize(
    "forgery", ["secret", "owner", "owner+secret", "generation+1", "generation-1"]
)
def test_forged_leases_are_rejected_by_the_store(
    store: tenure.Store, clock: tenure.ManualClock, op: str, forgery: str
) -> None:
    """A well-formed lease with other fields passes the client's checks; the store must
    still refuse a wrong owner, secret or generation."""
    store.submit("J")
    clock.advance(10)
    if forgery == "generation-1":
        claimed(store, owner="A", ttl=1)
        clock.advance(1)
    real = claimed(store, owner="A")
    changes: dict[str, Any] = {  # type: ignore[assignment]
        "secret": {"secret": fresh_secret()},
        "owner": {"owner": "B"},
        "owner+secret": {"owner": "B", "secret": fresh_secret()},
        "generation+1": {"generation": real.generation + 1},
        "generation-1": {"generation": real.generation - 1},
    }[forgery]
    assert_rejected(store, op, forge(real, **changes), current=real.generation)
    HOLDER_OPS[op](store, real)  # the real holder still can


@ops
@pytest.mark.parametrize("field", ["job_id", "owner", "generation", "secret"])
def test_edited_leases_are_refused_by_the_store(store: tenure.Store, op: str, field: str) -> None:
    """Another job's id, another owner, another generation or another lease's secret:
    well-formed, so only the store can tell, and it refuses without changing anything."""
    store.submit("J")
    store.submit("K")
    lease = claimed(store)
    other = claimed(store, "K")
    value: Any = {"job_id": "K", "owner": "B", "generation": 2, "secret": other.secret}[field]
    assert_rejected(store, op, dataclasses.replace(lease, **{field: value}))
    HOLDER_OPS[op](store, lease)
    HOLDER_OPS[op](store, other)


def test_an_edited_ttl_acts_as_the_ttl_argument(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    """ttl is the holder's own choice (renew(lease, ttl) takes any valid one), so an edited
    but valid ttl grants nothing new: it renews exactly as passing it would."""
    store.submit("J")
    lease = claimed(store, ttl=10)
    renewed = store.renew(dataclasses.replace(lease, ttl=99.0))
    assert renewed.ttl == 99.0
    assert store.get("J").lease_until == T0 + 99.0
    renewed = store.renew(dataclasses.replace(lease, ttl=timedelta(seconds=20)))  # type: ignore[arg-type]
    assert renewed.ttl == 20.0
    assert store.get("J").lease_until == T0 + 20.0


@ops
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl", float("inf")),
        ("ttl", float("nan")),
        ("ttl", 0),
        ("ttl", True),
        ("ttl", "30"),
        ("secret", None),
        ("secret", b"0" * 48),
        ("secret", "\ud800" * 48),
        ("job_id", "J\x00"),
        ("owner", "A\x00"),
        ("generation", 2**64),
        ("generation", 0),
    ],
)
def test_malformed_leases_are_invalid_and_change_nothing(
    store: tenure.Store, clock: tenure.ManualClock, op: str, field: str, value: Any
) -> None:
    """The holes of issue #12: each reached the store (stranding the job with ttl=inf or
    NaN) or raised a raw driver error. Now each is InvalidArgument naming the field."""
    store.submit("J")
    lease = claimed(store)
    before = [job_view(job) for job in store.jobs()]
    with pytest.raises(tenure.InvalidArgument) as caught:
        HOLDER_OPS[op](store, dataclasses.replace(lease, **{field: value}))
    assert caught.value.argument == f"lease.{field}"
    assert [job_view(job) for job in store.jobs()] == before
    clock.advance(11)  # the lease runs out as it would have: nothing stranded the job
    assert store.claim("J", "B", 10) is not None


@ops
def test_lease_from_another_store_is_invalid(
    store: tenure.Store,
    backend: Backend,
    tmp_path: Path,
    clock: tenure.ManualClock,
    op: str,
) -> None:
    store.submit("J")
    mine = claimed(store)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    with backend.isolated_url(other_dir) as other_url:
        other_store = tenure.connect(other_url, clock=clock, store_clock=clock)
        try:
            other_store.submit("J")  # the same job id, even the same generation
            foreign = other_store.claim("J", "A", 10)
            assert foreign is not None
            assert foreign.generation == mine.generation
            assert foreign.store_id != store.store_id
            before = [job_view(job) for job in store.jobs()]
            with pytest.raises(tenure.InvalidArgument) as caught:
                HOLDER_OPS[op](store, foreign)
            assert caught.value.argument == "lease.store_id"
            assert "another store" in str(caught.value)
            assert [job_view(job) for job in store.jobs()] == before
            HOLDER_OPS[op](other_store, foreign)
        finally:
            other_store.close()


@ops
def test_operations_on_ended_leases_are_rejected(
    store: tenure.Store, clock: tenure.ManualClock, op: str
) -> None:
    """After one operation ended the lease, the *other* operations with it are rejected
    (a repeat of the same one is not: see below). release and fail both leave the job ready
    at the same generation; the settle receipt the store keeps tells them apart (issue #12:
    release then fail used to answer success and drop the error)."""
    for index, ender in enumerate(["complete", "release", "fail"]):
        job_id = f"J{index}"
        store.submit(job_id)
        lease = claimed(store, job_id)
        HOLDER_OPS[ender](store, lease)
        if op == ender:
            continue
        error = assert_rejected(store, op, lease)
        past = {"complete": "completed", "release": "released", "fail": "failed"}[ender]
        assert f"already {past}" in str(error), error


# -- repeats of operations that took effect ----------------------------------------------


@pytest.mark.parametrize("op", ["complete", "release", "fail"])
def test_repeat_of_an_applied_operation_succeeds_and_changes_nothing(
    store: tenure.Store, clock: tenure.ManualClock, op: str
) -> None:
    store.submit("J", max_attempts=3)
    lease = claimed(store)
    HOLDER_OPS[op](store, lease)
    after = job_view(store.get("J"))
    clock.advance(1)
    HOLDER_OPS[op](store, lease)
    HOLDER_OPS[op](store, dataclasses.replace(lease))  # an equal copy
    assert job_view(store.get("J")) == after


def test_complete_with_another_result_is_not_a_repeat(store: tenure.Store) -> None:
    store.submit("J")
    lease = claimed(store)
    store.complete(lease, {"v": 1, "w": [1, 2]})
    store.complete(lease, {"w": [1, 2], "v": 1})  # the same value, keys in another order
    error = assert_rejected(store, "complete", lease)  # "result" is not {"v": 1, ...}
    assert "same result" in str(error)
    with pytest.raises(tenure.LeaseLost):
        store.complete(lease, {"v": 2})
    assert store.get("J").result == {"v": 1, "w": [1, 2]}


def test_fail_with_another_error_is_not_a_repeat(store: tenure.Store) -> None:
    store.submit("J", max_attempts=3)
    lease = claimed(store)
    store.fail(lease, "boom", retry_in=60)
    store.fail(lease, "boom", retry_in=60)
    with pytest.raises(tenure.LeaseLost):
        store.fail(lease, "another error", retry_in=60)
    assert store.get("J").error == "boom"


@pytest.mark.parametrize(("first", "second"), [("release", "fail"), ("fail", "release")])
def test_release_and_fail_of_one_lease_do_not_pass_for_repeats(
    store: tenure.Store, first: str, second: str
) -> None:
    """The two examples of issue #12 item 2, on every backend."""
    store.submit("J", max_attempts=3)
    lease = claimed(store)
    if first == "release":
        store.release(lease)
    else:
        store.fail(lease, "boom", retry_in=60)
    after = job_view(store.get("J"))
    settle = {"fail": lambda: store.fail(lease, "boom"), "release": lambda: store.release(lease)}
    with pytest.raises(tenure.LeaseLost) as caught:
        settle[second]()
    assert "changed nothing" in str(caught.value)
    assert job_view(store.get("J")) == after


def test_repeat_after_the_job_moved_on_is_rejected(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J")
    lease = claimed(store)
    store.release(lease)
    newer = claimed(store, owner="B")
    assert_rejected(store, "release", lease, current=2)
    store.fail(newer, "x", retry_in=0)
    newest = claimed(store, owner="C")
    assert_rejected(store, "fail", newer, current=3)
    store.complete(newest)


@pytest.mark.parametrize("op", ["renew", "complete", "release", "fail"])
def test_operation_retried_after_a_lost_reply(url: str, clock: tenure.ManualClock, op: str) -> None:
    driver = LosingReplies(open_driver(url, clock))
    store = tenure.Store(driver, clock=clock)
    try:
        store.submit("J", max_attempts=3)
        lease = claimed(store)
        driver.lose_next(op)
        HOLDER_OPS[op](store, lease)  # applied, reply lost, retried: success
        assert driver.calls[op] == 2
        job = store.get("J")
        expected = {
            "renew": ("leased", 1, 1),
            "complete": ("done", 1, 1),
            "release": ("ready", 1, 0),
            "fail": ("ready", 1, 1),
        }[op]
        assert (job.state, job.generation, job.attempts) == expected
        if op == "complete":
            assert job.result == "result"
    finally:
        store.close()


# -- complete ----------------------------------------------------------------------------


def test_complete(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J", {"in": 1})
    lease = claimed(store)
    clock.advance(9.5)
    store.complete(lease, {"out": 2})
    job = store.get("J")
    assert (job.state, job.owner, job.generation, job.attempts) == ("done", "A", 1, 1)
    assert (job.payload, job.result, job.lease_until) == ({"in": 1}, {"out": 2}, None)
    assert job.updated_at == T0 + 9.5
    clock.advance(1000)
    assert store.claim("J", "B", 10) is None
    assert store.claim_next("B", 10) is None


def test_complete_without_result(store: tenure.Store) -> None:
    store.submit("J")
    store.complete(claimed(store))
    assert store.get("J").result is None


# -- release -----------------------------------------------------------------------------


def test_release_refunds_the_attempt_and_frees_the_job(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    store.submit("J", max_attempts=1)
    for round_ in range(3):  # with max_attempts=1, only refunds make this possible
        lease = claimed(store, ttl=100)
        assert lease.generation == round_ + 1
        assert lease.attempt == 1
        clock.advance(1)
        store.release(lease)
        job = store.get("J")
        assert (job.state, job.attempts, job.lease_until) == ("ready", 0, None)
        assert job.available_at == store.now()
    other = open_store()
    lease_b = other.claim("J", "B", 10)  # claimable at once by anyone
    assert lease_b is not None
    assert lease_b.generation == 4
    other.complete(lease_b)


def test_release_then_claim_next(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J")
    lease = store.claim_next("A", 100)
    assert lease is not None
    store.release(lease)
    again = store.claim_next("B", 10)
    assert again is not None
    assert (again.job_id, again.generation) == ("J", 2)


# -- fail --------------------------------------------------------------------------------


def test_fail_retry_in(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J", max_attempts=3)
    lease = claimed(store)
    clock.advance(2)
    store.fail(lease, "network down", retry_in=30)
    job = store.get("J")
    assert (job.state, job.error, job.attempts, job.generation) == ("ready", "network down", 1, 1)
    assert job.available_at == T0 + 32
    assert job.lease_until is None
    clock.advance(29.9)
    assert store.claim("J", "B", 10) is None
    assert store.claim_next("B", 10) is None
    clock.advance(0.1)
    retry = store.claim_next("B", 10)
    assert retry is not None
    assert (retry.generation, retry.attempt) == (2, 2)


def test_fail_with_an_exception_and_a_timedelta(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J")
    store.fail(claimed(store), KeyError("missing thing"), retry_in=timedelta(minutes=1))
    job = store.get("J")
    assert job.error is not None
    assert "KeyError" in job.error
    assert "missing thing" in job.error
    assert job.available_at == T0 + 60


def test_fail_retry_in_zero(store: tenure.Store) -> None:
    store.submit("J")
    store.fail(claimed(store), "x", retry_in=0)
    again = store.claim("J", "B", 10)
    assert again is not None
    assert again.generation == 2


def test_fail_error_text_is_kept_safely(store: tenure.Store) -> None:
    store.submit("J")
    store.submit("K")
    store.fail(claimed(store), "bad\x00thing \ud800 é", retry_in=0)
    error = store.get("J").error
    assert error is not None
    assert error.startswith("bad")
    assert "thing" in error
    assert "é" in error
    assert "\x00" not in error
    assert "\ud800" not in error
    store.fail(claimed(store, "K"), "x" * 100_000, retry_in=0)
    long_error = store.get("K").error
    assert long_error is not None
    assert 1000 < len(long_error) <= 16_384


def test_fail_default_backoff_has_jitter_within_bounds(url: str, clock: tenure.ManualClock) -> None:
    policy = tenure.RetryPolicy(base=10.0, cap=40.0)
    store = tenure.connect(url, clock=clock, store_clock=clock, retry_policy=policy)
    try:
        delays: dict[int, list[float]] = {1: [], 2: [], 3: [], 4: []}
        for n in range(8):
            job_id = f"J{n}"
            store.submit(job_id, max_attempts=10)
            for attempt in (1, 2, 3, 4):
                lease = claimed(store, job_id)
                assert lease.attempt == attempt
                failed_at = store.now()
                store.fail(lease, "boom")
                delay = store.get(job_id).available_at - failed_at
                delays[attempt].append(delay)
                clock.advance(delay)
        for attempt, ceiling in ((1, 10.0), (2, 20.0), (3, 40.0), (4, 40.0)):
            for delay in delays[attempt]:
                assert ceiling / 2 <= delay <= ceiling, (attempt, delay)
            assert len(set(delays[attempt])) > 1, f"no jitter at attempt {attempt}"
    finally:
        store.close()


def test_fail_default_policy(store: tenure.Store) -> None:
    store.submit("J")
    lease = claimed(store)
    failed_at = store.now()
    store.fail(lease, "boom")
    delay = store.get("J").available_at - failed_at
    assert 0.5 <= delay <= 1.0  # RetryPolicy(): base 1 s, half fixed half jitter


def test_fail_on_the_last_attempt_is_dead(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J", max_attempts=2)
    store.fail(claimed(store), "first", retry_in=0)
    assert store.get("J").state == "ready"
    lease = claimed(store)
    assert lease.attempt == 2
    store.fail(lease, "second", retry_in=0)
    job = store.get("J")
    assert (job.state, job.error, job.attempts, job.generation) == ("dead", "second", 2, 2)
    assert job.lease_until is None
    clock.advance(10_000)
    assert store.claim("J", "B", 10) is None
    assert store.claim_next("B", 10) is None
    assert store.jobs(state="dead")[0].job_id == "J"
    store.fail(lease, "second", retry_in=0)  # a repeat is still recognised
    assert_rejected(store, "complete", lease)


def test_poison_job_is_buried_after_max_attempts(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    """A job whose every holder stalls past its lease must not be claimed forever."""
    store.submit("poison", {"p": 1}, max_attempts=3)
    leases = []
    for attempt in (1, 2, 3):
        lease = store.claim_next(f"w{attempt}", 10)
        assert lease is not None
        assert (lease.generation, lease.attempt) == (attempt, attempt)
        leases.append(lease)
        clock.advance(10)  # the holder stalls; the lease expires
    other = open_store()
    assert other.claim_next("w4", 10) is None
    job = store.get("poison")
    assert (job.state, job.generation, job.attempts) == ("dead", 3, 3)
    assert job.error  # says why
    assert job.lease_until is None
    for lease in leases:  # the late holders cannot resurrect or complete it
        for op in HOLDER_OPS:
            assert_rejected(store, op, lease)
    assert store.claim("poison", "w5", 10) is None


def test_poison_job_is_buried_by_claim_too(
    store: tenure.Store, clock: tenure.ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store.submit("poison", max_attempts=2)
    for _ in range(2):
        claimed(store, "poison", ttl=5)
        clock.advance(5)
    with caplog.at_level(logging.INFO, logger="tenure"):
        assert store.claim("poison", "B", 10) is None
    assert store.get("poison").state == "dead"
    # The claim that buried the job says so: no handler will report this death.
    (record,) = [r for r in caplog.records if r.name == "tenure"]
    assert record.getMessage() == "job poison dead: the lease of its last allowed attempt expired"
    assert (record.job_id, record.generation, record.attempts) == ("poison", 2, 2)  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["claim", "claim_next", "claim_many", "complete_and_claim"])
def test_a_buried_job_is_reported_and_logged_once(
    store: tenure.Store,
    clock: tenure.ManualClock,
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    """Every store reports a job its claim buried; the store (not the driver) logs it."""
    store.submit("poison", max_attempts=1)
    claimed(store, "poison", ttl=5)
    clock.advance(5)  # expired on its last allowed attempt
    store.submit("other")
    other = claimed(store, "other")
    with caplog.at_level(logging.INFO, logger="tenure"):
        if how == "claim":
            assert store.claim("poison", "B", 10) is None
        elif how == "claim_next":
            assert store.claim_next("B", 10) is None
        elif how == "claim_many":
            assert store.claim_many("B", 10, 3) == []
        else:
            assert store.complete_and_claim([other], "B", 10, 3) == ([], [])
    buried = [r for r in caplog.records if r.getMessage().startswith("job poison dead")]
    assert [(r.job_id, r.generation, r.attempts) for r in buried] == [("poison", 1, 1)]
    assert [r.name for r in buried] == ["tenure"]
    assert store.get("poison").state == "dead"


def test_buried_job_does_not_block_the_queue(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("poison", max_attempts=1)
    claimed(store, "poison", ttl=5)
    store.submit("good", delay=10)
    clock.advance(20)
    lease = store.claim_next("B", 10)
    assert lease is not None
    assert lease.job_id == "good"
    assert store.get("poison").state == "dead"


# -- generations -------------------------------------------------------------------------


def test_generation_exhausted(url: str, backend: Backend, store: tenure.Store) -> None:
    store.submit("J")
    backend.set_generation(url, "J", MAX_GENERATION - 1)
    last = claimed(store)
    assert last.generation == MAX_GENERATION  # exact: no float rounding
    assert last.token.generation == MAX_GENERATION
    assert store.get("J").generation == MAX_GENERATION
    store.release(last)
    before = job_view(store.get("J"))
    with pytest.raises(tenure.GenerationExhausted) as caught:
        store.claim("J", "B", 10)
    assert caught.value.job_id == "J"
    assert caught.value.generation == MAX_GENERATION
    assert str(MAX_GENERATION) in str(caught.value)
    assert "'J'" in str(caught.value)
    assert store.claim_next("B", 10) is None  # skipped, not an error for other jobs
    assert job_view(store.get("J")) == before
    store.submit("K")
    lease = store.claim_next("B", 10)
    assert lease is not None
    assert lease.job_id == "K"


def test_generation_exhausted_after_expiry(
    url: str, backend: Backend, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("J")
    backend.set_generation(url, "J", MAX_GENERATION - 1)
    last = claimed(store, ttl=10)
    assert store.claim("J", "B", 10) is None  # held: not yet an error
    clock.advance(10)
    with pytest.raises(tenure.GenerationExhausted):
        store.claim("J", "B", 10)
    assert store.get("J").generation == MAX_GENERATION
    assert_rejected(store, "complete", last)  # expired all the same


def test_worked_example(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    """docs/design.md §1: A claims at generation 7 and stalls; B claims at 8; A is rejected."""
    store.submit("J", {"report": 42}, max_attempts=3)
    for _ in range(6):  # earlier claims made the generation 6
        store.release(claimed(store, owner="earlier"))
    worker_a = store
    worker_b = open_store()
    lease_a = worker_a.claim("J", "A", 30)
    assert lease_a is not None
    assert lease_a.generation == 7
    clock.advance(31)  # A stalls past its lease
    assert lease_a.expired_locally(clock)
    lease_b = worker_b.claim("J", "B", 30)
    assert lease_b is not None
    assert lease_b.generation == 8
    assert lease_b.token.generation > lease_a.token.generation
    worker_b.complete(lease_b, {"by": "B"})
    # A wakes up and tries everything; the store rejects all of it and changes nothing.
    for op in HOLDER_OPS:
        error = assert_rejected(worker_a, op, lease_a, current=8)
        assert error.current_owner == "B"
    job = worker_a.get("J")
    assert (job.state, job.owner, job.generation, job.result) == ("done", "B", 8, {"by": "B"})
    assert job.attempts == 2  # A's and B's; the released ones were refunded


def test_generations_are_never_reused(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    store.submit("J", max_attempts=100)
    other = open_store()
    granted = []
    for step in range(12):
        worker = store if step % 2 else other
        lease = claimed(worker, owner=f"w{step}", ttl=5)
        granted.append(lease.generation)
        match step % 4:
            case 0:
                worker.release(lease)
            case 1:
                worker.fail(lease, "x", retry_in=0)
            case 2:
                clock.advance(5)
            case _:
                worker.renew(lease)
                clock.advance(5)
    assert granted == list(range(1, 13))
