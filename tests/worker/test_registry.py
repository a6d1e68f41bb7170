"""The process's lease registry (`tenure.worker._lease`): what `token_state` and the fences
consult. Ending a lease only marks its handle; ended leases are forgotten in bulk, the
newest kept, live ones never."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import tenure
from tenure.worker import JobContext, _lease, check_token, token_state
from tenure.worker._lease import LeaseHandle
from tests.worker._support import run_burst

TTL = 30.0
KEPT = 4


def _handles(tmp_path: Path, count: int) -> list[LeaseHandle]:
    clock = tenure.ManualClock()
    tmp_path.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    with tenure.connect(url, clock=clock, store_clock=clock) as store:
        store.submit_many([{"job_id": f"job-{n:02d}"} for n in range(count)])
        claimed = store.claim_jobs("A", TTL, count)
    assert len(claimed) == count
    return [LeaseHandle(lease, clock) for lease, _ in claimed]


def test_ended_leases_are_forgotten_in_bulk_the_newest_kept_and_live_ones_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_lease, "_ENDED_KEPT", KEPT)
    registry = _lease._Registry()
    handles = _handles(tmp_path, 30)
    oldest = handles[0]
    registry.add(oldest)  # held throughout
    for handle in handles[1:]:
        registry.add(handle)
        registry.end(handle, "ended")
        # Bounded: the live lease, and at most twice the ended leases kept.
        assert len(registry._leases) <= 1 + 2 * KEPT
    states = [registry.state(handle.lease.token) for handle in handles]
    assert states[0] == "held"
    assert states[-KEPT:] == ["ended"] * KEPT
    assert states[1:-KEPT].count("unknown") >= len(handles) - 1 - 2 * KEPT
    assert set(states[1:-KEPT]) <= {"ended", "unknown"}


def test_an_end_is_seen_at_once_and_the_last_end_says_how(tmp_path: Path) -> None:
    registry = _lease._Registry()
    (handle,) = _handles(tmp_path, 1)
    token = handle.lease.token
    wire = tenure.FencingToken(token.job_id, token.generation)  # no store: live ones only
    assert registry.state(token) == "unknown"
    registry.add_many([handle])
    assert (registry.state(token), registry.state(wire)) == ("held", "held")
    handle.mark_lost("renewal rejected (test)", "renewal_rejected")
    assert (registry.state(token), registry.state(wire)) == ("lost", "lost")
    registry.end(handle, "lost")
    assert (registry.state(token), registry.state(wire)) == ("lost", "unknown")
    registry.end(handle, "ended")
    assert registry.state(token) == "ended"


def test_a_finished_handle_keeps_no_loss_callback(tmp_path: Path) -> None:
    # The registry keeps ended handles a while; the worker behind a callback must not be.
    calls: list[LeaseHandle] = []
    (handle,) = _handles(tmp_path, 1)
    handle = LeaseHandle(handle.lease, handle.clock, on_lost=calls.append)
    handle.finish()
    assert handle._on_lost is None
    assert handle.mark_lost("too late (test)", "renewal_rejected") is False
    assert calls == []


def test_ended_leases_are_kept_as_records_once_their_jobs_are_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker hands the registry its forgotten jobs' handles (`keep_ended`): the ended
    # ones are kept as their store and how they ended, not as handles (which kept the
    # garbage collector busy), and every token is judged as before.
    monkeypatch.setattr(_lease, "_ENDED_KEPT", KEPT)
    registry = _lease._Registry()
    live, done, lost, unended = _handles(tmp_path, 4)
    registry.add_many([live, done, lost, unended])
    registry.end(done, "ended")
    registry.end(lost, "lost")
    registry.keep_ended([done, lost, unended])
    kept = {key[0]: entry for key, entry in registry._leases.items()}
    assert kept[live.lease.job_id] is live
    assert kept[unended.lease.job_id] is unended  # never ended: still judged by its handle
    assert kept[done.lease.job_id] == (done.lease.store_id, "ended")
    assert kept[lost.lease.job_id] == (lost.lease.store_id, "lost")
    assert kept[done.lease.job_id] is registry._leases[(done.lease.job_id, 1)]
    states = [registry.state(handle.lease.token) for handle in (live, done, lost, unended)]
    assert states == ["held", "ended", "lost", "held"]
    wire = tenure.FencingToken(done.lease.job_id, done.lease.generation)  # no store
    assert registry.state(wire) == "unknown"
    other_store = tenure.FencingToken(done.lease.job_id, done.lease.generation, "elsewhere")
    assert registry.state(other_store) == "unknown"
    # Records are forgotten in bulk like ended handles, the newest kept.
    more = _handles(tmp_path / "more", 3 * KEPT)
    for handle in more:
        registry.add(handle)
        registry.end(handle, "ended")
        registry.keep_ended([handle])
    assert len(registry._leases) <= 2 + 2 * KEPT
    assert [registry.state(h.lease.token) for h in more[-KEPT:]] == ["ended"] * KEPT
    assert registry.state(live.lease.token) == "held"


def test_an_ended_lease_sharing_its_key_with_another_stores_is_kept_as_a_record(
    tmp_path: Path,
) -> None:
    registry = _lease._Registry()
    (mine,) = _handles(tmp_path / "mine", 1)
    (theirs,) = _handles(tmp_path / "theirs", 1)  # the same job id and generation
    assert mine.lease.store_id != theirs.lease.store_id
    registry.add_many([mine, theirs])
    registry.end(mine, "ended")
    registry.keep_ended([mine])
    (entry,) = registry._leases.values()
    assert entry == [(mine.lease.store_id, "ended"), theirs]
    assert registry.state(mine.lease.token) == "ended"
    assert registry.state(theirs.lease.token) == "held"


def test_a_workers_ended_jobs_leave_records_and_their_tokens_are_still_refused(
    make_worker: Callable[..., tenure.Worker], store: tenure.Store
) -> None:
    worker = make_worker(concurrency=4)
    tokens: list[tenure.FencingToken] = []

    @worker.handler("default")
    async def handler(ctx: JobContext) -> None:
        tokens.append(ctx.token)

    # Job ids of this test alone: the registry is the process's, shared by the tests.
    run = uuid.uuid4().hex
    store.submit_many([{"job_id": f"{run}-{n}"} for n in range(10)])
    run_burst(worker)
    assert len(tokens) == 10
    for token in tokens:
        entry = _lease.REGISTRY._leases[(token.job_id, token.generation)]
        assert entry == (token.store_id, "ended")
        assert token_state(token) == "ended"
        with pytest.raises(tenure.LeaseLost, match="has already ended"):
            check_token(token)
