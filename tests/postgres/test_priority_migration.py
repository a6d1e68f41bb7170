"""PostgreSQL schema 6 (issue #18): a version-5 store with jobs in every state upgrades in
place. Its jobs get priority 0 and no timeout of their own, the generated run_at and
finished_at are filled from each row, and claims, purge and new priorities work on them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tenure
from tenure.stores.postgres._common import render, sql_text
from tenure.stores.postgres._migrate import migrate
from tenure.stores.postgres._migrations import _all_migrations
from tests.backends import POSTGRES_URL, postgres_schema, postgres_schema_url


@pytest.fixture
def version_5() -> Iterator[tuple[Any, str]]:
    """A schema as tenure with migrations 1-5 left it, with a job in each state."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin, postgres_schema("tp") as schema:
        known = _all_migrations()
        assert [m.name for m in known][7] == "0008_priorities.sql"
        with admin.transaction():
            admin.execute(render(sql_text("migrate_schema"), schema).encode())
            admin.execute(render(sql_text("migrate_bookkeeping"), schema).encode())
            for step in known[:5]:
                admin.execute(render(step.text, schema).encode())
                record = render(
                    sql_text("migrate_record"),
                    schema,
                    version=str(step.version),
                    name=f"'{step.name}'",
                )
                admin.execute(record.encode())
            admin.execute(
                render(
                    "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, owner, generation,"
                    " lease_until, available_at, attempts, max_attempts, created_at, updated_at)"
                    " VALUES ('old-ready', 'default', 'ready', NULL, 0, NULL, 10, 0, 5, 1, 1),"
                    " ('old-later', 'default', 'ready', NULL, 0, NULL, 20, 0, 5, 2, 2),"
                    " ('old-leased', 'default', 'leased', 'w', 1, 30, 30, 1, 5, 3, 3),"
                    " ('old-done', 'default', 'done', 'w', 1, NULL, 40, 1, 5, 4, 4)",
                    schema,
                ).encode()
            )
        yield admin, schema


def test_a_version_5_store_upgrades_to_priorities(version_5: tuple[Any, str]) -> None:
    admin, schema = version_5
    assert migrate(admin, schema) == [
        "0006_schedules.sql",
        "0007_unique_jobs.sql",
        "0008_priorities.sql",
        "0009_queue_limits.sql",
        "0010_headers.sql",
        "0011_queue_rates.sql",
        "0012_triggers_per_statement.sql",
        "0013_lease_min_end.sql",
        "0014_plans_whatever_the_statistics.sql",
        "0015_batches_in_linear_time.sql",
    ]
    rows = admin.execute(
        render(
            "SELECT job_id, priority, timeout, run_at, finished_at FROM {schema}.tenure_jobs"
            " ORDER BY job_id",
            schema,
        ).encode()
    ).fetchall()
    assert rows == [
        ("old-done", 0, None, None, 4.0),
        ("old-later", 0, None, 20.0, None),
        ("old-leased", 0, None, None, None),
        ("old-ready", 0, None, 10.0, None),
    ]
    with tenure.connect(postgres_schema_url(schema)) as store:
        assert (store.get("old-ready").priority, store.get("old-ready").timeout) == (0, None)
        assert store.get("old-ready").headers == {}  # migration 0010: none
        store.submit("new-high", priority=3, timeout=2.0)
        store.submit("new-zero")
        claimed = [lease.job_id for lease in store.claim_many("w2", 30, 10)]
        # the old lease (its end, 30, is long past by the server's clock) is claimable too
        assert claimed == ["new-high", "old-ready", "old-later", "old-leased", "new-zero"]
        assert store.purge(states=("done",), older_than=0) == 1
