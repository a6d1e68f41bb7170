"""The local deadline counts from when the claim or renew was sent (docs/design.md §2).

A holder keeps its lease's local deadline on its own monotonic clock, measured from the
moment it *sent* the claim or renew request: ``sent_at + ttl * (1 - max_drift) -
safety_margin`` (`tenure.LeaseTiming.local_deadline`, with the timing the store was opened
with). The store's lease starts running when the store handles the request; a reply that
takes seconds to come back has used those seconds of the lease already. A deadline counted
from the reply would outlive the store's lease by the reply's delay.

Here the driver under the store (below the point where the store reads its send time) holds
every claim and renew reply for ``DELAY`` seconds of the test's clock: the store has
answered, then the clock moves, then the reply returns. Each lease's deadline must still be
``TIMING.local_deadline(sent, ttl)``, ``sent`` being the clock's monotonic time before the
call, never ``sent + DELAY``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import tenure

T0 = tenure.ManualClock().time()
TTL = 30.0
DELAY = 3.0  # how long each reply takes to come back, on the test's clock
# Not the default timing: the deadline must follow the timing the store was opened with.
TIMING = tenure.LeaseTiming(max_drift=0.02, safety_margin=0.5)

# The driver operations that hand out leases, under every claim and renew of the store:
# claim_many and claim_jobs are claim_next's, complete_and_claim (with leases) its own.
LEASING = ("claim", "claim_next", "complete_and_claim", "renew", "renew_many")


class SlowReplies:
    """Wraps a real driver: each leasing operation runs in the store, then the clock moves
    ``DELAY`` seconds before its reply reaches the caller (a slow network, a paused
    client). Other operations pass through untouched."""

    def __init__(self, driver: Any, clock: tenure.ManualClock) -> None:
        self._driver = driver
        self._clock = clock
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._driver, name)
        if name not in LEASING:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = attr(*args, **kwargs)
            self._clock.advance(DELAY)  # the store has answered; the reply is on its way
            return result

        return call


def slowed(store: tenure.Store, clock: tenure.ManualClock) -> SlowReplies:
    """Put `SlowReplies` under ``store`` (from now on) and return it."""
    slow = SlowReplies(store._driver, clock)
    store._driver = slow
    return slow


def assert_counted_from(sent: float, leases: list[tenure.Lease], ttl: float = TTL) -> None:
    assert leases
    for lease in leases:
        assert lease.ttl == ttl
        assert lease.local_deadline == TIMING.local_deadline(sent, ttl), (
            f"{lease.job_id}: deadline {lease.local_deadline} is not counted from the send "
            f"({TIMING.local_deadline(sent, ttl)}); from the reply it would be "
            f"{TIMING.local_deadline(sent + DELAY, ttl)}"
        )


def _claim(store: tenure.Store) -> list[tenure.Lease]:
    lease = store.claim("J1", "A", TTL)
    assert lease is not None
    return [lease]


def _claim_next(store: tenure.Store) -> list[tenure.Lease]:
    lease = store.claim_next("A", TTL)
    assert lease is not None
    return [lease]


def _claim_jobs(store: tenure.Store) -> list[tenure.Lease]:
    return [claim.lease for claim in store.claim_jobs("A", TTL, 3)]


# Each way to take leases, from jobs J1, J2, J3 (ready) and J0 (held by A, for
# complete_and_claim to complete).
CLAIMS: dict[str, Callable[[tenure.Store, tenure.Lease], list[tenure.Lease]]] = {
    "claim": lambda store, _held: _claim(store),
    "claim_next": lambda store, _held: _claim_next(store),
    "claim_many": lambda store, _held: store.claim_many("A", TTL, 3),
    "claim_jobs": lambda store, _held: _claim_jobs(store),
    "complete_and_claim": lambda store, held: store.complete_and_claim([held], "A", TTL, 3)[1],
}


@pytest.mark.parametrize("how", list(CLAIMS))
def test_a_claims_deadline_counts_from_its_send_not_its_reply(
    open_store: Callable[..., tenure.Store], clock: tenure.ManualClock, how: str
) -> None:
    store = open_store(timing=TIMING)
    for job_id in ("J0", "J1", "J2", "J3"):
        store.submit(job_id)
    held = store.claim("J0", "A", TTL)
    assert held is not None
    slow = slowed(store, clock)
    sent = clock.monotonic()
    leases = CLAIMS[how](store, held)
    assert sum(slow.calls.values()) == 1  # the reply was held back, once
    assert clock.monotonic() == sent + DELAY
    assert_counted_from(sent, leases)
    # The store's lease started when the store took the request, before the delay.
    assert {lease.lease_until for lease in leases} == {T0 + TTL}


@pytest.mark.parametrize("ttl", [None, 60.0])
def test_a_renewals_deadline_counts_from_its_send_not_its_reply(
    open_store: Callable[..., tenure.Store], clock: tenure.ManualClock, ttl: float | None
) -> None:
    store = open_store(timing=TIMING)
    store.submit("J")
    lease = store.claim("J", "A", TTL)
    assert lease is not None
    clock.advance(10)  # well inside the lease: renewals come before it runs out
    slow = slowed(store, clock)
    sent = clock.monotonic()
    renewed = store.renew(lease, ttl)
    assert slow.calls == Counter({"renew": 1})
    assert_counted_from(sent, [renewed], ttl or TTL)
    assert renewed.lease_until == T0 + 10 + (ttl or TTL)
    # Again from the renewed lease: each renewal counts from its own send.
    sent = clock.monotonic()
    assert_counted_from(sent, [store.renew(renewed, ttl)], ttl or TTL)


def test_renew_many_counts_each_deadline_from_the_batchs_send(
    open_store: Callable[..., tenure.Store], clock: tenure.ManualClock
) -> None:
    store = open_store(timing=TIMING)
    leases = []
    for job_id in ("J1", "J2", "J3"):
        store.submit(job_id)
        lease = store.claim(job_id, "A", TTL)
        assert lease is not None
        leases.append(lease)
    clock.advance(10)
    slow = slowed(store, clock)
    sent = clock.monotonic()
    answers = store.renew_many(leases)
    assert slow.calls == Counter({"renew_many": 1})
    renewed = [answer for answer in answers if isinstance(answer, tenure.Lease)]
    assert len(renewed) == 3, answers
    assert_counted_from(sent, renewed)
    sent = clock.monotonic()
    longer = [a for a in store.renew_many(renewed, 60) if isinstance(a, tenure.Lease)]
    assert len(longer) == 3
    assert_counted_from(sent, longer, 60.0)
