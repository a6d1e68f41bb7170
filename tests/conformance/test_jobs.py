"""submit, get, jobs() and the store's clock (docs/design.md §2, §4)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

import tenure
from tests.backends import Backend
from tests.conformance._support import job_view, snapshot

T0 = tenure.ManualClock().time()


def follows_boot_clock(backend: Backend) -> bool:
    """SQLite's store time runs on the host's boot clock (the manual clock's, here): within
    one boot a wall-clock step changes nothing. The servers' stores follow wall time."""
    return backend.name == "sqlite"


def test_submit_returns_a_ready_job(store: tenure.Store, clock: tenure.ManualClock) -> None:
    job = store.submit("J", {"n": 1}, queue="mail", max_attempts=4)
    assert job.job_id == "J"
    assert job.queue == "mail"
    assert job.state == "ready"
    assert job.owner is None
    assert job.generation == 0
    assert job.attempts == 0
    assert job.max_attempts == 4
    assert job.lease_until is None
    assert job.payload == {"n": 1}
    assert job.result is None
    assert job.error is None
    assert job.available_at == clock.time()
    assert job.created_at == clock.time()
    assert job.created is True  # this call created it
    assert job_view(store.get("J")) == job_view(job)
    assert store.get("J").created is None  # only submit's answer says


def test_submit_defaults(store: tenure.Store) -> None:
    job = store.submit("J")
    assert (job.queue, job.payload, job.max_attempts) == ("default", None, 5)


def test_submit_is_idempotent(store: tenure.Store, clock: tenure.ManualClock) -> None:
    first = store.submit("J", {"v": 1}, queue="a", max_attempts=2)
    lease = store.claim("J", "A", 10)
    assert lease is not None
    before = job_view(store.get("J"))
    clock.advance(3)
    again = store.submit("J", {"v": 2}, queue="b", delay=100, max_attempts=9)
    # The existing job is left as it is and its current snapshot returned, saying so.
    assert (first.created, again.created) == (True, False)
    assert again.to_dict()["created"] is False
    assert job_view(again) == before
    assert again.payload == first.payload == {"v": 1}
    assert job_view(store.get("J")) == before
    assert len(store.jobs()) == 1


def test_submit_again_after_done_does_not_revive(store: tenure.Store) -> None:
    store.submit("J")
    lease = store.claim("J", "A", 10)
    assert lease is not None
    store.complete(lease, "r")
    assert store.submit("J").state == "done"
    assert store.claim("J", "B", 10) is None


@pytest.mark.parametrize("delay", [30, 30.0, timedelta(seconds=30)])
def test_submit_delay(store: tenure.Store, clock: tenure.ManualClock, delay: object) -> None:
    job = store.submit("J", delay=delay)  # type: ignore[arg-type]
    assert job.state == "ready"
    assert job.available_at == clock.time() + 30
    assert store.claim("J", "A", 10) is None
    assert store.claim_next("A", 10) is None
    clock.advance(29.5)
    assert store.claim("J", "A", 10) is None
    assert store.claim_next("A", 10) is None
    clock.advance(0.5)  # due exactly now: claimable
    lease = store.claim("J", "A", 10)
    assert lease is not None
    assert lease.generation == 1


def test_payload_round_trip(store: tenure.Store) -> None:
    payload = {
        "text": 'nul\x00, tab\t, é, 中文, emoji 😀, quote " and backslash \\',
        "numbers": [0, -1, 2**53 + 1, 2**63, -(2**63), 1.5, -0.25, 1e300],
        "flags": [True, False, None],
        "nested": {"a": {"b": {"c": []}}, "": {}},
    }
    job = store.submit("J", payload)
    assert job.payload == payload
    assert store.get("J").payload == payload
    lease = store.claim("J", "A", 10)
    assert lease is not None
    store.complete(lease, result=payload)
    assert store.get("J").result == payload


@pytest.mark.parametrize("payload", [0, 1.25, "text", "", [], {}, [1, "two"], True, False])
def test_scalar_payloads_round_trip(store: tenure.Store, payload: object) -> None:
    store.submit("J", payload)
    got = store.get("J").payload
    assert got == payload
    assert type(got) is type(payload)


def test_tuples_become_lists(store: tenure.Store) -> None:
    store.submit("J", {"t": (1, 2)})
    assert store.get("J").payload == {"t": [1, 2]}


def test_payload_at_the_size_limit(store: tenure.Store) -> None:
    limit = 1024 * 1024
    at_limit = "a" * (limit - 2)  # JSON adds the two quotes
    store.submit("J", at_limit)
    assert store.get("J").payload == at_limit
    multibyte = "é" * ((limit - 2) // 2)  # 2 bytes each in UTF-8
    store.submit("K", multibyte)
    assert store.get("K").payload == multibyte


def test_ids_may_be_any_printable_text(store: tenure.Store) -> None:
    ids = [
        "a" * 255,
        "with space",
        "ünïcödé-中文-😀",
        "quote'\"; DROP TABLE tenure_jobs;--",
        "%:/?#",
    ]
    for job_id in ids:
        store.submit(job_id, queue=job_id)
        lease = store.claim_next(job_id, 10, queues=[job_id])
        assert lease is not None
        assert lease.job_id == job_id
        assert lease.owner == job_id
        assert store.get(job_id).queue == job_id
    assert sorted(job.job_id for job in store.jobs()) == sorted(ids)


def test_get_missing_job(store: tenure.Store) -> None:
    store.submit("J")
    with pytest.raises(tenure.JobNotFound) as caught:
        store.get("nope")
    assert caught.value.job_id == "nope"
    assert "'nope'" in str(caught.value)
    assert isinstance(caught.value, LookupError)


def test_get_is_a_snapshot(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("J")
    before = store.get("J")
    lease = store.claim("J", "A", 10)
    assert lease is not None
    assert before.state == "ready"  # an old snapshot does not change
    after = store.get("J")
    assert (after.state, after.owner, after.generation, after.attempts) == ("leased", "A", 1, 1)
    assert after.lease_until == lease.lease_until == clock.time() + 10
    assert after.as_of == clock.time()
    assert not after.lease_expired
    clock.advance(10)
    expired = store.get("J")
    assert expired.state == "leased"
    assert expired.lease_expired


def test_jobs_listing(store: tenure.Store, clock: tenure.ManualClock) -> None:
    assert store.jobs() == []
    for job_id, queue in [("a1", "a"), ("b1", "b"), ("a2", "a"), ("a3", "a"), ("b2", "b")]:
        store.submit(job_id, queue=queue)
        clock.advance(1)
    lease = store.claim("a2", "A", 10)
    assert lease is not None
    done = store.claim("b1", "A", 10)
    assert done is not None
    store.complete(done)

    def ids(jobs: list[tenure.Job]) -> list[str]:
        return [job.job_id for job in jobs]

    assert ids(store.jobs()) == ["a1", "b1", "a2", "a3", "b2"]  # oldest first
    assert ids(store.jobs(queue="a")) == ["a1", "a2", "a3"]
    assert ids(store.jobs(queue="b")) == ["b1", "b2"]
    assert ids(store.jobs(queue="c")) == []
    assert ids(store.jobs(state="ready")) == ["a1", "a3", "b2"]
    assert ids(store.jobs(state="leased")) == ["a2"]
    assert ids(store.jobs(state="done")) == ["b1"]
    assert ids(store.jobs(state="dead")) == []
    assert ids(store.jobs(queue="a", state="ready")) == ["a1", "a3"]
    assert ids(store.jobs(queue="b", state="leased")) == []
    assert ids(store.jobs(limit=2)) == ["a1", "b1"]
    assert ids(store.jobs(queue="a", limit=1)) == ["a1"]
    assert all(job.as_of == clock.time() for job in store.jobs())
    assert [job_view(job) for job in store.jobs()] == [
        job_view(store.get(job_id)) for job_id in ["a1", "b1", "a2", "a3", "b2"]
    ]


def test_jobs_limit_1000(store: tenure.Store) -> None:
    for i in range(3):
        store.submit(f"j{i}")
    assert len(store.jobs(limit=1000)) == 3
    assert len(store.jobs(limit=1)) == 1


# -- the store's clock -----------------------------------------------------------------


def test_now_is_store_time(store: tenure.Store, clock: tenure.ManualClock) -> None:
    assert store.now() == clock.time()
    clock.advance(12.5)
    assert store.now() == clock.time()
    assert isinstance(store.now(), float)


def test_store_time_never_runs_backwards(
    backend: Backend,
    store: tenure.Store,
    open_store: Callable[[], tenure.Store],
    clock: tenure.ManualClock,
) -> None:
    seen = [store.now()]
    clock.jump(-3600)  # the host clock is stepped back: no write happened in between
    seen.append(store.now())
    other = open_store()
    seen.append(other.now())
    assert seen == sorted(seen), seen
    assert seen[-1] >= T0
    clock.advance(3599)
    assert store.now() >= T0
    clock.advance(2)
    if follows_boot_clock(backend):  # the step was ignored: 3601 s passed since T0
        assert store.now() == T0 + 3601
    else:  # host time passes the old high-water mark: store time moves again
        assert store.now() == T0 + 1


def test_expiry_is_frozen_while_the_host_clock_is_behind(
    backend: Backend,
    store: tenure.Store,
    open_store: Callable[[], tenure.Store],
    clock: tenure.ManualClock,
) -> None:
    store.submit("J")
    lease = store.claim("J", "A", 10)
    assert lease is not None
    assert lease.lease_until == T0 + 10
    clock.jump(-100)
    other = open_store()
    if follows_boot_clock(backend):
        # Nothing is frozen: the lease ends 10 s after its claim, as if nothing was stepped.
        # (SQLite without a boot clock freezes like the others: tests/sqlite/test_clock.py.)
        clock.advance(9.5)
        assert other.claim("J", "B", 10) is None
        assert store.renew(lease, 5).lease_until == T0 + 9.5 + 5
        clock.advance(5)
        lease_b = other.claim("J", "B", 10)
        assert lease_b is not None
        assert lease_b.generation == 2
        return
    for step in (0, 50, 49, 10, 0.5):  # host time: T0-100, -50, -1, +9, +9.5
        clock.advance(step)
        assert store.now() >= T0
        assert other.claim("J", "B", 10) is None, f"expired early at host {clock.time()}"
        assert other.claim_next("B", 10) is None
    # The holder still holds it and can renew; the renewal starts from store time.
    renewed = store.renew(lease, 5)
    assert renewed.lease_until == T0 + 9.5 + 5
    clock.advance(4.5)  # host T0+14: store time T0+14, lease ends at T0+14.5
    assert other.claim("J", "B", 10) is None
    clock.advance(0.5)
    lease_b = other.claim("J", "B", 10)
    assert lease_b is not None
    assert lease_b.generation == 2
    with pytest.raises(tenure.LeaseLost):
        store.complete(renewed)


def test_time_floor_is_shared_by_every_client(
    store: tenure.Store, open_store: Callable[[], tenure.Store], clock: tenure.ManualClock
) -> None:
    store.submit("J")
    clock.advance(100)
    lease = store.claim("J", "A", 10)  # a write at T0+100
    assert lease is not None
    clock.jump(-1000)
    late = open_store()  # a client that never saw T0+100
    assert late.now() >= T0 + 100
    assert late.claim("J", "B", 10) is None
    assert late.get("J").as_of >= T0 + 100
    assert not late.get("J").lease_expired


def test_snapshot_helper_sees_everything(store: tenure.Store) -> None:
    for i in range(5):
        store.submit(f"j{i}", i)
    assert [view["payload"] for view in snapshot(store)] == [0, 1, 2, 3, 4]
