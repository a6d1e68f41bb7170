"""A Redis that lost its data is noticed by every client that was connected to it.

On a throwaway ``redis-server`` of the test's own (tests/servers.py), restarted or killed
with ``kill -9``: with an fsync-always append-only file the store survives and work goes on;
without persistence the server comes back empty, and the old clients refuse to go on
instead of issuing generation 1 again (docs/redis.md, "A store that lost its data").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import tenure
from tests.servers import RedisServer, redis_server


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path / "durable", persistent=True) as server:
        yield server


@pytest.fixture
def forgetful(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path / "forgetful", persistent=False) as server:
        yield server


def _held(store: tenure.Store) -> tenure.Lease:
    store.submit("J")
    lease = store.claim("J", "w1", 30)
    assert lease is not None
    return lease


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_a_durable_store_survives_a_restart_and_a_kill(durable: RedisServer, how: str) -> None:
    with tenure.connect(durable.url) as store:
        lease = _held(store)
        store.submit("K")
        durable.restart() if how == "restart" else (durable.kill(), durable.start())
        lease = store.renew(lease)  # the client reconnects by itself
        store.complete(lease, "done")
        assert store.get("J").state == "done"
        taken = store.claim("K", "w1", 30)
        assert taken is not None
        assert taken.generation == 1
    # A fresh client sees the same store: same id, same generations.
    with tenure.connect(durable.url) as again:
        assert again.store_id == store.store_id
        assert again.get("J").generation == 1


def test_a_store_that_came_back_empty_is_refused_by_its_old_clients(
    forgetful: RedisServer,
) -> None:
    store = tenure.connect(forgetful.url)
    lease = _held(store)
    forgetful.restart()  # no persistence: the server is empty now
    raw = redis.Redis.from_url(forgetful.url)
    calls = {
        "renew": lambda: store.renew(lease),
        "complete": lambda: store.complete(lease),
        "submit": lambda: store.submit("J"),
        "claim": lambda: store.claim("J", "w2", 30),
        "claim_next": lambda: store.claim_next("w2", 30),
        "get": lambda: store.get("J"),
        "now": store.now,
    }
    for name, call in calls.items():
        with pytest.raises(tenure.StoreLost) as caught:
            call()
        message = str(caught.value)
        assert "no longer holds the store this client opened" in message, name
        assert "refuses to go on" in message
        assert "nothing changed" in message
        assert caught.value.outcome_unknown is False
        assert raw.dbsize() == 0, f"{name} wrote to the empty server"
    # A client that connects now makes a new store: it cannot know what the old one issued
    # (the documented limit), and the old lease is not one of its leases.
    with tenure.connect(forgetful.url) as fresh:
        assert fresh.store_id != store.store_id
        with pytest.raises(tenure.InvalidArgument, match="store_id"):
            fresh.renew(lease)
    # The old client still refuses, though the keyspace has a store again.
    with pytest.raises(tenure.StoreLost, match="no longer holds"):
        store.claim_next("w1", 30)
    store.close()
    raw.close()


def test_a_layout_1_store_is_moved_to_the_current_layout_on_connect(
    durable: RedisServer,
) -> None:
    raw = redis.Redis.from_url(durable.url, decode_responses=True)
    # What tenure with key layout 1 left behind: the clock under its old name.
    raw.hset("{tenure}:meta", mapping={"store_id": "old-store", "layout": "1"})
    raw.set("{tenure}:clock", "1700000000.5")
    with tenure.connect(durable.url) as store:
        assert store.store_id == "old-store"
        assert raw.get("{tenure}:clock") is None
        assert raw.get("{tenure}:clock:old-store") is not None
        assert raw.hget("{tenure}:meta", "layout") == "3"  # 2, then 3 (issue #20)
        assert store.now() >= 1700000000.5  # the floor came along
    raw.close()
