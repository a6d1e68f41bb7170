"""The lost-lease path of a PostgreSQL failover (issue #16): a worker holds a lease that
the old primary granted and that never reached the replica (its WAL receiver stopped
first, so the claim did not replicate: asynchronous replication at its worst). The
primary is killed with kill -9 and the replica promoted. The worker's next renewal, on the
new primary through the multi-host URL, is refused (LeaseLost): its handler sees
``ctx.lost`` and stops, the worker does not complete it, and the job is not stranded: it
is claimed again on the new primary at a generation above the old one (the new
timeline's base) and done."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import anyio
import psycopg
import pytest

import tenure
from tests.postgres.test_failover import BASE_2, multi_host_url, wait_replicated
from tests.servers import PostgresServer, postgres_server
from tests.worker._support import run_burst

pytestmark = pytest.mark.slow


@pytest.fixture
def pair() -> Iterator[tuple[PostgresServer, PostgresServer]]:
    with postgres_server() as primary:
        replica = PostgresServer()
        try:
            replica.init_replica(primary)
            replica.start()
            yield primary, replica
        finally:
            replica.destroy()


def stop_wal_receiver(replica: PostgresServer) -> None:
    """Cut the replica off its primary: no more WAL arrives (primary_conninfo emptied and
    reloaded ends the WAL receiver)."""
    with psycopg.connect(replica.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET primary_conninfo = ''")
        conn.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 20
        while conn.execute("SELECT count(*) FROM pg_stat_wal_receiver").fetchone() != (0,):
            assert time.monotonic() < deadline, "the WAL receiver did not stop in 20 s"
            time.sleep(0.05)


def test_a_lease_the_promoted_replica_never_saw_is_lost_and_the_job_runs_again(
    pair: tuple[PostgresServer, PostgresServer],
) -> None:
    primary, replica = pair
    url = multi_host_url(primary, replica, "lost_lease")
    with tenure.connect(url) as store:
        store.submit("J", max_attempts=5)
    wait_replicated(replica, "lost_lease", 1)
    stop_wal_receiver(replica)

    runs: list[tuple[int, bool]] = []  # (generation, saw its lease lost)
    first_started = threading.Event()
    worker = tenure.Worker(url, concurrency=1, ttl=3.0, summary_every=0, grace=10)

    @worker.handler("default")
    async def handle(ctx: tenure.JobContext) -> str:
        generation = ctx.token.generation
        try:
            if generation < BASE_2:  # the old primary's lease: hold it until it is lost
                first_started.set()
                deadline = time.monotonic() + 30
                while not ctx.lost and time.monotonic() < deadline:  # noqa: ASYNC110
                    await anyio.sleep(0.05)  # (ctx.lost is a property, not an event)
        finally:  # (the worker may cancel a handler whose lease is lost)
            runs.append((generation, ctx.lost))
        return "ok"

    def fail_over() -> None:
        assert first_started.wait(30), "the worker never started the job"
        primary.kill()
        replica.promote()

    thread = threading.Thread(target=fail_over, daemon=True)
    thread.start()
    run_burst(worker, timeout=90)
    thread.join(30)

    assert len(runs) == 2, runs
    (old, lost), (new, lost_again) = runs
    assert old < BASE_2, runs  # the old primary's lease...
    assert lost, runs  # ...lost after the promotion
    assert new >= BASE_2, runs  # claimed again on the new timeline, above the old one
    assert not lost_again, runs
    stats = worker.stats()
    assert stats["leases_lost"] >= 1, stats
    with tenure.connect(url) as store:
        job = store.get("J")
        assert job.state == "done"
        assert job.generation == new
        assert store.jobs(state="leased", limit=5) == []
