"""Bad input to job control (cancel, requeue, delete, purge): InvalidArgument naming the
argument and the rule, before the store is touched, which is left unchanged."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

import tenure
from tests.conformance._bad_values import BAD_DELAYS, BAD_IDS, BAD_LIMITS
from tests.conformance._support import snapshot

BAD_REASONS: list[Any] = [42, 4.2, True, b"why", ["why"], "x" * 4097, "a\x00b"]
BAD_FLAGS: list[Any] = [1, 0, "yes", None, 1.0]
BAD_AGES: list[Any] = [
    -1,
    -0.001,
    10**400,
    101 * 366 * 24 * 3600,
    float("nan"),
    float("inf"),
    True,
    "5",
    None,
    Decimal("5"),
    dt.timedelta(seconds=-1),
    dt.timedelta.max,
]
BAD_PURGE_STATES: list[Any] = [
    "done",
    b"done",
    [],
    (),
    ["ready"],
    ["leased"],
    ["done", "done"],
    [None],
    ["DONE"],
    5,
    None,
]

Store = tenure.Store
Call = Callable[[Store, Any], object]

CASES: list[tuple[str, str, list[Any], Call]] = [
    ("cancel", "job_id", BAD_IDS, lambda s, v: s.cancel(v)),
    ("cancel", "reason", BAD_REASONS, lambda s, v: s.cancel("L", v)),
    ("requeue", "job_id", BAD_IDS, lambda s, v: s.requeue(v)),
    ("requeue", "delay", BAD_DELAYS, lambda s, v: s.requeue("D", delay=v)),
    ("requeue", "reset_attempts", BAD_FLAGS, lambda s, v: s.requeue("D", reset_attempts=v)),
    ("delete", "job_id", BAD_IDS, lambda s, v: s.delete(v)),
    ("purge", "older_than", BAD_AGES, lambda s, v: s.purge(older_than=v)),
    ("purge", "states", BAD_PURGE_STATES, lambda s, v: s.purge(older_than=0, states=v)),
    ("purge", "batch", BAD_LIMITS, lambda s, v: s.purge(older_than=0, batch=v)),
]


@pytest.fixture
def world(store: tenure.Store, clock: tenure.ManualClock) -> tenure.Store:
    """A store with a ready job R, a leased L and a done D (purgeable)."""
    store.submit("R")
    store.submit("L")
    store.submit("D")
    done = store.claim("D", "A", 10)
    assert done is not None
    store.complete(done, "ok")
    assert store.claim("L", "A", 10) is not None
    clock.advance(1)
    return store


@pytest.mark.parametrize(
    ("entry", "argument", "values", "call"),
    CASES,
    ids=[f"{entry}-{argument}" for entry, argument, _, _ in CASES],
)
def test_bad_control_input_is_refused_and_changes_nothing(
    world: tenure.Store, entry: str, argument: str, values: list[Any], call: Call
) -> None:
    before = snapshot(world)
    for value in values:
        what = f"{entry}({argument}={value!r:.60})"
        with pytest.raises(tenure.InvalidArgument) as caught:
            call(world, value)
        refusal = caught.value
        assert refusal.argument == argument, f"{what}: names {refusal.argument!r}: {refusal}"
        assert len(refusal.rule) > 10, f"{what}: the rule is not explained: {refusal}"
        assert snapshot(world) == before, f"{what} changed the store"
    # Good input still works afterwards: the done job can go.
    assert world.purge(older_than=0) == 1


def test_good_edge_values(world: tenure.Store) -> None:
    assert world.cancel("R", "x" * 4096).error == "x" * 4096
    assert world.requeue("R", delay=366 * 24 * 3600, reset_attempts=True).state == "ready"
    assert world.purge(older_than=dt.timedelta(days=100 * 366), states=("done",)) == 0
    assert world.purge(older_than=0, states=[tenure.JobState.DONE], batch=1000) == 1
