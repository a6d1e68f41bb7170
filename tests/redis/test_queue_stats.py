"""Redis's per-queue bookkeeping (issue #20): each queue's leases set and the known queues,
what `queue_stats` and the queue limit read; what an exhausted generation does to them, the
known queues' upkeep, and the index built for a store of an older layout when it is first
opened (layout 3)."""

from __future__ import annotations

from typing import Any

import tenure
from tenure.stores.redis import Keys
from tests.backends import REDIS
from tests.conformance._support import counted_stats, recomputed_stats

MAX = 2**63 - 1


def test_an_expired_lease_at_the_top_generation_stays_counted(
    store: tenure.Store, clock: tenure.ManualClock, url: str
) -> None:
    store.submit("J")
    store.submit("K")
    REDIS.set_generation(url, "J", MAX - 1)
    assert store.claim("J", "A", 1) is not None  # generation MAX: never claimable again
    clock.advance(2)
    other = store.claim_next("B", 10)  # drops J from its candidate set, takes K
    assert other is not None
    assert other.job_id == "K"
    assert counted_stats(store)["default"][:4] == (0, 0, 1, 1)  # J: leased, expired
    assert counted_stats(store) == recomputed_stats(store)
    store.cancel("J")
    assert counted_stats(store) == recomputed_stats(store)


def test_a_queue_without_live_jobs_leaves_the_known_queues(
    store: tenure.Store, raw: Any, prefix: str
) -> None:
    keys = Keys(prefix)
    store.submit("J", queue="once")
    lease = store.claim("J", "A", 10)
    assert lease is not None
    store.complete(lease)
    assert raw.hexists(keys.queues, keys.candidates("once"))
    assert counted_stats(store) == {}
    assert not raw.hexists(keys.queues, keys.candidates("once"))  # queue_stats left it out
    store.requeue("J")
    assert counted_stats(store) == recomputed_stats(store) != {}


def test_opening_an_older_store_indexes_its_leases(
    store: tenure.Store,
    open_store: Any,
    clock: tenure.ManualClock,
    raw: Any,
    prefix: str,
) -> None:
    keys = Keys(prefix)
    store.set_queue_limit("limited", 3)
    for n in range(5):
        store.submit(f"L{n}", queue="limited")
        store.submit(f"F{n}", queue="free", priority=n - 2)
    held = [store.claim_next("A", 10, queues=["limited"]) for _ in range(3)]
    assert all(held)
    assert store.claim("F0", "A", 1) is not None
    done = store.claim("F1", "A", 10)
    assert done is not None
    store.complete(done)
    clock.advance(2)  # F0's lease expired
    expected = recomputed_stats(store)
    assert counted_stats(store) == expected
    # What a layout-2 store has: no leases sets, no known queues.
    raw.delete(keys.queues, *raw.keys("{" + prefix + "}:q:*:leased"))
    raw.hset(keys.meta, "layout", "2")
    assert store.claim_next("B", 10, queues=["limited"]) is not None  # counts nothing: over

    newer = open_store()
    assert raw.hget(keys.meta, "layout") == b"3"
    expected = recomputed_stats(newer)
    assert counted_stats(newer) == expected
    assert expected["limited"][2] == 4
    assert newer.claim_next("B", 10, queues=["limited"]) is None  # 4 held, limit 3


def test_the_sets_a_claim_writes_are_skiplists_from_32_members(
    store: tenure.Store, raw: Any, prefix: str
) -> None:
    # A listpack's ZADD reads every entry before it: at the 100-128 leases a fleet of that
    # many slots holds, each claim's ZADD cost the server 10-20 us more than a skiplist's;
    # a candidate set under 128 jobs likewise.
    candidates = Keys(prefix).candidates("default")
    leases = candidates + ":leased"
    store.submit_many([{"job_id": f"J{n}"} for n in range(80)])
    first = store.claim_jobs("A", 10, 3)
    # Small sets stay listpacks (a queue running a job now and then makes them often).
    assert raw.object("encoding", leases) == b"listpack"
    more = store.claim_jobs("A", 10, 40)  # the candidate set of 80: made a skiplist
    assert raw.object("encoding", candidates) == b"skiplist"
    assert raw.object("encoding", leases) == b"listpack"  # 3 members when this claim began
    store.renew(first[0][0], 10)  # 43 members: made a skiplist
    assert raw.object("encoding", leases) == b"skiplist"
    # Nothing but the leases is left in it, and nothing but the jobs in the candidate set.
    held = sorted(lease.job_id for lease, _ in first + more)
    assert sorted(member[16:].decode() for member in raw.zrange(leases, 0, -1)) == held
    assert raw.zcard(candidates) == 80
    # Emptied, Redis deletes the set; made again and grown, it is a skiplist again.
    assert store.complete_many([lease for lease, _ in first + more]) == []
    assert not raw.exists(leases)
    again = store.claim_jobs("A", 10, 33)
    assert raw.object("encoding", leases) == b"listpack"
    store.renew(again[0][0], 10)
    assert raw.object("encoding", leases) == b"skiplist"
    assert raw.zcard(leases) == 33
    assert counted_stats(store) == recomputed_stats(store)
