"""A claim whose reply was lost finds its own leases by their secrets (issue #15), on every
store. The driver's `find_leases` answers exactly the running leases a claim took under
its secret hashes (which no one else knows), so the store floor can tell "it took these"
from "it took nothing" and resend only in the second case: the worker then never waits out
a TTL after a lost claim reply. Replies are lost with real stores underneath: after the
store applied the call (`LosingReplies`), or before the store got it (`Unreachable`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import tenure
from tenure._protocol import CLAIM_RECOVERY_TRIES, Status, hash_secret, settle_receipt
from tenure.aio import AsyncStore
from tenure.stores import open_driver, open_driver_async
from tests.conformance._support import CountingCalls, LosingReplies, fresh_secret, snapshot

QUEUES = ("default",)


class Unreachable(CountingCalls):
    """Wraps a real driver: the next ``lost_before`` calls of each named operation fail as
    a connection lost on the way there would (outcome unknown; the store never got them),
    and every call of an operation in ``down`` fails as a store that cannot be reached."""

    def __init__(self, driver: Any, *, lost_before: str = "", down: str = "") -> None:
        super().__init__(driver)
        self.lost_before = set(lost_before.split())
        self.down = set(down.split())

    def _called(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if name in self.lost_before or name in self.down:
            self.lost_before.discard(name)
            raise tenure.StoreUnavailable(
                f"{name}: connection lost (test wrapper)",
                operation=name,
                outcome_unknown=name not in self.down,
            )


@pytest.fixture
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    # The recovery's pauses are real sleeps (a restarted server needs the time); the
    # manual clock makes its budget endless, so only the number of tries bounds it here.
    monkeypatch.setattr("tenure._store.claim_recovery_pause", lambda attempt, jitter: 0.0)


def _hashes(count: int) -> list[str]:
    return [hash_secret(fresh_secret()) for _ in range(count)]


def test_find_leases_answers_exactly_what_a_claim_took(url: str, clock: tenure.ManualClock) -> None:
    driver = open_driver(url, clock)
    store = tenure.Store(driver, clock=clock)
    try:
        for job_id in "abcde":
            store.submit(job_id)
        h1, h2, h3, unused = _hashes(4)
        mine = driver.claim_next("A", 10, QUEUES, [h1, h2])
        theirs = driver.claim_next("B", 10, QUEUES, [h3])
        assert [o.row.job_id for o in mine if o.row] == ["a", "b"]
        assert [o.row.job_id for o in theirs if o.row] == ["c"]
        before = snapshot(store)

        found = driver.find_leases("A", 10, QUEUES, [h1, h2, unused])
        assert [o.status for o in found] == [Status.APPLIED, Status.APPLIED]
        assert [o.row for o in found] == [o.row for o in mine]  # the same rows, in order
        # Nobody else's leases: not another owner's, not under other hashes or queues.
        assert driver.find_leases("B", 10, QUEUES, [h1, h2]) == []
        assert driver.find_leases("A", 10, QUEUES, [h3, unused]) == []
        assert driver.find_leases("A", 10, ("elsewhere",), [h1, h2]) == []
        assert snapshot(store) == before  # it changed nothing

        # A lease that ended is not found: the claim's other lease still is.
        receipt = settle_receipt(h1, "complete")
        assert driver.complete("a", "A", 1, h1, receipt, None).status == Status.APPLIED
        assert [o.row.job_id for o in driver.find_leases("A", 10, QUEUES, [h1, h2]) if o.row] == [
            "b"
        ]
        clock.advance(10)  # b's lease expired: nothing found, a resend takes nothing twice
        assert driver.find_leases("A", 10, QUEUES, [h1, h2]) == []
    finally:
        store.close()


def test_a_lost_claim_next_reply_gives_the_lease_it_took(
    url: str, clock: tenure.ManualClock
) -> None:
    driver = LosingReplies(open_driver(url, clock), "claim_next")
    store = tenure.Store(driver, clock=clock)
    try:
        store.submit("J")
        store.submit("K")
        lease = store.claim_next("A", 10)
        assert lease is not None
        assert (lease.job_id, lease.generation, lease.attempt) == ("J", 1, 1)
        # Found by its secret, not sent again: K was not taken behind the caller's back.
        assert (driver.calls["claim_next"], driver.calls["find_leases"]) == (1, 1)
        assert store.get("K").state == "ready"
        store.complete(lease, "done")  # the lease is the live one: no TTL to wait out
        assert (store.get("J").state, store.get("J").generation) == ("done", 1)
    finally:
        store.close()


def test_a_lost_claim_many_reply_gives_exactly_the_leases_it_took(
    url: str, clock: tenure.ManualClock
) -> None:
    driver = LosingReplies(open_driver(url, clock), "claim_next")
    store = tenure.Store(driver, clock=clock)
    try:
        for job_id in ("J1", "J2", "J3", "J4"):
            store.submit(job_id)
        claims = store.claim_jobs("A", 10, 3)
        assert [(lease.job_id, lease.generation) for lease, _ in claims] == [
            ("J1", 1),
            ("J2", 1),
            ("J3", 1),
        ]
        assert [job.state for _, job in claims] == ["leased"] * 3
        assert driver.calls["claim_next"] == 1
        assert store.get("J4").state == "ready"
        assert store.complete_many([lease for lease, _ in claims]) == []
    finally:
        store.close()


def test_a_claim_lost_before_the_store_got_it_is_sent_again(
    url: str, clock: tenure.ManualClock
) -> None:
    driver = Unreachable(open_driver(url, clock), lost_before="claim_next")
    store = tenure.Store(driver, clock=clock)
    try:
        store.submit("J")
        lease = store.claim_next("A", 10)
        assert lease is not None
        assert (lease.job_id, lease.generation) == ("J", 1)
        # The look found nothing, so the claim went again (once: a lost try and a resend).
        assert (driver.calls["claim_next"], driver.calls["find_leases"]) == (2, 1)
        store.complete(lease)
    finally:
        store.close()


@pytest.mark.usefixtures("no_pauses")
def test_a_lost_claim_that_cannot_be_looked_up_surfaces_and_the_job_comes_back(
    url: str, clock: tenure.ManualClock
) -> None:
    driver = Unreachable(LosingReplies(open_driver(url, clock), "claim_next"), down="find_leases")
    store = tenure.Store(driver, clock=clock)
    try:
        store.submit("J")
        store.submit("K")
        with pytest.raises(tenure.StoreUnavailable) as caught:
            store.claim_next("A", 10)
        assert caught.value.outcome_unknown
        assert "could not be asked what the claim took" in str(caught.value)
        # Bounded: so many looks, and never a blind resend.
        assert driver.calls["find_leases"] == CLAIM_RECOVERY_TRIES
        assert driver.calls["claim_next"] == 1
        assert store.get("J").state == "leased"  # nobody holds that lease; it expires
        assert store.get("K").state == "ready"
        clock.advance(10)
        again = store.claim_many("B", 10, 5)
        assert {lease.job_id: lease.generation for lease in again} == {"J": 2, "K": 1}
    finally:
        store.close()


def test_a_lost_complete_and_claim_reply_completes_and_gives_the_leases(
    url: str, clock: tenure.ManualClock
) -> None:
    driver = LosingReplies(open_driver(url, clock), "complete_and_claim")
    store = tenure.Store(driver, clock=clock)
    try:
        for job_id in "abcde":
            store.submit(job_id)
        a, b = store.claim_many("A", 10, 2)
        lost, leases = store.complete_and_claim([a, b], "A", 10, 2, results=["x", "y"])
        assert lost == []  # the completions, repeated with complete_many, took effect once
        assert [(lease.job_id, lease.generation) for lease in leases] == [("c", 1), ("d", 1)]
        assert driver.calls["complete_and_claim"] == 1
        assert driver.calls["complete_many"] == 1
        assert [(store.get(k).state, store.get(k).result) for k in "ab"] == [
            ("done", "x"),
            ("done", "y"),
        ]
        assert store.get("e").state == "ready"
        assert store.complete_many(leases) == []
    finally:
        store.close()


def test_a_lost_complete_and_claim_whose_completions_cannot_be_repeated_stays_unknown(
    url: str, clock: tenure.ManualClock
) -> None:
    # The completions' repeat fails before reaching the store ("nothing changed"): the
    # caller must still hear that the claim may have taken jobs (a worker then waits for
    # their leases to end instead of thinking nothing was taken).
    losing = LosingReplies(open_driver(url, clock), "complete_and_claim")
    driver = Unreachable(losing, down="complete_many")
    store = tenure.Store(driver, clock=clock)
    try:
        for job_id in "abcd":
            store.submit(job_id)
        a, b = store.claim_many("A", 10, 2)
        with pytest.raises(tenure.StoreUnavailable) as caught:
            store.complete_and_claim([a, b], "A", 10, 2, results=["x", "y"])
        assert caught.value.outcome_unknown is True
        assert caught.value.operation == "complete_and_claim"
        assert driver.calls["find_leases"] == 0
        assert [store.get(k).state for k in "abcd"] == ["done", "done", "leased", "leased"]
    finally:
        store.close()


def test_a_lost_reply_of_a_complete_and_claim_without_leases_gives_its_lease(
    url: str, clock: tenure.ManualClock
) -> None:
    # With no leases the store sends a plain claim: its lost reply is recovered the same way.
    driver = LosingReplies(open_driver(url, clock), "claim_next")
    store = tenure.Store(driver, clock=clock)
    try:
        store.submit("J")
        store.submit("K")
        lost, leases = store.complete_and_claim([], "A", 10, 1)
        assert (lost, [(lease.job_id, lease.generation) for lease in leases]) == ([], [("J", 1)])
        assert driver.calls["claim_next"] == 1
        assert store.get("K").state == "ready"
    finally:
        store.close()


class AsyncLosingReplies:
    """`LosingReplies` for an async driver: the next call of each named operation is
    awaited in the store (it takes effect), then its reply is lost."""

    def __init__(self, driver: Any, *operations: str) -> None:
        self._driver = driver
        self.pending = set(operations)
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._driver, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = await attr(*args, **kwargs)
            if name in self.pending:
                self.pending.discard(name)
                raise tenure.StoreUnavailable(
                    f"{name}: reply lost (test wrapper)", operation=name, outcome_unknown=True
                )
            return result

        return call


@pytest.mark.anyio
async def test_the_async_store_recovers_a_lost_claim_too(
    url: str, clock: tenure.ManualClock
) -> None:
    driver = AsyncLosingReplies(await open_driver_async(url, clock), "claim_next")
    store = AsyncStore(driver, clock=clock)
    try:
        await store.submit("J")
        await store.submit("K")
        lease = await store.claim_next("A", 10)
        assert lease is not None
        assert (lease.job_id, lease.generation) == ("J", 1)
        assert (driver.calls["claim_next"], driver.calls["find_leases"]) == (1, 1)
        assert (await store.get("K")).state == "ready"
        await store.complete(lease)
    finally:
        await store.close()
