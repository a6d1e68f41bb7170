"""Batch claims and many workers: oldest first across queues, one statement for a batch,
jobs buried on the way do not shorten it, and concurrent workers never get the same job."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import tenure
from tenure.stores.postgres._common import render
from tests.backends import POSTGRES_URL
from tests.postgres._support import wait_for_a_row_lock


def test_batch_is_oldest_first_across_queues(real_store: tenure.Store) -> None:
    for i in range(6):
        real_store.submit(f"j{i}", queue="a" if i % 2 else "b")
    leases = real_store.claim_many("A", 30, 4, queues=("a", "b"))
    assert [lease.job_id for lease in leases] == ["j0", "j1", "j2", "j3"]
    assert len({lease.secret for lease in leases}) == 4
    assert all(lease.generation == 1 for lease in leases)
    rest = real_store.claim_many("A", 30, 10, queues=("b", "a"))
    assert [lease.job_id for lease in rest] == ["j4", "j5"]


def test_a_batch_is_one_statement(
    real_store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(120):
        real_store.submit(f"j{i}")
    driver: Any = real_store._driver
    calls: Counter[str] = Counter()
    original = driver._rows

    def counting(operation: str, *args: Any) -> Any:
        calls[operation] += 1
        return original(operation, *args)

    monkeypatch.setattr(driver, "_rows", counting)
    assert len(real_store.claim_many("A", 30, 100)) == 100
    assert calls == Counter({"claim_next": 1})


def test_jobs_buried_on_the_way_do_not_shorten_a_batch(real_store: tenure.Store) -> None:
    for i in range(3):
        real_store.submit(f"poison{i}", max_attempts=1)
    assert len(real_store.claim_many("A", 0.2, 3)) == 3  # the poison jobs' only attempts
    time.sleep(0.25)
    for i in range(3):
        real_store.submit(f"good{i}")  # due after the expired poison leases: picked after them
    leases = real_store.claim_many("B", 30, 3)
    assert sorted(lease.job_id for lease in leases) == ["good0", "good1", "good2"]
    for i in range(3):
        job = real_store.get(f"poison{i}")
        assert (job.state, job.error) == ("dead", "lease expired during the last allowed attempt")


@pytest.mark.races
def test_concurrent_batch_workers_never_share_a_job(
    open_real_store: Callable[..., tenure.Store], admin: Any, schema: str
) -> None:
    open_real_store()  # creates the schema
    admin.execute(
        render(
            "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
            "max_attempts, created_at, updated_at) "
            "SELECT 'j' || g, 'default', 'ready', g, 5, 0, 0 FROM generate_series(1, 1200) g",
            schema,
        ).encode()
    )
    taken: list[tuple[str, int]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        store = open_real_store()
        try:
            while leases := store.claim_many(f"w{index}", 30, 1 + index % 7):
                with lock:
                    taken.extend((lease.job_id, lease.generation) for lease in leases)
                for lease in leases[::2]:
                    store.complete(lease)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    ids = [job_id for job_id, _ in taken]
    assert len(ids) == 1200
    assert len(set(ids)) == 1200
    assert {generation for _, generation in taken} == {1}


def test_a_job_changed_while_the_claim_waited_is_still_claimed(
    real_store: tenure.Store, schema: str, admin: Any, app_name: str
) -> None:
    """A claim's pick locks a job that another writer changed after the claim's snapshot,
    still claimable as it is now: the claim's update, which reaches rows by the address
    its snapshot saw, cannot take that version, so the claim runs again and takes it (a
    claim that came back empty here would leave a worker idle with a job ready). The window
    is held open by a queue limit: the claim takes its snapshot, then waits for the queue's
    row, which another transaction has locked, while the job is changed."""
    real_store.set_queue_limit("q", 5)
    real_store.submit("job", queue="q")
    claimed: list[tenure.Lease | None] = []
    with psycopg.connect(POSTGRES_URL) as blocker:  # one transaction until commit()
        blocker.execute(
            render("SELECT FROM {schema}.tenure_queues WHERE queue = 'q' FOR UPDATE", schema)
        )
        thread = threading.Thread(
            target=lambda: claimed.append(real_store.claim_next("A", 30, queues=["q"]))
        )
        thread.start()
        wait_for_a_row_lock(admin, app_name, "claim_next")
        admin.execute(  # committed after the claim's snapshot; the job stays ready
            render(
                "UPDATE {schema}.tenure_jobs SET payload = '\"new\"' WHERE job_id = 'job'", schema
            )
        )
        blocker.commit()
    thread.join(10)
    (lease,) = claimed
    assert lease is not None
    assert (lease.job_id, lease.generation) == ("job", 1)
    assert real_store.get("job").payload == "new"
