"""A PostgreSQL store restored from an old dump is noticed (issue #15), on a throwaway server
of the test's own (tests/servers.py): every statement checks that the store's tables are the
ones the client opened (sql/_same_store.sql), and opening the store compares them with what
its first client recorded (sql/store_open.sql). The numbers of jobs done, refused and that
the restored store would run again are asserted."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import tenure
from tests.servers import PostgresServer, postgres_server
from tests.worker._support import run_burst

pytestmark = pytest.mark.slow

psycopg = pytest.importorskip("psycopg")

REFUSED = "no longer the one this client opened"
# What docs/postgres.md ("A store restored from a backup") tells the operator to run.
ACKNOWLEDGE = """
UPDATE {schema}.tenure_jobs SET generation = generation + 1000000000
    WHERE generation < 9223372036854775807 - 1000000000;
DELETE FROM {schema}.tenure_meta WHERE key = 'identity';
"""


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


_schemas = iter(range(1_000_000))


@pytest.fixture
def schema() -> str:
    return f"restore_{next(_schemas)}"


@pytest.fixture
def pg_url(pg: PostgresServer, schema: str) -> str:
    return f"{pg.url}?schema={schema}"


@pytest.fixture
def admin(pg: PostgresServer) -> Iterator[Any]:
    conn = psycopg.connect(pg.url, autocommit=True)
    yield conn
    conn.close()


def table(admin: Any, schema: str) -> list[tuple[Any, ...]]:
    return admin.execute(
        f'SELECT job_id, state, generation, owner, secret_hash FROM "{schema}".tenure_jobs '
        "ORDER BY job_id"
    ).fetchall()


def states(admin: Any, schema: str) -> Counter[str]:
    return Counter(row[1] for row in table(admin, schema))


def claim_and_complete(store: tenure.Store, count: int) -> list[tenure.Lease]:
    done = []
    for _ in range(count):
        lease = store.claim_next("before", ttl=60)
        assert lease is not None
        store.complete(lease)
        done.append(lease)
    return done


def test_a_dump_restored_under_an_open_store_is_refused(
    pg: PostgresServer, pg_url: str, schema: str, admin: Any, tmp_path: Path
) -> None:
    dump = tmp_path / "old.dump"
    store = tenure.connect(pg_url)
    try:
        for index in range(10):
            store.submit(f"job-{index}")
        claim_and_complete(store, 3)
        pg.dump(dump)
        # After the dump: job-3 is claimed twice (generations 1 and 2) and completed,
        # job-4 completed, job-5 left leased to this client.
        first = store.claim_next("after", ttl=60)
        assert first is not None
        assert first.job_id == "job-3"
        store.release(first)
        again = store.claim("job-3", "after", ttl=60)
        assert again is not None
        assert again.generation == 2
        store.complete(again)
        claim_and_complete(store, 1)
        held = store.claim_next("after", ttl=60)
        assert held is not None
        assert held.job_id == "job-5"
        assert states(admin, schema) == {"done": 5, "leased": 1, "ready": 4}

        pg.restore(dump)
        restored = table(admin, schema)
        # The restored store is the dump's: 3 done, 7 ready, job-3 back at generation 0, so
        # its next claims would issue generations 1 and 2 again.
        assert Counter(row[1] for row in restored) == {"done": 3, "ready": 7}
        assert [row[2] for row in restored if row[0] == "job-3"] == [0]
        # What the restored copy would run again: the two jobs completed after the dump,
        # and the one leased then.
        rerun = {row[0] for row in restored if row[1] == "ready"} & {"job-3", "job-4", "job-5"}
        assert rerun == {"job-3", "job-4", "job-5"}

        refused = 0
        for call in (
            lambda: store.claim_next("after", ttl=60),
            lambda: store.complete(held),
            lambda: store.renew(held),
            lambda: store.get("job-3"),
            lambda: store.claim_many("after", ttl=60, limit=5),
            lambda: store.submit("job-new"),
        ):
            with pytest.raises(tenure.StoreLost) as caught:
                call()
            assert REFUSED in str(caught.value)
            assert "pg_restore --clean" in str(caught.value)
            assert "docs/postgres.md" in str(caught.value)
            assert caught.value.outcome_unknown is False
            refused += 1
        assert refused == 6
        # Nothing the refused calls did reached the restored store.
        assert table(admin, schema) == restored
    finally:
        store.close()

    # A client that never saw the old store is told too: the identity its first client
    # recorded (restored with the dump) is not the tables it finds.
    with pytest.raises(tenure.StoreLost, match="is a copy restored from a dump") as caught:
        tenure.connect(pg_url)
    assert "docs/postgres.md" in str(caught.value)
    assert table(admin, schema) == restored

    # The operator's way back (docs/postgres.md): generations moved past any issued, then
    # the store is opened again and hands out generations never seen before.
    admin.execute(ACKNOWLEDGE.format(schema=f'"{schema}"'))
    with tenure.connect(pg_url) as fresh:
        lease = fresh.claim_next("later", ttl=60)
        assert lease is not None
        assert lease.job_id == "job-3"
        assert lease.generation > again.generation
        assert Counter(job.state for job in fresh.jobs(limit=20)) == {
            "done": 3,
            "leased": 1,
            "ready": 6,
        }


def test_a_data_only_restore_is_refused(
    pg: PostgresServer, pg_url: str, schema: str, admin: Any, tmp_path: Path
) -> None:
    dump = tmp_path / "data.dump"
    with tenure.connect(pg_url) as store:
        for index in range(4):
            store.submit(f"job-{index}")
        claim_and_complete(store, 1)
        pg.dump(dump)
        claim_and_complete(store, 2)
        # The tables keep their oids: emptied, then the dump's rows copied back in.
        admin.execute(
            f'TRUNCATE "{schema}".tenure_jobs, "{schema}".tenure_meta, '
            f'"{schema}".tenure_clock, "{schema}".tenure_migrations, "{schema}".tenure_floor, '
            f'"{schema}".tenure_attempts'
        )
        pg.restore_data(dump, schema)
        assert states(admin, schema) == {"done": 1, "ready": 3}
        with pytest.raises(tenure.StoreLost, match=REFUSED):
            store.claim_next("after", ttl=60)
    with pytest.raises(tenure.StoreLost, match="is a copy restored from a dump"):
        tenure.connect(pg_url)
    assert states(admin, schema) == {"done": 1, "ready": 3}


def test_vacuum_full_and_freeze_are_not_a_restore(pg_url: str, schema: str, admin: Any) -> None:
    # Maintenance rewrites the tables (new files) but keeps their oids and row versions.
    with tenure.connect(pg_url) as store:
        store.submit("job")
        for name in ("tenure_jobs", "tenure_meta"):
            admin.execute(f'VACUUM FULL "{schema}".{name}')
            admin.execute(f'VACUUM FREEZE "{schema}".{name}')
        lease = store.claim_next("w", ttl=60)
        assert lease is not None
        store.complete(lease)
    with tenure.connect(pg_url) as again:
        assert again.get("job").state == "done"


JOBS = 600


def test_a_worker_stops_when_its_store_is_restored_from_a_dump(
    pg: PostgresServer,
    pg_url: str,
    schema: str,
    admin: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A burst worker (concurrency 8, TTL 3 s, 5 ms handler) on a store restored from a dump
    taken at the start of its run: it stops at the restore, and writes nothing to the
    restored store."""
    caplog.set_level(logging.INFO, logger="tenure")
    dump = tmp_path / "old.dump"
    with tenure.connect(pg_url) as store:
        for index in range(JOBS):
            store.submit(f"job-{index:05d}")
    pg.dump(dump)
    starts: Counter[str] = Counter()
    worker = tenure.Worker(pg_url, concurrency=8, ttl=3.0, summary_every=0, grace=10)

    @worker.handler("default")
    async def handle(ctx: tenure.JobContext) -> str:
        starts[ctx.job_id] += 1
        await anyio.sleep(0.005)
        return "ok"

    restored: list[list[tuple[Any, ...]]] = []

    def restore_mid_run() -> None:
        deadline = time.monotonic() + 20
        while len(starts) < JOBS // 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        pg.restore(dump)
        restored.append(table(admin, schema))

    thread = threading.Thread(target=restore_mid_run, daemon=True)
    thread.start()
    with pytest.raises(tenure.StoreLost, match=REFUSED):
        run_burst(worker, timeout=60)
    thread.join(30)
    assert restored, "the restore did not happen"
    stats = worker.stats()
    assert JOBS // 4 <= len(starts) < JOBS
    assert stats["in_flight"] == 0
    # The restored store is the dump's (every job ready at generation 0), and the worker
    # wrote nothing into it: every job it ran is one the restored store would run again.
    after = table(admin, schema)
    assert after == restored[0]
    assert {(row[1], row[2]) for row in after} == {("ready", 0)}
    assert sum(starts.values()) == len(starts)  # nothing ran twice before the restore
    errors = [r for r in caplog.records if r.name == "tenure" and r.levelno == logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
