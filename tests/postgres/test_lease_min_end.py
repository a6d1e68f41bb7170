"""The earliest end of a lease on PostgreSQL (migration 0013): the key of the index a claim's
expired-lease path walks. A claim sets it to the lease's end, an ordinary renewal leaves it
(so the renewal stays HOT), a shortening one lowers it, and no job is leased without it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import tenure


def _lease_min_end(admin: Any, schema: str, job_id: str) -> float:
    row = admin.execute(
        f'SELECT lease_min_end FROM "{schema}".tenure_jobs WHERE job_id = %s', (job_id,)
    ).fetchone()
    assert row is not None
    return float(row[0])


def test_claims_set_it_and_only_a_shorter_renewal_lowers_it(
    url: str, schema: str, admin: Any
) -> None:
    with tenure.connect(url) as store:
        store.submit("J")
        lease = store.claim_next("A", 60)
        assert lease is not None
        assert _lease_min_end(admin, schema, "J") == lease.lease_until
        renewed = store.renew(lease, 60)  # later than the first end: left as it was
        assert renewed.lease_until > lease.lease_until
        assert _lease_min_end(admin, schema, "J") == lease.lease_until
        shortened = store.renew(renewed, 5)
        assert _lease_min_end(admin, schema, "J") == shortened.lease_until
        lengthened = store.renew(shortened, 60)
        assert _lease_min_end(admin, schema, "J") == shortened.lease_until
        store.complete(lengthened)
        store.submit("K")
        again = store.claim("K", "B", 30)
        assert again is not None
        assert _lease_min_end(admin, schema, "K") == again.lease_until


def test_a_job_cannot_be_leased_without_it(url: str, schema: str, admin: Any) -> None:
    with tenure.connect(url) as store:
        store.submit("J")
    with pytest.raises(psycopg.errors.CheckViolation, match="tenure_jobs_lease_min_end_check"):
        admin.execute(
            f'UPDATE "{schema}".tenure_jobs SET state = %s, owner = %s, generation = 1, '
            "lease_until = available_at + 30, available_at = available_at + 30 "
            "WHERE job_id = %s",
            ("leased", "someone", "J"),
        )
    with tenure.connect(url) as store:
        assert store.get("J").state == "ready"
