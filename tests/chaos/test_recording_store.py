"""A store opened through the chaos recorder (``chaos+<url>``) answers the optional readers
of its inner driver (the attempt history, the queue counts), so the dashboard a chaos run
prints shows them as for any store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tenure
from tenure._protocol import new_secret
from tenure.chaos._backend import install
from tenure.chaos._context import Context
from tenure.chaos._history import Recorder
from tenure.models import AttemptEnding


def test_the_recording_store_forwards_attempts_and_queue_stats(tmp_path: Path) -> None:
    install(Recorder(tmp_path / "history.jsonl", "test"))
    with tenure.connect(f"chaos+sqlite:///{tmp_path / 'store.db'}") as store:
        store.submit("job-1")
        store.submit("job-2")
        lease = store.claim_next("worker-a", ttl=30)
        assert lease is not None
        store.complete(lease, {"ok": True})
        attempts = store.attempts("job-1")
        assert [(a.generation, a.owner, a.ending) for a in attempts] == [
            (lease.generation, "worker-a", AttemptEnding.COMPLETED)
        ]
        stats = store.queue_stats()
        assert stats is not None
        assert [(q.queue, q.ready, q.leased) for q in stats.queues] == [("default", 1, 0)]


def test_leases_found_after_a_lost_reply_are_recorded_as_granted_earlier(
    tmp_path: Path,
) -> None:
    # A claim whose reply was lost is recovered by its secrets (`find_leases`): the history
    # records the leases as claimed, marked "found", and the checker starts each at its
    # lease_until less the TTL (the lost claim's time), not at the find's store time.
    history = tmp_path / "history.jsonl"
    install(Recorder(history, "w1.1"))
    with tenure.connect(f"chaos+sqlite:///{tmp_path / 'store.db'}") as store:
        store.submit("job-1")
        driver: Any = store._driver
        _, secret_hash = new_secret()
        [claimed] = driver.claim_next("worker-a", 30.0, ["default"], [secret_hash])
        [found] = driver.find_leases("worker-a", 30.0, ["default"], [secret_hash])
        assert found.row.lease_until == claimed.row.lease_until
    events = [json.loads(line) for line in history.read_text().splitlines()]
    granted = [e for e in events if e["f"] == "claim_next" and e["type"] == "ok"]
    assert [[c["found"] for c in e["claims"]] for e in granted] == [[False], [True]]
    ctx = Context(events)
    # One lease, from the claim that granted it (the find is not a second one).
    [interval] = ctx.claims.intervals["job-1"]
    assert interval.start == granted[0]["claims"][0]["store_now"]
    assert interval.until == claimed.row.lease_until


def test_a_found_lease_alone_starts_at_its_lease_until_less_the_ttl(tmp_path: Path) -> None:
    # Without the lost claim's answer (the usual case), the found lease is the only record;
    # the store's clock moved on between the grant and the find.
    history = tmp_path / "history.jsonl"
    install(Recorder(history, "w1.1"))
    store_clock = tenure.ManualClock()
    url = f"chaos+sqlite:///{tmp_path / 'store.db'}"
    with tenure.connect(url, store_clock=store_clock) as store:
        store.submit("job-1")
        driver: Any = store._driver
        _, secret_hash = new_secret()
        [claimed] = driver._inner.claim_next("worker-a", 30.0, ["default"], [secret_hash])
        store_clock.advance(5.0)
        driver.find_leases("worker-a", 30.0, ["default"], [secret_hash])
    events = [json.loads(line) for line in history.read_text().splitlines()]
    [found] = [e for e in events if e["f"] == "claim_next" and e["type"] == "ok"]
    assert found["store_now"] == claimed.now + 5.0
    [interval] = Context(events).claims.intervals["job-1"]
    assert interval.start == claimed.now == claimed.row.lease_until - 30.0
