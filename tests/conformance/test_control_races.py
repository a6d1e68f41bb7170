"""Job control against the lease protocol, with real threads on every backend: cancel
against a claim, a completion and a renewal (one wins, the loser is told); requeue against
claims; purge against a submit of the same id (the generation floor holds)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

import tenure

pytestmark = [pytest.mark.races]

ROUNDS = 8
CLAIMERS = 6


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
    return results


@pytest.fixture
def clients(url: str) -> Any:
    opened = [tenure.connect(url) for _ in range(CLAIMERS + 1)]
    yield opened
    for client in opened:
        client.close()


def test_cancel_against_claims(clients: list[tenure.Store]) -> None:
    control, *claimers = clients
    for n in range(ROUNDS):
        job_id = f"c{n}"
        control.submit(job_id)
        calls: list[Callable[[], Any]] = [partial(control.cancel, job_id, "race")]
        calls += [partial(c.claim, job_id, f"w{i}", 30) for i, c in enumerate(claimers)]
        results = all_at_once(calls)
        assert isinstance(results[0], tenure.Job), results[0]
        leases = [r for r in results[1:] if isinstance(r, tenure.Lease)]
        assert all(r is None or isinstance(r, tenure.Lease) for r in results[1:]), results
        assert len(leases) <= 1
        job = control.get(job_id)
        assert job.state == "cancelled"
        if leases:  # the claim came first: the cancel moved its generation on
            assert job.generation == leases[0].generation + 1 == 2
            with pytest.raises(tenure.LeaseLost) as caught:
                claimers[0].complete(leases[0])
            assert caught.value.reason == "cancelled"
        else:
            assert job.generation == 0


def test_cancel_against_complete(clients: list[tenure.Store]) -> None:
    control, holder = clients[0], clients[1]
    outcomes = set()
    for n in range(ROUNDS * 2):
        job_id = f"k{n}"
        control.submit(job_id)
        lease = holder.claim(job_id, "w", 30)
        assert lease is not None
        cancelled, completed = all_at_once(
            [partial(control.cancel, job_id), partial(holder.complete, lease, "r")]
        )
        job = control.get(job_id)
        if isinstance(cancelled, tenure.Job):  # cancel won: the completion was refused
            assert isinstance(completed, tenure.LeaseLost), completed
            assert completed.reason == "cancelled"
            assert (job.state, job.generation) == ("cancelled", lease.generation + 1)
            outcomes.add("cancel")
        else:  # complete won: the cancel was told the job is done
            assert completed is None, completed
            assert isinstance(cancelled, tenure.JobStateConflict), cancelled
            assert cancelled.state == "done"
            assert (job.state, job.result) == ("done", "r")
            outcomes.add("complete")
    assert outcomes  # each round had exactly one winner (both kinds are fine)


def test_cancel_against_renew(clients: list[tenure.Store]) -> None:
    control, holder = clients[0], clients[1]
    for n in range(ROUNDS * 2):
        job_id = f"r{n}"
        control.submit(job_id)
        lease = holder.claim(job_id, "w", 30)
        assert lease is not None
        cancelled, renewed = all_at_once(
            [partial(control.cancel, job_id), partial(holder.renew, lease)]
        )
        assert isinstance(cancelled, tenure.Job), cancelled
        job = control.get(job_id)
        assert (job.state, job.generation) == ("cancelled", lease.generation + 1)
        if isinstance(renewed, tenure.Lease):  # renewed first: told at the next call
            with pytest.raises(tenure.LeaseLost) as caught:
                holder.renew(renewed)
            assert caught.value.reason == "cancelled"
        else:
            assert isinstance(renewed, tenure.LeaseLost), renewed
            assert renewed.reason == "cancelled"


def test_requeue_against_claims(clients: list[tenure.Store]) -> None:
    control, *claimers = clients
    for n in range(ROUNDS):
        job_id = f"q{n}"
        control.submit(job_id, max_attempts=1)
        lease = control.claim(job_id, "first", 30)
        assert lease is not None
        control.fail(lease, "boom")
        calls: list[Callable[[], Any]] = [partial(control.requeue, job_id)]
        calls += [partial(c.claim, job_id, f"w{i}", 30) for i, c in enumerate(claimers)]
        results = all_at_once(calls)
        assert isinstance(results[0], tenure.Job), results[0]
        leases = [r for r in results[1:] if isinstance(r, tenure.Lease)]
        assert all(r is None or isinstance(r, tenure.Lease) for r in results[1:]), results
        assert len(leases) <= 1
        job = control.get(job_id)
        if leases:
            assert leases[0].generation == 2
            assert (job.state, job.owner, job.generation) == ("leased", leases[0].owner, 2)
        else:
            assert (job.state, job.generation) == ("ready", 1)
            assert control.claim(job_id, "late", 30) is not None


def test_purge_against_submit_of_the_same_id(clients: list[tenure.Store]) -> None:
    control, submitter = clients[0], clients[1]
    top = 0
    for n in range(ROUNDS * 2):
        job_id = f"p{n % 2}"
        if n < 2:
            control.submit(job_id)
        lease = control.claim(job_id, "w", 30)
        assert lease is not None, control.get(job_id)
        assert lease.generation > top  # never a generation a deleted job had
        top = max(top, lease.generation)
        control.complete(lease)
        _, submitted = all_at_once(
            [partial(control.purge, older_than=0), partial(submitter.submit, job_id)]
        )
        assert isinstance(submitted, tenure.Job), submitted
        # Either the purge came first (the submit made a new job), or the submit found the
        # done job and left it, and the purge took it then, or did not reach it yet.
        try:
            state = control.get(job_id).state
        except tenure.JobNotFound:
            state = "gone"
        if state == "done":
            control.delete(job_id)
        if state != "ready":
            assert control.submit(job_id).created is True
