"""The process's lease registry (`tenure.worker._lease`): what `token_state` and the fences
consult. Ending a lease only marks its handle; ended leases are forgotten in bulk, the
newest kept, live ones never."""

from __future__ import annotations

from pathlib import Path

import pytest

import tenure
from tenure.worker import _lease
from tenure.worker._lease import LeaseHandle

TTL = 30.0
KEPT = 4


def _handles(tmp_path: Path, count: int) -> list[LeaseHandle]:
    clock = tenure.ManualClock()
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
