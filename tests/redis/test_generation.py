"""Generations are HINCRBY integers compared as strings, exact up to 2**63-1."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tenure.stores.redis import Keys
from tests.backends import REDIS

MAX = 2**63 - 1


@pytest.mark.parametrize("start", [2**53 - 1, 2**53, 2**62 + 12345, MAX - 2])
def test_generations_beyond_double_precision(
    real_store: tenure.Store, url: str, raw: Any, prefix: str, start: int
) -> None:
    real_store.submit("J")
    REDIS.set_generation(url, "J", start)
    first = real_store.claim("J", "A", 10)
    assert first is not None
    assert first.generation == start + 1
    # A neighbouring generation (equal as a double) must not pass for the current one.
    real_store.renew(first)
    real_store.release(first)
    second = real_store.claim_next("B", 10)
    assert second is not None
    assert second.generation == start + 2
    assert raw.hget(Keys(prefix).job("J"), "g") == str(start + 2).encode()
    with pytest.raises(tenure.LeaseLost):
        real_store.complete(first)
    real_store.complete(second)
    assert real_store.get("J").generation == start + 2


def test_top_generation_refuses_claims(real_store: tenure.Store, url: str) -> None:
    real_store.submit("J")
    real_store.submit("K")
    REDIS.set_generation(url, "J", MAX - 1)
    lease = real_store.claim("J", "A", 10)
    assert lease is not None
    assert lease.generation == MAX
    real_store.release(lease)
    with pytest.raises(tenure.GenerationExhausted):
        real_store.claim("J", "B", 10)
    # claim_next passes over it (and drops it from the candidate set) to the next job.
    other = real_store.claim_next("B", 10)
    assert other is not None
    assert other.job_id == "K"
    assert real_store.claim_next("B", 10) is None
    assert real_store.get("J").generation == MAX
