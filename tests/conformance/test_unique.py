"""Unique jobs in a window on every store (issue #18): a submit with the ``unique_key`` of a
job that still holds it creates nothing and answers that job (``created=False``); a job
holds its key while unfinished and for its own ``unique_for`` after it finishes (store
time); delete and purge free the key; a requeued job holds it again unless another job
took it meanwhile; submit_many takes keys in input order; bad input changes nothing."""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import tenure
import tenure.aio
from tests.backends import POSTGRES_URL, Backend, sqlite_path
from tests.conformance._support import check_one_job_per_key, snapshot


def _missing(store: tenure.Store, job_id: str) -> bool:
    try:
        store.get(job_id)
    except tenure.JobNotFound:
        return True
    return False


def test_a_second_submit_of_a_held_key_answers_the_holder(store: tenure.Store) -> None:
    first = store.submit("a", {"n": 1}, unique_key="report:42")
    second = store.submit("b", {"n": 2}, unique_key="report:42")
    assert first.created is True
    assert first.unique_key == "report:42"
    assert second.created is False
    assert second.job_id == "a"
    assert second.payload == {"n": 1}
    assert _missing(store, "b")
    assert store.get("a").unique_key == "report:42"
    assert store.get("a").to_dict()["unique_key"] == "report:42"
    # Other keys, and jobs without a key, are not affected.
    assert store.submit("c", unique_key="report:43").created is True
    plain = store.submit("d")
    assert plain.created is True
    assert plain.unique_key is None


def test_a_unique_job_keeps_its_priority_and_timeout_and_is_claimed_by_them(
    store: tenure.Store,
) -> None:
    # The keyed submit paths are their own statements: they must store every option.
    low = store.submit("low", unique_key="lk", priority=-5, timeout=7.5)
    [high, repeat] = store.submit_many(
        [
            {"job_id": "high", "unique_key": "hk", "priority": 9, "timeout": 2.0},
            {"job_id": "again", "unique_key": "hk", "priority": 50},
        ]
    )
    plain = store.submit("plain", priority=3)
    assert (low.priority, low.timeout, low.unique_key) == (-5, 7.5, "lk")
    assert (high.priority, high.timeout, high.unique_key) == (9, 2.0, "hk")
    assert (repeat.job_id, repeat.created, repeat.priority) == ("high", False, 9)
    assert (plain.priority, plain.timeout, plain.unique_key) == (3, None, None)
    order = [store.claim_next("w", ttl=30) for _ in range(3)]
    assert [lease.job_id for lease in order if lease] == ["high", "plain", "low"]
    assert store.get("low").unique_key == "lk"


def test_an_existing_job_id_is_answered_before_the_key(store: tenure.Store) -> None:
    store.submit("a", unique_key="k1")
    store.submit("b")
    again = store.submit("b", unique_key="k1")
    assert (again.job_id, again.created, again.unique_key) == ("b", False, None)
    same = store.submit("a", unique_key="k2")
    assert (same.job_id, same.created, same.unique_key) == ("a", False, "k1")
    assert store.submit("c", unique_key="k2").created is True  # k2 was never taken by "a"


def test_leased_and_scheduled_jobs_hold_their_key(store: tenure.Store) -> None:
    store.submit("later", unique_key="s", delay=3600)
    assert store.submit("other", unique_key="s").job_id == "later"
    store.submit("a", unique_key="k")
    assert store.claim("a", "W", 30) is not None
    assert store.submit("b", unique_key="k").job_id == "a"


def test_without_a_window_the_key_is_free_once_the_job_finishes(store: tenure.Store) -> None:
    store.submit("a", unique_key="k")
    lease = store.claim("a", "W", 30)
    assert lease is not None
    store.complete(lease, "ok")
    b = store.submit("b", unique_key="k")
    assert (b.job_id, b.created) == ("b", True)
    assert store.get("a").unique_key == "k"  # kept on the finished job's snapshot
    assert store.submit("c", unique_key="k").job_id == "b"


