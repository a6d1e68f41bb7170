"""Batch replies (claim_next, complete_many) are one JSON string: nothing may be lost."""

from __future__ import annotations

from typing import Any

import tenure


def test_batch_claim_reply_keeps_every_field(real_store: tenure.Store) -> None:
    # claim_next answers one JSON string for the batch: text with escapes, unicode and
    # absent (null) fields must come back exactly as stored.
    payloads: list[Any] = [None, "", '"\\/\n\u0001\u2028 ✓ 🚀', {"nested": [1.5, None, True]}]
    for number, payload in enumerate(payloads):
        real_store.submit(f"p{number}", payload)
    jobs = real_store.claim_jobs("A", 10, len(payloads))
    assert [job.payload for _, job in jobs] == payloads
    for lease, job in jobs:
        assert (job.state, job.owner, job.generation, job.attempts) == ("leased", "A", 1, 1)
        assert job.lease_until is not None
        assert job.result is None
        assert job.error is None
        assert lease.generation == 1
