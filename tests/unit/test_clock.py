"""Client-side lease time: clocks, local deadlines, Lease.remaining (pure, manual clock)."""

from __future__ import annotations

import math
import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenure
from tenure._protocol import LeaseMaker

TTL = st.floats(min_value=0.01, max_value=7 * 24 * 3600.0)
SENT = st.floats(min_value=0.0, max_value=1e9)


def make_lease(
    clock: tenure.ManualClock, ttl: float = 10.0, timing: tenure.LeaseTiming | None = None
) -> tenure.Lease:
    from tenure._protocol import JobRow

    maker = LeaseMaker("store-1", timing or tenure.LeaseTiming())
    row = JobRow(
        "J", "default", "leased", "A", 3, "hash", 5_000.0, 5_000.0, 1, 5, None, None, None, 0.0, 0.0
    )
    return maker.lease(row, "A", ttl, "secret", clock.monotonic())


# -- clocks ------------------------------------------------------------------------------


def test_manual_clock_moves_only_when_told() -> None:
    clock = tenure.ManualClock(100.0, monotonic_start=5.0)
    assert (clock.time(), clock.monotonic()) == (100.0, 5.0)
    assert (clock.time(), clock.monotonic()) == (100.0, 5.0)
    clock.advance(2.5)
    assert (clock.time(), clock.monotonic()) == (102.5, 7.5)
    clock.advance(0)
    assert (clock.time(), clock.monotonic()) == (102.5, 7.5)


def test_manual_clock_jump_moves_wall_time_only() -> None:
    clock = tenure.ManualClock(100.0, monotonic_start=5.0)
    clock.jump(-50)
    assert (clock.time(), clock.monotonic()) == (50.0, 5.0)
    clock.jump(20)
    assert (clock.time(), clock.monotonic()) == (70.0, 5.0)


def test_manual_clock_refuses_to_advance_backwards() -> None:
    clock = tenure.ManualClock()
    with pytest.raises(ValueError, match="jump"):
        clock.advance(-1)
    assert clock.time() == tenure.ManualClock().time()


def test_clocks_satisfy_the_protocol() -> None:
    assert isinstance(tenure.ManualClock(), tenure.Clock)
    assert isinstance(tenure.SystemClock(), tenure.Clock)
    system = tenure.SystemClock()
    assert abs(system.time() - time.time()) < 5
    first = system.monotonic()
    assert system.monotonic() >= first


# -- local deadlines -----------------------------------------------------------------------


def test_local_deadline_defaults() -> None:
    timing = tenure.LeaseTiming()
    assert (timing.max_drift, timing.safety_margin) == (0.01, 0.05)
    # sent_at + ttl * (1 - max_drift) - safety_margin
    assert timing.local_deadline(1000.0, 30.0) == pytest.approx(1000.0 + 29.7 - 0.05)
    # the margin is capped at a tenth of the TTL so short leases stay usable
    assert timing.local_deadline(1000.0, 0.1) == pytest.approx(1000.0 + 0.099 - 0.01)


def test_local_deadline_without_margins_is_the_ttl() -> None:
    timing = tenure.LeaseTiming(max_drift=0.0, safety_margin=0.0)
    assert timing.local_deadline(50.0, 10.0) == 60.0


@pytest.mark.parametrize(
    ("max_drift", "safety_margin", "ttl", "expected"),
    [
        (0.1, 1.0, 100.0, 100.0 * 0.9 - 1.0),
        (0.1, 20.0, 100.0, 100.0 * 0.9 - 10.0),  # margin capped at ttl/10
        (0.0, 0.5, 2.0, 2.0 - 0.2),
        (0.49, 60.0, 0.01, 0.01 * 0.51 - 0.001),
    ],
)
def test_local_deadline_formula(
    max_drift: float, safety_margin: float, ttl: float, expected: float
) -> None:
    timing = tenure.LeaseTiming(max_drift=max_drift, safety_margin=safety_margin)
    assert timing.local_deadline(0.0, ttl) == pytest.approx(expected)


@given(sent=SENT, ttl=TTL, drift=st.floats(0.0, 0.49), margin=st.floats(0.0, 60.0))
def test_local_deadline_is_never_later_than_the_lease(
    sent: float, ttl: float, drift: float, margin: float
) -> None:
    deadline = tenure.LeaseTiming(drift, margin).local_deadline(sent, ttl)
    assert sent <= deadline <= sent + ttl
    # and it leaves at least 40 % of the TTL: drift < 0.5, margin <= ttl/10
    assert deadline - sent >= ttl * 0.4 - 4 * math.ulp(sent + ttl)


