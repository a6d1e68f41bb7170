"""Issue #17, the enqueue-and-wait half, on every backend: submit_many, wait, and jobs()
in pages with a cursor."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

import tenure
import tenure.aio
from tests.conformance._support import job_view


def test_submit_many_answers_each_job_in_input_order(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("old", {"v": 0}, queue="q0")
    answers = store.submit_many(
        [
            tenure.JobSpec("a", {"v": 1}),
            {"job_id": "old", "payload": {"v": 9}, "queue": "elsewhere"},
            {"job_id": "b", "queue": "mail", "delay": 30, "max_attempts": 2},
            tenure.JobSpec("c", delay=timedelta(seconds=5)),
        ]
    )
    assert [(j.job_id, j.created) for j in answers] == [
        ("a", True),
        ("old", False),
        ("b", True),
        ("c", True),
    ]
    # The existing job is left as it was, and answered as it is.
    assert (answers[1].payload, answers[1].queue) == ({"v": 0}, "q0")
    assert job_view(answers[1]) == job_view(store.get("old"))
    b = store.get("b")
    assert (b.queue, b.max_attempts, b.available_at) == ("mail", 2, clock.time() + 30)
    assert store.get("c").available_at == clock.time() + 5
    assert (answers[0].payload, answers[0].max_attempts, answers[0].queue) == (
        {"v": 1},
        5,
        "default",
    )
    for job in answers:
        assert job_view(job) == job_view(store.get(job.job_id))
    assert store.submit_many([]) == []


def test_submit_many_is_submit_in_a_batch(
    open_store: object, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    # The same arguments give the same job as submit's, field for field.
    one = store.submit("s", {"k": [1, 2]}, queue="q", delay=7, max_attempts=3)
    (many,) = store.submit_many([tenure.JobSpec("m", {"k": [1, 2]}, "q", 7, 3)])
    expected = {**job_view(one), "job_id": "m"}
    assert job_view(many) == expected


def test_submit_many_answers_new_jobs_as_stored(store: tenure.Store) -> None:
    # Redis answers a new job without reading it back (the client builds its row): every
    # field, a fractional delay's time to the bit, priority, timeout and key included. The
    # jobs with only an id, a payload or a queue (the store's and the script's shortcut for
    # defaults) sit between others, so each one's queue, priority and delay differ from
    # the previous job's (what submit_many.lua makes once for a run of equal ones).
    answers = store.submit_many(
        [
            {"job_id": "f", "payload": [1.5, "é"], "delay": 0.1, "priority": -3, "timeout": 2.5},
            {"job_id": "b", "payload": {"x": None}},
            {"job_id": "k", "unique_key": "key", "unique_for": 60, "delay": 1 / 3},
            {"job_id": "k2", "unique_key": "key"},  # the key taken by "k", in this batch
            {"job_id": "b2", "queue": "other"},
            {"job_id": "p", "queue": "other", "max_attempts": 7, "priority": 9},
            {"job_id": "b3", "payload": 0, "queue": "default"},
        ]
    )
    assert [(j.job_id, j.created) for j in answers] == [
        ("f", True),
        ("b", True),
        ("k", True),
        ("k", False),
        ("b2", True),
        ("p", True),
        ("b3", True),
    ]
    assert [(j.queue, j.priority, j.max_attempts) for j in answers[4:]] == [
        ("other", 0, 5),
        ("other", 9, 7),
        ("default", 0, 5),
    ]
    for job in answers:
        assert job_view(job) == job_view(store.get(job.job_id))
    # Each in its queue's candidates at its priority: claims find each where it belongs.
    assert [lease.job_id for lease in store.claim_many("w", 30, 5, queues=["other"])] == [
        "p",
        "b2",
    ]
    assert [lease.job_id for lease in store.claim_many("w", 30, 2)] == ["b", "b3"]


def test_submit_many_without_keys_answers_new_jobs_as_stored(store: tenure.Store) -> None:
    # A batch with no unique key takes the stores' shortcut (SQLite and Redis build a new
    # job's row from its submission instead of reading it back): every field as stored, to
    # the bit and the type (a whole-number timeout is stored as a REAL), an existing job as
    # it is, in input order.
    store.submit("old", {"v": 1}, queue="q0", priority=4)
    answers = store.submit_many(
        [
            {"job_id": "a", "payload": [1.5, "é"], "delay": 1 / 3, "priority": -3, "timeout": 2},
            {"job_id": "old", "payload": {"v": 2}},
            {"job_id": "b", "queue": "other", "max_attempts": 7, "headers": {"h": "v"}},
            {"job_id": "c", "delay": timedelta(seconds=0.1), "timeout": 2.5},
        ]
    )
    assert [(j.job_id, j.created) for j in answers] == [
        ("a", True),
        ("old", False),
        ("b", True),
        ("c", True),
    ]
    assert answers[1].payload == {"v": 1}  # the existing job, unchanged
    for job in answers:
        stored = store.get(job.job_id)
        assert job_view(job) == job_view(stored)
        assert type(job.timeout) is type(stored.timeout)
        assert job.available_at == stored.available_at


def test_a_batch_keeps_its_order_for_claims(store: tenure.Store) -> None:
    ids = [f"j{n:03d}" for n in range(150)]
    store.submit_many([{"job_id": job_id} for job_id in reversed(ids)])
    claimed = [lease.job_id for lease in store.claim_many("w", 30, 150)]
    assert claimed == list(reversed(ids))


def test_submit_many_again_creates_nothing(store: tenure.Store) -> None:
    batch = [tenure.JobSpec(f"j{n}", n) for n in range(20)]
    first = store.submit_many(batch)
    again = store.submit_many(batch)
    assert all(job.created for job in first)
    assert not any(job.created for job in again)
    assert [job_view(a) for a in again] == [job_view(f) for f in first]
    assert len(store.jobs(limit=1000)) == 20


def test_wait_returns_a_finished_job_at_once(store: tenure.Store) -> None:
    store.submit_many([{"job_id": "done"}, {"job_id": "dead", "max_attempts": 1}])
    lease = store.claim("done", "w", 10)
    assert lease is not None
    store.complete(lease, {"ok": True})
    lease = store.claim("dead", "w", 10)
    assert lease is not None
    store.fail(lease, "boom")
    done = store.wait("done", timeout=0)
    assert (done.state, done.result) == ("done", {"ok": True})
    dead = store.wait("dead", timeout=0)
    assert (dead.state, dead.error) == ("dead", "boom")


def test_wait_times_out_with_the_job_as_it_was(store: tenure.Store) -> None:
    store.submit("J", {"n": 1})
    with pytest.raises(tenure.WaitTimeout) as caught:
        store.wait("J", timeout=0.2)
    assert caught.value.job_id == "J"
    assert caught.value.state == "ready"
    assert caught.value.job is not None
    assert caught.value.job.payload == {"n": 1}
    assert isinstance(caught.value, TimeoutError)
    assert "'J' was still ready" in str(caught.value)
    with pytest.raises(tenure.JobNotFound):
        store.wait("missing", timeout=1)


@pytest.mark.parametrize("ending", ["complete", "fail"])
def test_wait_wakes_when_another_client_finishes_the_job(
    open_store: object, store: tenure.Store, ending: str
) -> None:
    other = open_store()  # type: ignore[operator]
    store.submit("J", max_attempts=1)
    lease = other.claim("J", "w", 30)
    assert lease is not None
    waiting = threading.Event()
    got: list[tenure.Job] = []

    def waiter() -> None:
        waiting.set()
        got.append(store.wait("J", timeout=20))

    thread = threading.Thread(target=waiter)
    thread.start()
    waiting.wait(5)
    if ending == "complete":
        other.complete(lease, "r")
    else:
        other.fail(lease, "e")
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert got
    assert got[0].state == ("done" if ending == "complete" else "dead")


def _wait_beside(
    waiter: tenure.Store, timeout: float, beside: Callable[[threading.Event], object]
) -> float:
    """How long ``waiter.wait_for_jobs`` on queue "q" lasts while ``beside(over)`` runs on a
    thread (``over`` is set once the wait has returned)."""
    waiter.wait_for_jobs(queues=["q"], timeout=0.01)  # (a listener opened, on some stores)
    over = threading.Event()
    thread = threading.Thread(target=beside, args=(over,))
    started = time.monotonic()
    thread.start()
    try:
        waiter.wait_for_jobs(queues=["q"], timeout=timeout)
        return time.monotonic() - started
    finally:
        over.set()
        thread.join()


@pytest.mark.parametrize("through", ["the same store", "another client"])
def test_wait_for_jobs_wakes_when_a_job_is_submitted(
    open_real_store: Callable[[], tenure.Store], through: str
) -> None:
    # A worker's idle wait, a lock's waiter: woken by a submit (or a release) through the
    # store it waits on as well as through another client. SQLite's change counter moves
    # only for other connections' commits, and a submit through the same store woke its
    # waiter at the wait's timeout.
    waiter = open_real_store()
    submitter = waiter if through == "the same store" else open_real_store()

    def submit_soon(over: threading.Event) -> None:
        if not over.wait(0.2):
            submitter.submit("J", queue="q")

    assert _wait_beside(waiter, 5, submit_soon) < 2
    assert waiter.get("J").state == "ready"


def test_wait_for_jobs_sleeps_through_claims_that_take_nothing_and_renewals(
    open_real_store: Callable[[], tenure.Store],
) -> None:
    # Idle workers ask for jobs and renew what they hold: none of that makes a job
    # claimable, so a waiter sleeps on. (On SQLite every write moves the file's change
    # counter; waiters that woke for each one woke each other's claims in turn, an idle
    # fleet writing to the file about 50 times a second each.)
    waiter, other = open_real_store(), open_real_store()
    other.submit("held", queue="q")
    lease = other.claim("held", "w", 30)
    assert lease is not None

    def idle_worker(over: threading.Event) -> None:
        held = lease
        while not over.wait(0.01):
            assert other.claim_next("w2", 30, queues=["q"]) is None
            held = other.renew(held, 30)

    assert _wait_beside(waiter, 1.0, idle_worker) >= 0.9


def _all_pages(store: tenure.Store, **filters: object) -> list[tenure.JobPage]:
    pages = [store.jobs(**filters)]  # type: ignore[arg-type]
    while pages[-1].next_cursor is not None:
        pages.append(store.jobs(**filters, cursor=pages[-1].next_cursor))  # type: ignore[arg-type]
    return pages


def test_jobs_pages_through_everything_once_in_order(store: tenure.Store) -> None:
    ids = [f"j{n:04d}" for n in range(1205)]
    for start in range(0, len(ids), 1000):
        store.submit_many([{"job_id": i} for i in ids[start : start + 1000]])
    pages = _all_pages(store, limit=500)
    assert [len(page) for page in pages] == [500, 500, 205]
    assert [job.job_id for page in pages for job in page] == ids
    assert pages[-1].next_cursor is None
    # A page that ends exactly at the last job says so: no empty page after it.
    exact = store.jobs(limit=5, cursor=pages[1].next_cursor)
    assert exact.next_cursor is not None
    tail = _all_pages(store, limit=205, cursor=pages[1].next_cursor)
    assert [len(page) for page in tail] == [205]
    assert isinstance(pages[0], list)


def test_jobs_filters_by_queue_state_owner_and_age(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit_many([{"job_id": f"old{n}", "queue": "a" if n % 2 else "b"} for n in range(6)])
    clock.advance(100)
    store.submit_many([{"job_id": f"new{n}", "queue": "a"} for n in range(4)])
    for job_id, owner in (("old1", "w1"), ("old3", "w2"), ("new0", "w1")):
        lease = store.claim(job_id, owner, 30)
        assert lease is not None

    def ids(**filters: object) -> list[str]:
        return [job.job_id for page in _all_pages(store, limit=2, **filters) for job in page]

    assert ids(queue="b") == ["old0", "old2", "old4"]
    assert ids(state="leased") == ["old1", "old3", "new0"]
    assert ids(owner="w1") == ["old1", "new0"]
    assert ids(owner="w1", queue="a", state="leased") == ["old1", "new0"]
    assert ids(older_than=50) == [f"old{n}" for n in range(6)]
    assert ids(older_than=50, queue="a", state="ready") == ["old5"]
    assert ids(owner="nobody") == []
    assert store.jobs(owner="nobody").next_cursor is None


@pytest.mark.anyio
async def test_async_submit_many_wait_and_pages(astore: tenure.aio.AsyncStore) -> None:
    answers = await astore.submit_many([{"job_id": "a"}, tenure.JobSpec("b", 2)])
    assert [(j.job_id, j.created) for j in answers] == [("a", True), ("b", True)]
    lease = await astore.claim("b", "w", 10)
    assert lease is not None
    await astore.complete(lease, "r")
    assert (await astore.wait("b", timeout=1)).result == "r"
    with pytest.raises(tenure.WaitTimeout):
        await astore.wait("a", timeout=0.1)
    page = await astore.jobs(limit=1)
    assert [job.job_id for job in page] == ["a"]
    rest = await astore.jobs(limit=1, cursor=page.next_cursor)
    assert [job.job_id for job in rest] == ["b"]
    assert rest.next_cursor is None


def test_several_waiters_of_one_job_all_wake(
    open_real_store: Callable[..., tenure.Store], real_store: tenure.Store
) -> None:
    real_store.submit("J")
    waiters = [open_real_store() for _ in range(3)]
    got: list[str] = []
    threads = [
        threading.Thread(target=lambda s=s: got.append(s.wait("J", timeout=20).state))
        for s in waiters
    ]
    for thread in threads:
        thread.start()
    lease = real_store.claim("J", "w", 30)
    assert lease is not None
    time.sleep(0.3)  # not for correctness: most likely all three are blocked by now
    started = time.monotonic()
    real_store.complete(lease, "r")
    for thread in threads:
        thread.join(timeout=20)
    assert got == ["done"] * 3
    # Woken, not timed out: each waiter's blocking read lasts 2.5 s on Redis, so all three
    # back within 2 s means the wake-up was handed on from one to the next.
    assert time.monotonic() - started < 2
