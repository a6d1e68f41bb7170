"""A PostgreSQL failover never hands out a token twice (issue #16): a primary and a
streaming replica (``pg_basebackup -R``) of the test's own (tests/servers.py), claims on the
primary from several clients, ``kill -9`` of the primary, ``pg_ctl promote`` of the replica.
With asynchronous replication the replica may lack the last generations acknowledged to
the clients; the claims' timeline base (sql/_timeline.sql) puts every generation issued
after the promotion above them all, and the fences then reject the stale holders."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import tenure
from tenure import fence
from tenure.fence import headers as wire
from tests.servers import PostgresServer, postgres_server

pytestmark = pytest.mark.slow

JOBS = [f"job-{n:02d}" for n in range(40)]
CLIENTS = 4
BASE_2 = 1 << 40  # the first generation timeline 2 may issue


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


def multi_host_url(primary: PostgresServer, replica: PostgresServer, schema: str) -> str:
    return (
        f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{replica.port}/postgres"
        f"?target_session_attrs=read-write&schema={schema}&sslmode=disable&gssencmode=disable"
        "&connect_timeout=2"
    )


def wait_replicated(replica: PostgresServer, schema: str, jobs: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(replica.url, autocommit=True) as conn:
                row = conn.execute(f"SELECT count(*) FROM {schema}.tenure_jobs").fetchone()
                if row is not None and row[0] == jobs:
                    return
        except psycopg.Error:
            pass
        assert time.monotonic() < deadline, "the replica did not catch up in 30 s"
        time.sleep(0.05)


def claim_loop(
    url: str, acked: dict[str, int], lock: threading.Lock, stop: threading.Event
) -> None:
    """Claim and release jobs at random until the store fails (the primary's death)."""
    rng = random.Random()
    # A short wait for a pooled connection once the primary is dead: the loop is to end
    # then, not ride the outage (the default 30 s cost this test its longest wait).
    short = f"{url}{'&' if '?' in url else '?'}pool_timeout=2"
    with tenure.connect(short) as store:
        while not stop.is_set():
            job = rng.choice(JOBS)
            try:
                lease = store.claim(job, "loop", ttl=1.0)
                if lease is None:
                    continue
                with lock:
                    acked[job] = max(acked.get(job, 0), lease.token.generation)
                store.release(lease)
            except tenure.TenureError:
                return


def test_generations_after_a_promotion_are_above_all_acknowledged_before(
    pair: tuple[PostgresServer, PostgresServer], tmp_path: Path
) -> None:
    primary, replica = pair
    url = multi_host_url(primary, replica, "failover")
    acked: dict[str, int] = {}
    lock = threading.Lock()
    stop = threading.Event()
    dest = sqlite3.connect(tmp_path / "dest.db", check_same_thread=False)
    app, refused = fenced_app()
    from starlette.testclient import TestClient

    with tenure.connect(url) as store, TestClient(app) as http:
        for job in JOBS:
            store.submit(job, max_attempts=1_000_000)
        wait_replicated(replica, "failover", len(JOBS))
        # The stale holder: a lease of the old primary, its effects accepted before.
        store.submit("stale")
        stale = store.claim("stale", "old-holder", ttl=1.0)
        assert stale is not None
        assert stale.token.generation == 1
        with fence.sql_fence(dest, stale.token) as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS out (g INTEGER)")
        assert fence.apply_once(dest, stale.token, "send:1", lambda cur: None).applied
        assert http.post("/effect", headers=wire.token_headers(stale.token)).status_code == 200

        threads = [
            threading.Thread(target=claim_loop, args=(url, acked, lock, stop), daemon=True)
            for _ in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        primary.kill()
        stop.set()
        for thread in threads:
            thread.join(30)
        assert acked, "no claim was acknowledged before the kill"
        replica.promote()
        with psycopg.connect(replica.url, autocommit=True) as conn:
            kept = dict(
                conn.execute("SELECT job_id, generation FROM failover.tenure_jobs").fetchall()
            )
        lost = {job: acked[job] - kept[job] for job in acked if kept[job] < acked[job]}
        worst = max(lost.values(), default=0)
        print(f"acknowledged generations the replica lacked: {len(lost)} jobs, worst {worst}")

        # The same store object, through the multi-host URL: now on the promoted replica,
        # which is the same store (a physical copy: same oids and xmins), not a restore.
        issued: dict[str, int] = {}
        deadline = time.monotonic() + 60
        pending = set(JOBS)
        while pending:
            assert time.monotonic() < deadline, f"jobs never claimable again: {sorted(pending)}"
            for job in sorted(pending):
                try:
                    lease = store.claim(job, "after", ttl=30.0)
                except tenure.StoreUnavailable:
                    time.sleep(0.1)
                    break
                if lease is None:
                    continue  # a lease of the old primary, running out
                issued[job] = lease.token.generation
                store.complete(lease)
                pending.discard(job)
            else:
                time.sleep(0.05)
        behind = {job: acked[job] for job in acked if acked[job] >= issued[job]}
        assert not behind, f"generations issued again after the promotion: {behind}"
        assert all(generation >= BASE_2 for generation in issued.values())
        assert all(store.get(job).state == "done" for job in JOBS)

        # The stale holder of the old primary's generation, against the new holder's.
        new = None
        while new is None:
            new = store.claim("stale", "new-holder", ttl=30.0)
        assert new.token.generation >= BASE_2 > stale.token.generation
        with fence.sql_fence(dest, new.token) as cur:
            cur.execute("INSERT INTO out VALUES (?)", (new.token.generation,))
        assert fence.apply_once(dest, new.token, "send:2", lambda cur: None).applied
        assert http.post("/effect", headers=wire.token_headers(new.token)).status_code == 200
        with pytest.raises(tenure.StaleToken), fence.sql_fence(dest, stale.token) as cur:
            cur.execute("INSERT INTO out VALUES (?)", (stale.token.generation,))
        with pytest.raises(tenure.StaleToken):
            fence.apply_once(dest, stale.token, "send:3", lambda cur: None)
        late = http.post("/effect", headers=wire.token_headers(stale.token))
        assert late.status_code == 409
        assert len(refused) == 1
        assert dest.execute("SELECT g FROM out").fetchall() == [(new.token.generation,)]
    dest.close()


def fenced_app() -> tuple[object, list[object]]:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tenure.fence.asgi import FenceMiddleware

    refused: list[object] = []

    async def effect(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/effect", effect, methods=["POST"])])
    app.add_middleware(
        FenceMiddleware, on_rejected=lambda rejection, scope: refused.append(rejection)
    )
    return app, refused


def test_a_standby_is_not_opened_as_a_store(
    pair: tuple[PostgresServer, PostgresServer],
) -> None:
    primary, replica = pair
    with tenure.connect(f"{primary.url}?schema=standby&sslmode=disable") as store:
        store.submit("J")
    wait_replicated(replica, "standby", 1)
    with pytest.raises(tenure.StoreUnavailable, match="read-only") as refused:
        tenure.connect(f"{replica.url}?schema=standby&sslmode=disable&auto_migrate=false")
    assert refused.value.outcome_unknown is False


def test_an_unconfirmed_synchronous_commit_is_not_a_success(
    pair: tuple[PostgresServer, PostgresServer],
) -> None:
    """Synchronous replication with the standby down: a commit waits for it without end
    (statement_timeout does not apply); the client cancels it after command_timeout, and
    PostgreSQL then answers as for a success with only a WARNING. The store reports
    StoreUnavailable with the outcome unknown, for a complete (after its retries) and for a
    claim (after its recovery), within a few bounds, and works again once the standby is
    back."""
    primary, replica = pair
    replica.stop()
    url = f"{primary.url}?schema=sync&sslmode=disable&command_timeout=1"
    with tenure.connect(url) as store:
        store.submit("J")
        store.submit("K")
        lease = store.claim("J", "w", ttl=60.0)
        assert lease is not None
        with psycopg.connect(primary.url, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        # A restart rather than a reload: the setting takes effect for commits only once
        # the checkpointer has read it, some time after pg_reload_conf().
        primary.restart()
        try:
            started = time.monotonic()
            with pytest.raises(tenure.StoreUnavailable) as completing:
                store.complete(lease)
            took_complete = time.monotonic() - started
            assert completing.value.outcome_unknown is True
            assert "might not have been replicated" in str(completing.value)
            started = time.monotonic()
            with pytest.raises(tenure.StoreUnavailable) as claiming:
                store.claim("K", "w", ttl=9.0)
            took_claim = time.monotonic() - started
            assert claiming.value.outcome_unknown is True
            print(f"complete refused after {took_complete:.1f} s, claim after {took_claim:.1f} s")
            assert took_complete < 15
            assert took_claim < 15
        finally:
            with psycopg.connect(primary.url, autocommit=True) as admin:
                admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
                admin.execute("SELECT pg_reload_conf()")
        # Replication no longer required: the owed confirmation commits, and the store
        # tells what happened (the complete had committed locally).
        deadline = time.monotonic() + 10
        while True:
            try:
                assert store.get("J").state == "done"
                break
            except tenure.StoreUnavailable:
                assert time.monotonic() < deadline
                time.sleep(0.1)


def test_a_worker_rides_a_failover_through_a_multi_host_url(
    pair: tuple[PostgresServer, PostgresServer],
) -> None:
    """A burst Worker on a multi-host URL (target_session_attrs=read-write); mid-run the
    primary is killed and the replica promoted. The worker reconnects to the new primary
    and finishes every job; no generation of any job was handed to two handler runs."""
    import anyio

    from tests.worker._support import run_burst

    primary, replica = pair
    url = multi_host_url(primary, replica, "worker_failover")
    jobs = 600
    with tenure.connect(url) as store:
        for index in range(jobs):
            store.submit(f"w-{index:04d}", max_attempts=50)
    wait_replicated(replica, "worker_failover", jobs)
    runs: list[tuple[str, int]] = []
    bursts: list[dict[str, float]] = []

    def burst() -> None:
        worker = tenure.Worker(url, concurrency=8, ttl=3.0, summary_every=0, grace=10)

        @worker.handler("default")
        async def handle(ctx: tenure.JobContext) -> str:
            runs.append((ctx.job_id, ctx.token.generation))
            await anyio.sleep(0.005)
            return "ok"

        run_burst(worker, timeout=90)
        bursts.append(worker.stats())

    def fail_over() -> None:
        deadline = time.monotonic() + 10
        while len(runs) < jobs // 3:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        primary.kill()
        replica.promote()

    thread = threading.Thread(target=fail_over, daemon=True)
    thread.start()
    burst()
    thread.join(30)
    # Leases whose settles were lost to the failover are left to expire (no job is
    # stranded): a second burst, once they have, takes those jobs under new generations.
    with tenure.connect(url) as store:
        held = store.jobs(state="leased", limit=jobs)
        if held:
            until = max(job.lease_until or 0.0 for job in held)
            while store.now() <= until:
                time.sleep(0.05)
            burst()
    assert 0 < len({job for job, _ in runs}) <= jobs
    twice = [run for run, count in Counter(runs).items() if count > 1]
    assert twice == [], f"a generation was handed to two runs: {twice[:5]}"
    with tenure.connect(url) as store:
        for state in ("ready", "leased", "dead"):
            assert store.jobs(state=state, limit=10) == [], state
        assert len(store.jobs(state="done", limit=jobs + 1)) == jobs
    after = sum(1 for _, g in runs if g >= BASE_2)
    print(f"runs {len(runs)} for {jobs} jobs, {after} after the promotion, {len(bursts)} bursts")


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
    """The lost-lease path: a worker holds a lease the old primary granted and that never
    reached the replica (its WAL receiver stopped first). After kill -9 of the primary and
    the promotion, the worker's next renewal, on the new primary through the multi-host
    URL, is refused (LeaseLost): its handler sees ctx.lost and stops, the worker does not
    complete it, and the job is claimed again above the old generation (the new
    timeline's base) and done."""
    import anyio

    from tests.worker._support import run_burst

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
