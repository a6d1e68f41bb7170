"""Workers claim, renew and complete while their server connections are being killed
(pg_terminate_backend, several times a second): no job is lost, no stale completion is
accepted, no generation is handed to two owners, and the pools recover by themselves."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import tenure
from tenure.stores.postgres._common import render
from tests.postgres._support import backends_of, terminate

pytestmark = [pytest.mark.slow, pytest.mark.races]

JOBS = 400
WORKERS = 4
KILL_FOR = 2.0


class Counting:
    """Wraps a real driver to count the StoreUnavailable errors the store then retried."""

    def __init__(self, driver: Any, counter: Counter[str]) -> None:
        self._driver = driver
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._driver, name)
        if name not in ("claim_next", "renew", "complete"):
            return attr

        def call(*args: Any) -> Any:
            try:
                return attr(*args)
            except tenure.StoreUnavailable as exc:
                unknown = "outcome unknown" if exc.outcome_unknown else "not applied"
                self._counter[f"driver {name}: {unknown}"] += 1
                raise

        return call


def test_connection_kills_lose_nothing_and_accept_nothing_stale(
    open_real_store: Callable[..., tenure.Store], admin: Any, schema: str, app_name: str
) -> None:
    open_real_store()
    admin.execute(
        render(
            "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
            "max_attempts, created_at, updated_at) "
            "SELECT 'j' || g, 'default', 'ready', g, 1000, 0, 0 FROM generate_series(1, %s) g",
            schema,
        ).encode(),
        (JOBS,),
    )
    lock = threading.Lock()
    claims: list[tuple[str, int, str]] = []  # (job, generation, owner) of claims that returned
    accepted: list[tuple[str, int, str]] = []  # completions that returned success
    attempted: dict[str, set[str]] = {}  # job -> results of completions with unknown outcome
    errors: Counter[str] = Counter()
    stop = threading.Event()

    def worker(owner: str, store: tenure.Store) -> None:
        store._driver = Counting(store._driver, errors)  # sees what the store's retries hide
        rng = random.Random(owner)
        while not stop.is_set():
            try:
                leases = store.claim_many(owner, 0.5, rng.randint(1, 3))
            except tenure.StoreUnavailable:
                errors["claim unavailable"] += 1
                continue
            with lock:
                claims.extend((lease.job_id, lease.generation, owner) for lease in leases)
            if not leases:
                try:
                    store.wait_for_jobs(timeout=0.1)
                except tenure.StoreUnavailable:
                    errors["wait unavailable"] += 1
                continue
            for lease in leases:
                result = f"{owner}:{lease.generation}"
                try:
                    time.sleep(rng.uniform(0.005, 0.03))  # the work
                    if rng.random() < 0.5:
                        lease = store.renew(lease)
                    store.complete(lease, result)
                except tenure.LeaseLost:
                    errors["lease lost"] += 1
                    continue
                except tenure.StoreUnavailable:
                    errors["complete unavailable"] += 1
                    with lock:
                        attempted.setdefault(lease.job_id, set()).add(result)
                    continue
                with lock:
                    accepted.append((lease.job_id, lease.generation, owner))

    def killer() -> None:
        rng = random.Random(7)
        until = time.monotonic() + KILL_FOR
        while time.monotonic() < until:
            pids = backends_of(admin, app_name)
            if pids:
                terminate(admin, [rng.choice(pids)])
                errors["kills"] += 1
            time.sleep(0.015)

    threads = [
        threading.Thread(target=worker, args=(f"w{i}", open_real_store())) for i in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    killing = threading.Thread(target=killer)
    killing.start()
    killing.join()
    watcher = open_real_store()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(job.state == "done" for job in watcher.jobs(limit=JOBS)):
            break
        time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join(30)

    assert errors["kills"] > 20, errors
    # The kills did land inside operations (the store retried renew and complete).
    assert errors["driver renew: outcome unknown"] + errors["driver complete: outcome unknown"]
    jobs = {job.job_id: job for job in watcher.jobs(limit=JOBS)}
    # I5: nothing lost.
    assert len(jobs) == JOBS
    assert all(job.state == "done" for job in jobs.values()), errors
    # I1: no (job, generation) was handed to two owners, or twice to one.
    handed = Counter((job_id, generation) for job_id, generation, _ in claims)
    assert max(handed.values()) == 1
    # I3: at most one accepted completion per job, and it is the one the job records.
    assert max(Counter(job_id for job_id, _, _ in accepted).values()) == 1
    for job_id, generation, owner in accepted:
        job = jobs[job_id]
        assert (job.generation, job.owner, job.result) == (
            generation,
            owner,
            f"{owner}:{generation}",
        )
    # Jobs whose every completion had an unknown outcome were completed by one of those.
    done_by_accepted = {job_id for job_id, _, _ in accepted}
    for job_id, job in jobs.items():
        if job_id not in done_by_accepted:
            assert job.result in attempted.get(job_id, set()), (job, errors)
