"""A settle given up at its lease's local deadline: the store is blamed (an outage counted,
"the store stayed unavailable") only when a call for it failed; one given up before it was
ever sent (its deadline nearer than an attempt takes: the process was paused, say) loses
its lease as well, but counts no outage and says why."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

import tenure
from tenure.worker._lease import LeaseHandle
from tenure.worker._retry import DeadlinePassed, Outage
from tenure.worker._settle import Settler, note_loss
from tenure.worker._stats import Stats

LEASE = tenure.Lease("J", "A", 1, 110.0, 10.0, 1, 1010.0, "0" * 48, "store")


def _given_up(sent: bool) -> tuple[Stats, LeaseHandle, list[str]]:
    clock, stats = tenure.ManualClock(), Stats()
    outage = Outage(clock, stats)
    handle = LeaseHandle(LEASE, clock, lambda h: note_loss(stats, h, outage))
    handle.settling()  # the handler has ended: its job is being settled
    error = DeadlinePassed("given up (test)", operation="complete", outcome_unknown=sent)
    settler = SimpleNamespace(_stats=stats)
    Settler._gave_up(settler, "complete", handle, error, {})  # type: ignore[arg-type]
    return stats, handle, [handle.lost_reason or ""]


def test_a_settle_given_up_after_failed_calls_is_an_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    stats, handle, (reason,) = _given_up(sent=True)
    assert handle.lost_kind == "deadline_passed"
    assert (
        reason == "the store stayed unavailable until the local deadline (complete not confirmed)"
    )
    values = stats.snapshot()
    assert values["outages"] == 1
    assert values["settles_given_up"] == values["leases_lost"] == 1
    assert any(r.getMessage().startswith("store unavailable:") for r in caplog.records)


def test_a_settle_given_up_unsent_is_no_outage(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    stats, handle, (reason,) = _given_up(sent=False)
    assert handle.lost_kind == "deadline_passed"  # the lease is lost all the same
    assert reason.startswith("the local deadline came before the complete could be sent")
    assert "paused" in reason
    values = stats.snapshot()
    assert values["outages"] == 0  # the store was not shown to be away
    assert values["settles_given_up"] == values["leases_lost"] == 1
    messages = [r.getMessage() for r in caplog.records]
    assert not any(m.startswith("store unavailable:") for m in messages), messages
    assert any(
        m.startswith("could not complete the job: the local deadline came") for m in messages
    )
