"""A store opened through the chaos recorder (``chaos+<url>``) answers the optional readers
of its inner driver (the attempt history, the queue counts), so the dashboard a chaos run
prints shows them as for any store."""

from __future__ import annotations

from pathlib import Path

import tenure
from tenure.chaos._backend import install
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
