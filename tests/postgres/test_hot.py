"""Renewals are HOT updates on PostgreSQL (issue #18): no index holds a column a renewal
writes (lease_until, available_at, updated_at), and tenure_jobs keeps room on its pages
(fillfactor 85), so a renewal writes no index entry and its old row version is pruned in
place. Measured from pg_stat_user_tables (n_tup_hot_upd / n_tup_upd) over a phase of
renewals alone, on jobs of mixed priorities: one `renew` a lease, and `renew_many` batches
as a worker's keeper sends them.

The server counts a backend's updates when the backend reports its statistics (when it goes
idle, at most once a second, or when it exits): each phase closes its store, whose
connections' backends then exit and report, and the test waits (bounded) until the
counters show every update of the phase.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import tenure
from tenure.stores.postgres._common import render
from tests.backends import POSTGRES_URL, postgres_admin


@pytest.fixture
def database() -> Iterator[str]:
    """A database of the test's own. PostgreSQL prunes a row's old versions only once no
    transaction of the same database can still see them: an open transaction of another
    test (or of another pytest-xdist worker) in the shared database would keep renewals
    from finding room on their page, and the ratio would measure the neighbours."""
    name = f"tenure_hot_{uuid.uuid4().hex[:10]}"
    admin = postgres_admin()
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        yield name
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        admin.close()


def _in(database: str) -> str:
    """POSTGRES_URL with its database replaced."""
    parts = urlsplit(POSTGRES_URL)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture
def url(database: str, schema: str) -> str:
    base = _in(database)
    return f"{base}{'&' if urlsplit(base).query else '?'}schema={schema}"


@pytest.fixture
def admin(database: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(_in(database), autocommit=True) as conn:
        yield conn


JOBS = 120
CLAIMED = 60
RENEWALS = 8  # per lease


def _counts(admin: Any, schema: str) -> tuple[int, int]:
    row = admin.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
        " WHERE schemaname = %s AND relname = 'tenure_jobs'",
        (schema,),
    ).fetchone()
    return int(row[0]), int(row[1])


def _settled(admin: Any, schema: str, updates: int) -> tuple[int, int]:
    """The counters once they show at least ``updates`` updates (within 15 s)."""
    deadline = time.monotonic() + 15
    while True:
        counts = _counts(admin, schema)
        if counts[0] >= updates or time.monotonic() > deadline:
            assert counts[0] >= updates, (counts, updates)
            return counts
        time.sleep(0.05)  # polling the server's statistics, not a wait for correctness


def _renew_each(store: tenure.Store, leases: list[tenure.Lease]) -> list[tenure.Lease]:
    return [store.renew(lease) for lease in leases]


def _renew_in_batches(store: tenure.Store, leases: list[tenure.Lease]) -> list[tenure.Lease]:
    """As a worker's keeper renews: `renew_many`, ten leases a call."""
    renewed: list[tenure.Lease] = []
    for start in range(0, len(leases), 10):
        for answer in store.renew_many(leases[start : start + 10]):
            assert isinstance(answer, tenure.Lease), answer
            renewed.append(answer)
    return renewed


@pytest.mark.parametrize("renew", [_renew_each, _renew_in_batches], ids=["each", "batches"])
def test_renewals_are_hot_updates(
    url: str,
    schema: str,
    admin: Any,
    renew: Callable[[tenure.Store, list[tenure.Lease]], list[tenure.Lease]],
) -> None:
    with tenure.connect(url) as store:
        store.submit_many(
            [{"job_id": f"j{i}", "priority": i % 4 - 1, "payload": {"n": i}} for i in range(JOBS)]
        )
        leases = store.claim_many("w", 60, CLAIMED)
    assert len(leases) == CLAIMED
    claims = _settled(admin, schema, CLAIMED)
    # No autovacuum during the phase: its ANALYZE (due after a few dozen updates) holds a
    # snapshot in this database while it runs, and old row versions cannot be pruned
    # under it; on a loaded machine that window covered most renewals (84 of 480 HOT).
    admin.execute(render("ALTER TABLE {schema}.tenure_jobs SET (autovacuum_enabled = off)", schema))
    with tenure.connect(url) as store:
        for _ in range(RENEWALS):
            leases = renew(store, leases)
    renewed = _settled(admin, schema, claims[0] + CLAIMED * RENEWALS)
    with tenure.connect(url) as store:
        assert store.complete_many(leases) == []
    _settled(admin, schema, renewed[0] + CLAIMED)
    updates, hot = renewed[0] - claims[0], renewed[1] - claims[1]
    ratio = hot / updates
    print(
        f"\nrenewals: {hot} of {updates} updates HOT ({ratio:.1%}); "
        f"claims: {claims[1]} of {claims[0]}"
    )
    assert updates == CLAIMED * RENEWALS
    assert ratio >= 0.9, (hot, updates)
    # And the indexes say why: none of them holds a column a renewal writes.
    defs = [
        row[0]
        for row in admin.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'tenure_jobs'",
            (schema,),
        ).fetchall()
    ]
    for column in ("lease_until", "available_at", "updated_at"):
        assert not any(column in text for text in defs), (column, defs)
    options = admin.execute(
        render(
            "SELECT reloptions FROM pg_class WHERE oid = '{schema}.tenure_jobs'::regclass", schema
        )
    ).fetchone()[0]
    assert "fillfactor=85" in options