@given(sent=SENT, ttl=TTL)
def test_local_deadline_grows_with_ttl_and_send_time(sent: float, ttl: float) -> None:
    timing = tenure.LeaseTiming()
    assert timing.local_deadline(sent, ttl) <= timing.local_deadline(
        sent, min(ttl * 2, 7 * 86400.0)
    )
    assert timing.local_deadline(sent, ttl) <= timing.local_deadline(sent + 1.0, ttl)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_drift": -0.01}, "max_drift"),
        ({"max_drift": 0.5}, "max_drift"),
        ({"max_drift": 1.0}, "max_drift"),
        ({"safety_margin": -1.0}, "safety_margin"),
        ({"safety_margin": 61.0}, "safety_margin"),
    ],
)
def test_lease_timing_refuses_nonsense(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        tenure.LeaseTiming(**kwargs)


# -- Lease.remaining / expired_locally -----------------------------------------------------


def test_deadline_is_measured_from_when_the_request_was_sent() -> None:
    clock = tenure.ManualClock(monotonic_start=1000.0)
    lease = make_lease(clock, ttl=10.0)
    assert lease.local_deadline == pytest.approx(1000.0 + 9.9 - 0.05)
    # The store's lease_until (store time) plays no part on the client.
    assert lease.lease_until == 5_000.0


def test_remaining_and_expired_locally() -> None:
    clock = tenure.ManualClock(monotonic_start=1000.0)
    lease = make_lease(clock, ttl=10.0, timing=tenure.LeaseTiming(0.0, 0.0))
    assert lease.remaining(clock) == 10.0
    assert not lease.expired_locally(clock)
    clock.advance(9.5)
    assert lease.remaining(clock) == pytest.approx(0.5)
    assert not lease.expired_locally(clock)
    clock.advance(0.5)
    assert lease.remaining(clock) == 0.0
    assert lease.expired_locally(clock)  # at the deadline: gone
    clock.advance(3)
    assert lease.remaining(clock) == pytest.approx(-3.0)
    assert lease.expired_locally(clock)


def test_wall_clock_steps_do_not_move_the_local_deadline() -> None:
    clock = tenure.ManualClock(monotonic_start=1000.0)
    lease = make_lease(clock, ttl=10.0)
    before = lease.remaining(clock)
    clock.jump(-3600)
    assert lease.remaining(clock) == before
    clock.jump(7200)
    assert lease.remaining(clock) == before
    assert not lease.expired_locally(clock)


def test_remaining_defaults_to_the_system_monotonic_clock() -> None:
    system = tenure.SystemClock()
    maker = LeaseMaker("s", tenure.LeaseTiming())
    from tenure._protocol import JobRow

    row = JobRow("J", "q", "leased", "A", 1, "h", 1.0, 1.0, 1, 5, None, None, None, 0.0, 0.0)
    lease = maker.lease(row, "A", 60.0, "secret", system.monotonic())
    assert 50.0 < lease.remaining() <= 60.0
    assert not lease.expired_locally()
    old = maker.lease(row, "A", 60.0, "secret", system.monotonic() - 120.0)
    assert old.expired_locally()


# -- retry backoff -------------------------------------------------------------------------


@given(
    attempt=st.integers(-5, 10_000),
    base=st.floats(0.001, 100.0),
    cap=st.floats(0.001, 86_400.0),
    seed=st.integers(0, 2**32),
)
def test_retry_delay_bounds(attempt: int, base: float, cap: float, seed: int) -> None:
    policy = tenure.RetryPolicy(base=base, cap=cap)
    ceiling = min(cap, base * 2.0 ** min(max(attempt - 1, 0), 60))
    delay = policy.delay(attempt, random.Random(seed))
    assert ceiling / 2 <= delay <= ceiling


def test_retry_delay_doubles_then_caps() -> None:
    policy = tenure.RetryPolicy(base=1.0, cap=10.0)
    rng = random.Random(1)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (500, 10.0)]:
        delays = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling / 4  # jitter spreads them
    assert tenure.RetryPolicy().delay(1, rng) <= 1.0  # default base: 1 s


def test_retry_delay_is_reproducible_with_a_seed() -> None:
    policy = tenure.RetryPolicy()
    a = [policy.delay(n, random.Random(7)) for n in range(1, 6)]
    b = [policy.delay(n, random.Random(7)) for n in range(1, 6)]
    assert a == b


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"base": float("nan")}, "base"),
        ({"base": -1.0}, "base"),
        ({"base": float("inf")}, "base"),
        ({"cap": float("nan")}, "cap"),
        ({"cap": -5.0}, "cap"),
        ({"cap": 10.0**12}, "cap"),
        ({"base": "1"}, "base"),
        ({"base": True}, "base"),
    ],
)
def test_retry_policy_refuses_nonsense(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.argument == name


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 10**400, "5", None, True])
def test_manual_clock_times_and_steps_are_finite_numbers(bad: object) -> None:
    # A NaN time would reach a store that takes this clock as its own (a lease ending at
    # NaN never expires there): refused, and the clock stays where it was.
    clock = tenure.ManualClock()
    before = (clock.time(), clock.monotonic())
    calls = [
        ("start", lambda: tenure.ManualClock(bad)),  # type: ignore[arg-type]
        ("monotonic_start", lambda: tenure.ManualClock(monotonic_start=bad)),  # type: ignore[arg-type]
        ("seconds", lambda: clock.advance(bad)),  # type: ignore[arg-type]
        ("seconds", lambda: clock.jump(bad)),  # type: ignore[arg-type]
        ("seconds", lambda: clock.suspend(bad)),  # type: ignore[arg-type]
    ]
    for argument, call in calls:
        with pytest.raises(tenure.InvalidArgument) as caught:
            call()
        assert caught.value.argument == argument
    assert (clock.time(), clock.monotonic()) == before
