"""The names the design contract (docs/design.md §7) fixes for job control, on every store:
`pause(queue)` / `resume(queue)`, `jobs(..., after=cursor)` and `wait(job_id, *,
timeout=None)`, no limit by default. The store had other names first (`pause_queue`,
`resume_queue`, `cursor=`), still accepted; each test here fails on a store without the
contract's name."""

from __future__ import annotations

import threading

import pytest

import tenure
import tenure.aio


def test_pause_and_resume_are_the_contract_names_of_pause_queue_and_resume_queue(
    store: tenure.Store,
) -> None:
    store.submit("A1", queue="a")
    store.pause("a")
    assert store.paused_queues() == ["a"]
    assert store.claim_next("W", 30, queues=["a"]) is None
    store.resume("a")
    assert store.paused_queues() == []
    # The earlier names are the same methods, not copies that could drift apart.
    assert tenure.Store.pause_queue is tenure.Store.pause
    assert tenure.Store.resume_queue is tenure.Store.resume
    lease = store.claim_next("W", 30, queues=["a"])
    assert lease is not None
    assert lease.job_id == "A1"


def test_jobs_pages_with_after(store: tenure.Store) -> None:
    store.submit_many([{"job_id": f"j{n}"} for n in range(5)])
    first = store.jobs(limit=2)
    second = store.jobs(limit=2, after=first.next_cursor)
    third = store.jobs(limit=2, after=second.next_cursor)
    assert [[job.job_id for job in page] for page in (first, second, third)] == [
        ["j0", "j1"],
        ["j2", "j3"],
        ["j4"],
    ]
    assert third.next_cursor is None
    # ``cursor``, the earlier name, is the same position.
    assert [job.job_id for job in store.jobs(limit=2, cursor=first.next_cursor)] == ["j2", "j3"]


@pytest.mark.parametrize("bad", ["x", "-1", "1.5", 7, "9" * 20])
def test_a_bad_after_is_refused_naming_after(store: tenure.Store, bad: object) -> None:
    with pytest.raises(tenure.InvalidArgument) as raised:
        store.jobs(after=bad)  # type: ignore[arg-type]
    assert raised.value.argument == "after"


def test_after_and_cursor_together_are_refused(store: tenure.Store) -> None:
    store.submit_many([{"job_id": f"j{n}"} for n in range(3)])
    position = store.jobs(limit=1).next_cursor
    with pytest.raises(tenure.InvalidArgument) as raised:
        store.jobs(after=position, cursor=position)
    assert raised.value.argument == "after"
    assert "not both" in raised.value.rule


def test_wait_has_no_limit_by_default(open_store: object, store: tenure.Store) -> None:
    # The contract's ``timeout=None``: a wait that outlasts the old 60 s default would
    # be a minute of real time; what is checked here is that no limit is the default and
    # ``None`` is taken, and that such a wait still wakes when another client ends the job.
    other = open_store()  # type: ignore[operator]
    store.submit("J")
    store.submit("K")
    lease = other.claim("J", "w", 30)
    assert lease is not None
    got: list[tenure.Job] = []
    waiting = threading.Event()

    def waiter() -> None:
        waiting.set()
        got.append(store.wait("J"))
        got.append(store.wait("J", timeout=None))

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    waiting.wait(5)
    other.complete(lease, "r")
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert [job.state for job in got] == ["done", "done"]
    assert got[0].result == "r"
    with pytest.raises(tenure.WaitTimeout):
        store.wait("K", timeout=0)  # a limit, when given, still holds


@pytest.mark.anyio
async def test_async_names(astore: tenure.aio.AsyncStore) -> None:
    await astore.submit("A1", queue="a")
    await astore.submit("A2", queue="a")
    await astore.pause("a")
    assert await astore.paused_queues() == ["a"]
    await astore.resume("a")
    assert tenure.aio.AsyncStore.pause_queue is tenure.aio.AsyncStore.pause
    page = await astore.jobs(limit=1)
    rest = await astore.jobs(limit=1, after=page.next_cursor)
    assert [job.job_id for job in rest] == ["A2"]
    lease = await astore.claim("A1", "W", 30)
    assert lease is not None
    await astore.complete(lease, "r")
    assert (await astore.wait("A1")).result == "r"