def test_the_window_runs_from_the_end_of_the_job_by_store_time(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("a", unique_key="k", unique_for=timedelta(minutes=1))
    clock.advance(600)  # unfinished: held however long it waits
    assert store.submit("b", unique_key="k").job_id == "a"
    lease = store.claim("a", "W", 30)
    assert lease is not None
    store.complete(lease)
    clock.advance(59)
    assert store.submit("b", unique_key="k").job_id == "a"
    clock.advance(1.5)
    b = store.submit("b", unique_key="k", unique_for=10)
    assert (b.job_id, b.created) == ("b", True)
    # The new holder's own window counts now, not the first job's.
    store.cancel("b")
    clock.advance(9)
    assert store.submit("c", unique_key="k").job_id == "b"
    clock.advance(1.5)
    assert store.submit("c", unique_key="k").created is True


def test_cancel_and_death_finish_the_job_and_start_its_window(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("a", unique_key="k", unique_for=5, max_attempts=1)
    clock.advance(100)
    store.cancel("a")
    assert store.submit("b", unique_key="k").job_id == "a"
    clock.advance(5.5)
    assert store.submit("b", unique_key="k", max_attempts=1).created is True
    lease = store.claim("b", "W", 30)
    assert lease is not None
    store.fail(lease, "boom")
    assert store.get("b").state == "dead"
    assert store.submit("c", unique_key="k").created is True  # b had no window


def test_delete_and_purge_free_the_key(store: tenure.Store, clock: tenure.ManualClock) -> None:
    store.submit("a", unique_key="k", unique_for=3600)
    store.cancel("a")
    assert store.submit("b", unique_key="k").job_id == "a"
    store.delete("a")
    assert store.submit("b", unique_key="k", unique_for=3600).created is True
    store.cancel("b")
    clock.advance(10)
    assert store.purge(older_than=5) == 1
    assert store.submit("c", unique_key="k").created is True
    # A deleted holder's id submitted again without the key holds nothing.
    store.cancel("c")
    store.delete("c")
    store.submit("c")
    assert store.submit("d", unique_key="k").created is True


def test_a_requeued_job_holds_its_key_again_unless_another_took_it(
    store: tenure.Store,
) -> None:
    store.submit("a", unique_key="k")
    store.cancel("a")
    store.requeue("a")  # nobody took k meanwhile: a holds it again
    assert store.submit("b", unique_key="k").job_id == "a"
    store.cancel("a")
    assert store.submit("b", unique_key="k").created is True  # b takes k over
    store.requeue("a")  # runs again, but k is b's now
    assert store.submit("c", unique_key="k").job_id == "b"
    store.cancel("b")
    assert store.submit("c", unique_key="k").created is True  # a does not hold k


def test_submit_many_takes_keys_in_input_order(store: tenure.Store) -> None:
    store.submit("held", unique_key="k0")
    jobs = store.submit_many(
        [
            {"job_id": "a", "unique_key": "k1"},
            {"job_id": "b", "unique_key": "k1", "payload": "dropped"},
            tenure.JobSpec("c"),
            tenure.JobSpec("d", unique_key="k0"),
            tenure.JobSpec("e", unique_key="k2", unique_for=60),
            {"job_id": "held", "unique_key": "k3"},
        ]
    )
    assert [(j.job_id, j.created) for j in jobs] == [
        ("a", True),
        ("a", False),
        ("c", True),
        ("held", False),
        ("e", True),
        ("held", False),
    ]
    assert [j.unique_key for j in jobs] == ["k1", "k1", None, "k0", "k2", "k0"]
    assert _missing(store, "b")
    assert _missing(store, "d")
    # Across batches: the keys taken by the first are held against the second.
    again = store.submit_many([{"job_id": "f", "unique_key": "k2"}, {"job_id": "g"}])
    assert [(j.job_id, j.created) for j in again] == [("e", False), ("g", True)]
    # Submission order follows the batch: the created ones are claimed in input order.
    claimed = [lease.job_id for lease in store.claim_many("W", 30, 10)]
    assert claimed == ["held", "a", "c", "e", "g"]


@pytest.mark.anyio
async def test_async_submit_with_a_key(astore: tenure.aio.AsyncStore) -> None:
    first = await astore.submit("a", unique_key="k", unique_for=1.5)
    second = await astore.submit("b", unique_key="k")
    batch = await astore.submit_many([{"job_id": "c", "unique_key": "k"}])
    assert (first.created, second.job_id, second.created) == (True, "a", False)
    assert [(j.job_id, j.created) for j in batch] == [("a", False)]


# -- bad input ---------------------------------------------------------------------------

BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"unique_for": 10}, "unique_for", "needs a unique_key"),
    ({"unique_key": ""}, "unique_key", "must not be empty"),
    ({"unique_key": 42}, "unique_key", "must be a str"),
    ({"unique_key": "a\nb"}, "unique_key", "control characters"),
    ({"unique_key": "x" * 256}, "unique_key", "at most 255"),
    ({"unique_key": "k", "unique_for": 0}, "unique_for", "above 0 seconds"),
    ({"unique_key": "k", "unique_for": -1.0}, "unique_for", "above 0 seconds"),
    ({"unique_key": "k", "unique_for": timedelta(0)}, "unique_for", "above 0 seconds"),
    ({"unique_key": "k", "unique_for": 400 * 86400}, "unique_for", "at most 366 days"),
    ({"unique_key": "k", "unique_for": float("nan")}, "unique_for", "finite"),
    ({"unique_key": "k", "unique_for": True}, "unique_for", "must be a number"),
    ({"unique_key": "k", "unique_for": "60"}, "unique_for", "must be a number"),
]


