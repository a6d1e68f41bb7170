"""Bad input to locks and leaders (`tenure.Lock`, `tenure.AsyncLock`, `tenure.Leader`,
`tenure.elect`, `tenure.AsyncLeader`, ``store.elect``, ``Leader.wait_elected``, `lock_ids`)
is refused with `InvalidArgument` naming the argument, and changes nothing in the store.
The rules the conformance suite checks (names, ttls, owners, lock timeouts) are in
tests/conformance/test_locks.py; these are the store itself, the leader's callbacks, the
leader's wait and the ids of a lock name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import tenure
import tenure.aio
from tenure.locks import lock_ids
from tenure.locks._core import MAX_NAME_LENGTH
from tests.conformance._bad_values import BAD_DELAYS, BAD_IDS
from tests.conformance._support import snapshot

TTL = 10.0
NAME = "report"

NOT_STORES: list[Any] = [None, "notastore", 42, object(), tenure.ManualClock()]
NOT_CALLABLES: list[Any] = [42, "x", b"x", 1.5, True, ["f"], object()]
# A wait's timeout: None and +inf wait forever (as Lock.acquire takes them).
BAD_WAITS: list[Any] = ["1", *(v for v in BAD_DELAYS if v is not None and v != float("inf"))]
BAD_NAMES: list[Any] = [*BAD_IDS, "x" * 244]  # a name leaves room for the queue's prefix


def refused(argument: str, call: Callable[[], object]) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        call()
    assert caught.value.argument == argument, caught.value
    assert len(caught.value.rule) > 10, caught.value


@pytest.mark.parametrize("value", NOT_STORES, ids=lambda value: type(value).__name__)
def test_a_lock_or_leader_needs_a_store(value: Any) -> None:
    refused("store", lambda: tenure.Lock(value, NAME, TTL))
    refused("store", lambda: tenure.lock(value, NAME, ttl=TTL))
    refused("store", lambda: tenure.Leader(value, NAME, TTL))
    refused("store", lambda: tenure.elect(value, NAME, TTL))
    refused("store", lambda: tenure.AsyncLock(value, NAME, TTL))
    refused("store", lambda: tenure.lock_async(value, NAME, ttl=TTL))
    refused("store", lambda: tenure.AsyncLeader(value, NAME, TTL))
    refused("store", lambda: tenure.elect_async(value, NAME, TTL))


def test_a_lock_needs_a_store_of_its_kind(store: tenure.Store) -> None:
    before = snapshot(store)
    refused("store", lambda: tenure.AsyncLock(store, NAME, TTL))  # type: ignore[arg-type]
    refused("store", lambda: tenure.AsyncLeader(store, NAME, TTL))  # type: ignore[arg-type]
    assert snapshot(store) == before


@pytest.mark.anyio
async def test_an_async_lock_needs_an_async_store(
    store: tenure.Store, astore: tenure.aio.AsyncStore
) -> None:
    before = snapshot(store)
    refused("store", lambda: tenure.Lock(astore, NAME, TTL))  # type: ignore[arg-type]
    refused("store", lambda: tenure.Leader(astore, NAME, TTL))  # type: ignore[arg-type]
    refused("store", lambda: tenure.elect(astore, NAME, TTL))  # type: ignore[arg-type]
    assert snapshot(store) == before


SYNC_LEADERS: list[tuple[str, Callable[[tenure.Store, dict[str, Any]], object]]] = [
    ("Leader", lambda s, kw: tenure.Leader(s, NAME, TTL, **kw)),
    ("elect", lambda s, kw: tenure.elect(s, NAME, TTL, **kw)),
    ("store.elect", lambda s, kw: s.elect(NAME, TTL, **kw)),
]


@pytest.mark.parametrize("argument", ["on_elected", "on_lost"])
def test_leader_callbacks_are_callables_or_none(store: tenure.Store, argument: str) -> None:
    store.submit("R")
    before = snapshot(store)
    for entry, make in SYNC_LEADERS:
        for value in NOT_CALLABLES:
            with pytest.raises(tenure.InvalidArgument) as caught:
                make(store, {argument: value})
            assert caught.value.argument == argument, f"{entry}({argument}={value!r})"
    assert snapshot(store) == before  # no candidate ran: the lock's job was never made


@pytest.mark.anyio
@pytest.mark.parametrize("argument", ["on_elected", "on_lost"])
async def test_async_leader_callbacks_are_callables_or_none(
    store: tenure.Store, astore: tenure.aio.AsyncStore, argument: str
) -> None:
    store.submit("R")
    before = snapshot(store)
    for value in NOT_CALLABLES:
        kwargs: dict[str, Any] = {argument: value}
        refused(argument, lambda kwargs=kwargs: tenure.AsyncLeader(astore, NAME, TTL, **kwargs))
        refused(argument, lambda kwargs=kwargs: astore.elect(NAME, TTL, **kwargs))
        refused(argument, lambda kwargs=kwargs: tenure.elect_async(astore, NAME, TTL, **kwargs))
    assert snapshot(store) == before


def test_wait_elected_takes_a_timeout_as_acquire_does(store: tenure.Store) -> None:
    leader = tenure.Leader(store, NAME, TTL)  # not started: it never becomes the leader
    for value in BAD_WAITS:
        refused("timeout", lambda value=value: leader.wait_elected(value))
    assert leader.wait_elected(0) is False
    assert leader.wait_elected(0.01) is False
    assert snapshot(store) == []


def test_lock_ids_refuses_what_no_lock_is_named() -> None:
    for name in BAD_NAMES:
        refused("name", lambda name=name: lock_ids(name))


def test_lock_ids_of_a_good_name() -> None:
    assert lock_ids("a" * 243) == ("lock:" + "a" * 243, "tenure.lock:" + "a" * 243)


@pytest.mark.anyio
@pytest.mark.parametrize("length", [0, MAX_NAME_LENGTH + 1, 255, 256, 300])
async def test_a_name_of_a_bad_length_is_told_the_locks_own_bound(
    store: tenure.Store, astore: tenure.aio.AsyncStore, length: int
) -> None:
    # Not the job id's 1-255: a lock's job id is its name behind a prefix.
    got = "it is empty" if not length else f"got {length}"
    rule = f"must be 1-{MAX_NAME_LENGTH} characters for a lock name, {got}"
    for make in (
        lambda: lock_ids("x" * length),
        lambda: tenure.Lock(store, "x" * length, TTL),
        lambda: store.lock("x" * length),
        lambda: tenure.Leader(store, "x" * length, TTL),
        lambda: tenure.AsyncLock(astore, "x" * length, TTL),
        lambda: astore.elect("x" * length, TTL),
    ):
        with pytest.raises(tenure.InvalidArgument) as caught:
            make()
        assert (caught.value.argument, caught.value.rule) == ("name", rule)
    assert MAX_NAME_LENGTH == 243  # as docs/locks.md says
    assert snapshot(store) == []
