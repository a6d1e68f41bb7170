"""Races with real concurrency on every backend: OS processes and threads, real clocks.

Select them with ``-m races``; each test stays within ~20 s on two cores.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import tenure
from tests.conformance._support import json_answers

pytestmark = [pytest.mark.races, pytest.mark.slow]

WORKER = Path(__file__).with_name("_race_worker.py")
PROCESSES = 8
JOBS = 1000
THREADS = 32


def run_workers(url: str) -> list[dict[str, Any]]:
    procs = []
    for index in range(PROCESSES):
        config = {
            "url": url,
            "owner": f"proc{index}",
            "seed": index,
            "ttl": 30.0,
            "short_ttl": 0.2,
            "stall": 0.01,
            "release": 0.03,
            "fail": 0.03,
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), json.dumps(config)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    histories: list[dict[str, Any]] = json_answers(procs, "race worker")
    return histories


def test_processes_complete_every_job_exactly_once(url: str) -> None:
    with tenure.connect(url) as store:
        for index in range(JOBS):
            store.submit(f"job-{index:04d}", {"n": index}, max_attempts=100)
    histories = run_workers(url)
    with tenure.connect(url) as store:
        final = {job.job_id: job for job in store.jobs(limit=1000)}
    assert len(final) == JOBS

    events = [event for history in histories for event in history["events"]]
    claims: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_lease: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["kind"] == "claim":
            claims[event["job"]].append(event)
        else:
            by_lease[(event["job"], event["generation"])].append(event)

    completions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["kind"] == "complete" and event["ok"]:
            completions[event["job"]].append(event)

    for job_id, job in final.items():
        # I5: every job ends done; I3: exactly one completion, by the current lease.
        assert job.state == "done", job
        done = completions[job_id]
        assert len(done) == 1, (job_id, done)
        assert done[0]["generation"] == job.generation
        assert job.owner == done[0]["owner"]
        assert job.result == done[0]["owner"]
        # I1: the generations granted are 1..n, each once.
        granted = sorted(claim["generation"] for claim in claims[job_id])
        assert granted == list(range(1, job.generation + 1)), (job_id, granted)

        # I2: no two owners at once. Lease g+1 was granted only after lease g ended.
        ordered = sorted(claims[job_id], key=lambda c: c["generation"])
        for before, after in itertools.pairwise(ordered):
            ops = by_lease[(job_id, before["generation"])]
            granted_at = after["lease_until"] - after["ttl"]  # store time of the claim
            assert granted_at >= before["lease_until"] - before["ttl"] - 1e-6
            succeeded = [op for op in ops if op["ok"]]
            # Nothing the old holder did after the new lease was granted may succeed:
            # every successful request of lease g was sent before claim g+1 came back.
            for op in succeeded:
                assert op["sent"] < after["received"], (job_id, op, after)
            ended = [op for op in succeeded if op["kind"] in ("release", "fail")]
            if not ended:
                # It ended by expiry: the next claim came after its last confirmed end.
                last_until = max(
                    [before["lease_until"]]
                    + [op["lease_until"] for op in succeeded if op["kind"] == "renew"]
                )
                assert granted_at >= last_until - 1e-3, (job_id, before, after)

    # The stalled holders were all rejected; nobody else ever was.
    stalled = [e for e in events if e.get("stalled")]
    assert stalled, "the run had no stalls: the expiry path was not exercised"
    assert not any(event["ok"] for event in stalled)
    assert all("rejected" in event["error"] for event in stalled)
    assert all(event["ok"] for event in events if not event.get("stalled"))
    assert sum(1 for e in events if e["kind"] == "release") > 5
    assert max(job.generation for job in final.values()) > 1


def all_at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run every call in its own thread, released together by a barrier; the results (or
    the exceptions raised) in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            results[index] = calls[index]()
        except BaseException as exc:  # handed back to the test
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a contender hung"
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    return results


def test_threads_claiming_one_job_have_one_winner(url: str) -> None:
    rounds = 3
    with tenure.connect(url) as store:
        for round_ in range(rounds):
            store.submit(f"contested-{round_}")
    clients = [tenure.connect(url) for _ in range(THREADS)]
    try:
        for round_ in range(rounds):
            job_id = f"contested-{round_}"
            results = all_at_once(
                [
                    partial(client.claim, job_id, f"thread{index}", 30)
                    for index, client in enumerate(clients)
                ]
            )
            winners = [r for r in results if isinstance(r, tenure.Lease)]
            assert len(winners) == 1, winners
            assert results.count(None) == THREADS - 1
            job = clients[0].get(job_id)
            assert (job.state, job.generation, job.attempts) == ("leased", 1, 1)
            assert job.owner == winners[0].owner
            clients[0].complete(winners[0])  # the winner's lease is the real one
    finally:
        for client in clients:
            client.close()


def test_threads_claim_next_share_out_jobs(url: str) -> None:
    jobs = 10
    with tenure.connect(url) as store:
        for index in range(jobs):
            store.submit(f"j{index}")
    clients = [tenure.connect(url) for _ in range(THREADS)]
    try:
        results = all_at_once(
            [partial(client.claim_next, f"thread{i}", 30) for i, client in enumerate(clients)]
        )
    finally:
        for client in clients:
            client.close()
    leases = [r for r in results if isinstance(r, tenure.Lease)]
    assert sorted(lease.job_id for lease in leases) == sorted(f"j{i}" for i in range(jobs))
    assert all(lease.generation == 1 for lease in leases)
    assert results.count(None) == THREADS - jobs


@pytest.mark.parametrize("results", ["same", "different"])
def test_threads_completing_overlapping_batches_in_any_order(url: str, results: str) -> None:
    # Every thread completes the same leases, each in its own order: a store that locked
    # rows in input order could deadlock here. Exactly one completion per job takes effect.
    # With the same result per job the others are repeats of it, answered as success; with
    # each thread's own result they are not repeats, and each is refused.
    jobs = 50
    with tenure.connect(url) as store:
        for index in range(jobs):
            store.submit(f"b{index:02d}")
        leases = store.claim_many("holder", 60, jobs)
    assert len(leases) == jobs
    clients = [tenure.connect(url) for _ in range(16)]
    orders = []
    for index in range(len(clients)):
        order = list(leases)
        random.Random(index).shuffle(order)
        orders.append(order)

    def values(index: int, order: list[tenure.Lease]) -> list[object]:
        return [lease.job_id if results == "same" else index for lease in order]

    try:
        answers = all_at_once(
            [
                partial(client.complete_many, order, values(index, order))
                for index, (client, order) in enumerate(zip(clients, orders, strict=True))
            ]
        )
    finally:
        for client in clients:
            client.close()
    with tenure.connect(url) as store:
        final = store.jobs(limit=1000)
    assert len(final) == jobs
    assert all(job.state == "done" and job.generation == 1 for job in final)
    if results == "same":
        assert answers == [[]] * len(clients)
        assert all(job.result == job.job_id for job in final)
    else:
        refused = Counter(error.job_id for answer in answers for error in answer)
        assert refused == {f"b{index:02d}": len(clients) - 1 for index in range(jobs)}
        for job in final:  # the result is that of the one thread not refused for the job
            (winner,) = [
                index
                for index, answer in enumerate(answers)
                if job.job_id not in {error.job_id for error in answer}
            ]
            assert job.result == winner


def test_threads_renewing_overlapping_batches_in_any_order(url: str) -> None:
    # Every thread renews the same leases, each in its own order: a store that locked rows
    # in input order could deadlock here, and one whose batch met rows another batch had
    # changed since its snapshot must run those renewals again rather than refuse them
    # (tests/postgres/test_complete_many.py drives that case by hand). Every renewal of a
    # current lease takes effect.
    jobs = 50
    with tenure.connect(url) as store:
        store.submit_many([{"job_id": f"r{index:02d}"} for index in range(jobs)])
        leases = store.claim_many("holder", 60, jobs)
    assert len(leases) == jobs
    clients = [tenure.connect(url) for _ in range(16)]
    orders = [random.Random(index).sample(leases, jobs) for index in range(len(clients))]
    try:
        answers = all_at_once(
            [
                partial(client.renew_many, order, 120)
                for client, order in zip(clients, orders, strict=True)
            ]
        )
    finally:
        for client in clients:
            client.close()
    for order, answer in zip(orders, answers, strict=True):
        assert [(lease.job_id, lease.generation, lease.ttl) for lease in answer] == [
            (lease.job_id, 1, 120.0) for lease in order
        ]
    with tenure.connect(url) as store:
        assert {job.state for job in store.jobs(limit=1000)} == {"leased"}


def test_threads_looping_complete_and_claim_do_every_job_once(url: str) -> None:
    # Batch workers over one pool: each claims a batch, then completes it and claims the
    # next in one call, until nothing is left. No lease expires (30 s), so every job must be
    # claimed by exactly one worker, at generation 1, and completed by that worker.
    # Which worker gets how much is not promised (a fast thread may take most of the pool),
    # so the contention is made certain instead: every worker claims its first batch, then
    # all of them wait at a barrier and loop from there together.
    jobs, workers = 300, 8
    with tenure.connect(url) as store:
        for index in range(jobs):
            store.submit(f"p{index:03d}")
    clients = [tenure.connect(url) for _ in range(workers)]
    first_batches = threading.Barrier(workers)

    def work(client: tenure.Store, owner: str, limit: int) -> list[tenure.Lease]:
        taken = []
        leases = client.claim_many(owner, 30, limit)
        first_batches.wait(timeout=30)  # 8 first batches of at most 5: the pool has 300
        while leases:
            taken.extend(leases)
            results = [[owner, lease.job_id] for lease in leases]
            lost, leases = client.complete_and_claim(leases, owner, 30, limit, results=results)
            assert lost == [], lost
        return taken

    try:
        results = all_at_once(
            [
                partial(work, client, f"w{index}", 1 + index % 5)
                for index, client in enumerate(clients)
            ]
        )
    finally:
        for client in clients:
            client.close()
    taken = [lease for leases in results for lease in leases]
    claimed = sorted(lease.job_id for lease in taken)
    assert claimed == [f"p{index:03d}" for index in range(jobs)]  # each once, none lost
    assert all(lease.generation == 1 for lease in taken)
    # Every worker held jobs while the others looped: its first batch at least.
    assert all(leases for leases in results), [len(leases) for leases in results]
    owner_of = {lease.job_id: lease.owner for lease in taken}
    with tenure.connect(url) as store:
        final = store.jobs(limit=1000)
    assert len(final) == jobs
    for job in final:
        assert (job.state, job.generation, job.attempts) == ("done", 1, 1), job
        assert job.owner == owner_of[job.job_id]
        assert job.result == [job.owner, job.job_id]


def test_threads_submitting_overlapping_batches_create_each_job_once(url: str) -> None:
    # Issue #17: 8 threads, each a batch of 200 ids overlapping its neighbours' by half
    # (in a shuffled order): every id exists once, and exactly one answer says it created it.
    threads, size = 8, 200
    batches = []
    for index in range(threads):
        ids = [f"s{n}" for n in range(index * size // 2, index * size // 2 + size)]
        random.Random(index).shuffle(ids)
        batches.append([{"job_id": job_id, "payload": index} for job_id in ids])
    clients = [tenure.connect(url) for _ in range(threads)]
    try:
        results = all_at_once(
            [
                partial(client.submit_many, batch)
                for client, batch in zip(clients, batches, strict=True)
            ]
        )
        created = Counter(job.job_id for answers in results for job in answers if job.created)
        every = {f"s{n}" for n in range(0, (threads - 1) * size // 2 + size)}
        assert set(created) == every
        assert set(created.values()) == {1}
        for batch, answers in zip(batches, results, strict=True):
            assert [job.job_id for job in answers] == [item["job_id"] for item in batch]
            for item, job in zip(batch, answers, strict=True):
                # A job this batch did not create carries another batch's payload.
                assert (job.payload == item["payload"]) == job.created
        listed = [job.job_id for job in clients[0].jobs(limit=1000)]
        assert sorted(listed) == sorted(every)
    finally:
        for client in clients:
            client.close()