def test_bad_unique_arguments_are_refused_and_change_nothing(store: tenure.Store) -> None:
    store.submit("held", unique_key="k")
    before = snapshot(store)
    for options, argument, rule in BAD:  # one store for all: each case is a refusal
        with pytest.raises(tenure.InvalidArgument) as raised:
            store.submit("n", **options)
        assert raised.value.argument == argument, options
        assert rule in str(raised.value), (options, str(raised.value))
        with pytest.raises(tenure.InvalidArgument) as raised:
            store.submit_many([{"job_id": "m"}, {"job_id": "n", **options}])
        assert raised.value.argument == f"jobs[1].{argument}", options
        assert rule in str(raised.value), options
    assert snapshot(store) == before


# -- the caller's transaction (SQL stores) -------------------------------------------------


def _own_connection(backend: Backend, url: str) -> Any:
    if backend.name == "sqlite":
        return sqlite3.connect(sqlite_path(url), timeout=10)
    return psycopg.connect(POSTGRES_URL)


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_a_key_taken_in_your_transaction_is_held_iff_it_commits(
    backend: Backend, url: str, real_store: tenure.Store, outcome: str
) -> None:
    if backend.name == "redis":  # no transaction to share: refused, nothing taken
        with pytest.raises(tenure.InvalidArgument) as refused:
            real_store.submit("a", unique_key="k", conn=object())
        assert refused.value.argument == "conn"
        assert real_store.submit("d", unique_key="k").created is True
        return
    conn = _own_connection(backend, url)
    try:
        job = real_store.submit("a", unique_key="k", conn=conn)
        batch = real_store.submit_many(
            [{"job_id": "b", "unique_key": "k"}, {"job_id": "c", "unique_key": "k2"}], conn=conn
        )
        assert job.created is True
        assert [(j.job_id, j.created) for j in batch] == [("a", False), ("c", True)]
        if outcome == "commit":
            conn.commit()
        else:
            conn.rollback()
    finally:
        conn.close()
    d = real_store.submit("d", unique_key="k")
    assert (d.job_id, d.created) == (("a", False) if outcome == "commit" else ("d", True))


# -- races -------------------------------------------------------------------------------


@pytest.mark.races
def test_threads_racing_for_keys_create_one_job_per_key(
    open_real_store: Any,
) -> None:
    threads, keys = 6, 8
    stores = [open_real_store() for _ in range(threads)]
    barrier = threading.Barrier(threads)
    answers: list[list[tenure.Job]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            for k in range(keys):
                if k % 2:
                    answers[n].append(stores[n].submit(f"t{n}-k{k}", unique_key=f"k{k}"))
                else:
                    (job,) = stores[n].submit_many(
                        [{"job_id": f"t{n}-k{k}", "unique_key": f"k{k}"}]
                    )
                    answers[n].append(job)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not errors, errors
    check_one_job_per_key(stores[0], [a for answer in answers for a in answer], keys)
