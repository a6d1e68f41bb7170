"""Redis keeps one candidate set per (queue, priority) (issue #18, docs/redis.md): priority
0 in the queue's own set, others in {P}:q:<queue>:p:<priority>, listed by priority in
{P}:q:<queue>:pri; a set that emptied leaves that list at the next claim that meets it. A
job hash written before priorities (no `pr` field) is priority 0."""

from __future__ import annotations

from typing import Any

import tenure


def test_priority_sets_and_their_list(real_store: tenure.Store, raw: Any, prefix: str) -> None:
    tag = "{" + prefix + "}"
    real_store.submit("zero")
    real_store.submit("three", priority=3)
    real_store.submit("minus", priority=-2)
    assert raw.zrange(f"{tag}:q:default", 0, -1) != []
    assert raw.zrange(f"{tag}:q:default:pri", 0, -1, withscores=True) == [
        (f"{tag}:q:default:p:-2".encode(), -2.0),
        (f"{tag}:q:default:p:3".encode(), 3.0),
    ]
    lease = real_store.claim_next("w", 30)
    assert lease is not None
    assert lease.job_id == "three"
    real_store.complete(lease)
    assert raw.exists(f"{tag}:q:default:p:3") == 0  # Redis deleted the emptied set
    assert [x.job_id for x in real_store.claim_many("w", 30, 10)] == ["zero", "minus"]
    assert raw.zrange(f"{tag}:q:default:pri", 0, -1) == [f"{tag}:q:default:p:-2".encode()]


def test_a_job_written_before_priorities_is_priority_0(
    real_store: tenure.Store, raw: Any, prefix: str
) -> None:
    tag = "{" + prefix + "}"
    real_store.submit("old")
    raw.hdel(f"{tag}:j:old", "pr")  # as a tenure before issue #18 wrote it
    real_store.submit("high", priority=1)
    real_store.submit("low", priority=-1)
    assert (real_store.get("old").priority, real_store.get("old").timeout) == (0, None)
    assert [x.job_id for x in real_store.claim_many("w", 30, 10)] == ["high", "old", "low"]
