"""The limits of the timeline tokens (sql/_timeline.sql, sql/_next_generation.sql): a job
gets 2^40 claims per timeline. A claim whose generation would reach the next timeline's
base is refused with GenerationExhausted (job, generation, timeline and what to do in the
message), nothing changed; a generation already past it (set by hand, or carried over)
goes on counting, as documented in docs/postgres.md."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tests.backends import POSTGRES

SPAN = 1 << 40  # claims of one job per timeline


def timeline(admin: Any) -> int:
    row = admin.execute("SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)").fetchone()
    return int(row[0], 16)


def test_a_claim_reaching_the_next_timelines_base_is_refused(
    url: str, admin: Any, real_store: tenure.Store
) -> None:
    line = timeline(admin)
    top = line * SPAN - 1  # the last generation this timeline may issue
    real_store.submit("J")
    POSTGRES.set_generation(url, "J", top - 1)
    lease = real_store.claim("J", "A", 30)
    assert lease is not None
    assert lease.generation == top  # the last one is still issued
    real_store.release(lease)
    before = real_store.get("J")
    with pytest.raises(tenure.GenerationExhausted) as caught:
        real_store.claim("J", "B", 30)
    message = str(caught.value)
    assert caught.value.job_id == "J"
    assert caught.value.generation == top
    assert f"generation {top} on PostgreSQL timeline {line}" in message
    assert f"base of timeline {line + 1}" in message
    assert "submit the work again under a new job id" in message
    assert "docs/postgres.md" in message
    after = real_store.get("J")
    assert (after.state, after.generation, after.attempts) == (
        before.state,
        before.generation,
        before.attempts,
    )
    # claim_next runs the same expression: refused the same way, nothing taken.
    with pytest.raises(tenure.GenerationExhausted):
        real_store.claim_next("B", 30)
    assert real_store.get("J").generation == top


def test_a_generation_already_past_the_next_base_goes_on_counting(
    url: str, admin: Any, real_store: tenure.Store
) -> None:
    """Past the crossing (a generation set by hand, or carried over from a later timeline)
    the store issues up to 2^63 - 1 as on any store (tests/conformance), unprotected."""
    line = timeline(admin)
    real_store.submit("J")
    POSTGRES.set_generation(url, "J", line * SPAN + 5)
    lease = real_store.claim("J", "A", 30)
    assert lease is not None
    assert lease.generation == line * SPAN + 6


def test_the_first_claim_on_a_timeline_is_at_least_its_base(
    url: str, admin: Any, real_store: tenure.Store
) -> None:
    line = timeline(admin)
    real_store.submit("J")
    lease = real_store.claim("J", "A", 30)
    assert lease is not None
    assert lease.generation == max(1, (line - 1) * SPAN)
