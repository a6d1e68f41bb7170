"""Every guard refuses to act for a lease the worker runtime has marked lost.

A real `tenure.Worker` runs a handler on a ManualClock; the test moves the clock past the
lease's local deadline while the handler waits, so the worker decides the lease is lost.
The handler then tries every guard of `tenure.fence`: each raises `LeaseLost`, and nothing
reaches a destination.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence

TTL = 10.0


def test_guards_refuse_a_lost_lease(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    from tenure.fence.http import TenureAuth

    url = f"sqlite:///{tmp_path / 'store.db'}"
    dest_path = tmp_path / "dest.db"
    clock = tenure.ManualClock()
    started, advanced = threading.Event(), threading.Event()
    outcomes: dict[str, str] = {}
    sent: list[Any] = []

    def attempt(name: str, action: Any) -> None:
        try:
            action()
        except tenure.LeaseLost:
            outcomes[name] = "LeaseLost"
        except Exception as exc:  # pragma: no cover - shows up in the assertion
            outcomes[name] = f"{type(exc).__name__}: {exc}"
        else:
            outcomes[name] = "acted"

    worker = tenure.Worker(url, ttl=TTL, clock=clock, store_clock=clock, poll_interval=0.05)

    @worker.handler("default")
    def handle(ctx: tenure.JobContext) -> None:
        if outcomes:
            return  # the job's next attempt (its lease expired): just finish
        started.set()
        advanced.wait(timeout=30)
        dest = sqlite3.connect(dest_path)
        store = tenure.connect(url, clock=clock, store_clock=clock)
        client = httpx.Client(
            transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200)),
            auth=TenureAuth(ctx),
        )
        try:
            attempt("context", ctx.check)
            attempt("sql_fence", lambda: fence.sql_fence(dest, ctx.lease).__enter__())
            attempt("apply_once", lambda: fence.apply_once(dest, ctx, "k", lambda cur: None))
            attempt("advance_fence", lambda: fence.advance_fence(dest, ctx.token))
            attempt("record_effect", lambda: fence.record_effect(dest, ctx.token, "k"))
            attempt("complete_with", lambda: fence.complete_with(store, ctx.lease).__enter__())
            attempt("http", lambda: client.post("http://sink/records", json={}))
        finally:
            client.close()
            store.close()
            dest.close()

    with tenure.connect(url, clock=clock, store_clock=clock) as store:
        store.submit("job-1")
    runner = threading.Thread(target=lambda: worker.run(burst=True))
    runner.start()
    assert started.wait(timeout=30), "the handler never started"
    clock.advance(3 * TTL)  # the worker's local deadline passes: the lease is lost
    advanced.set()
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert outcomes == dict.fromkeys(
        [
            "context",
            "sql_fence",
            "apply_once",
            "advance_fence",
            "record_effect",
            "complete_with",
            "http",
        ],
        "LeaseLost",
    )
    assert sent == []
    with sqlite3.connect(dest_path) as conn:
        assert fence.fence_generation(conn, "job-1") is None  # nothing touched the fence


def test_a_loss_during_the_block_stops_the_commit(tmp_path: Path) -> None:
    """The guards ask again just before committing: work that was under way when the
    worker decided the loss is rolled back instead of committed."""
    from tenure.worker._lease import REGISTRY, LeaseHandle

    clock = tenure.ManualClock()
    with tenure.connect(f"sqlite:///{tmp_path / 's.db'}", clock=clock, store_clock=clock) as store:
        store.submit("j")
        lease = store.claim("j", "A", TTL)
        assert lease is not None
        handle = LeaseHandle(lease, clock)
        REGISTRY.add(handle)
        dest = sqlite3.connect(tmp_path / "dest.db")
        dest.execute("CREATE TABLE t (x INTEGER)")
        dest.commit()
        try:
            with pytest.raises(tenure.LeaseLost), fence.sql_fence(dest, lease) as cur:  # noqa: PT012
                cur.execute("INSERT INTO t VALUES (1)")
                handle.mark_lost("renewal rejected (test)", "renewal_rejected")
            with pytest.raises(tenure.LeaseLost), fence.complete_with(store, lease) as done:
                done.result = "never"
            assert dest.execute("SELECT count(*) FROM t").fetchone() == (0,)
            assert fence.fence_generation(dest, "j") is None
            assert store.get("j").state == "leased"
        finally:
            REGISTRY.end(handle, "lost")
            dest.close()


def test_two_stores_jobs_with_one_id_and_generation_are_told_apart(tmp_path: Path) -> None:
    """The worker registry of the process remembers a lease of store A that ended; the same
    job id at the same generation in store B is no business of it."""
    from tenure.worker import check_token, token_state
    from tenure.worker._lease import REGISTRY, LeaseHandle

    clock = tenure.ManualClock()
    job_id = "registry-twin"
    with (
        tenure.connect(f"sqlite:///{tmp_path / 'a.db'}", clock=clock, store_clock=clock) as a,
        tenure.connect(f"sqlite:///{tmp_path / 'b.db'}", clock=clock, store_clock=clock) as b,
    ):
        a.submit(job_id)
        b.submit(job_id)
        lease_a, lease_b = a.claim(job_id, "A", TTL), b.claim(job_id, "B", TTL)
        assert lease_a is not None
        assert lease_b is not None
        # One value on the wire and in comparisons; the store rides along in the process.
        assert lease_a.token == lease_b.token == tenure.FencingToken(job_id, 1)
        assert str(lease_a.token) == str(lease_b.token) == f"1:{job_id}"
        assert (lease_a.token.store_id, lease_b.token.store_id) == (a.store_id, b.store_id)
        assert a.store_id != b.store_id
        assert tenure.FencingToken.parse(str(lease_a.token)).store_id is None
        wire = tenure.FencingToken(job_id, 1)  # no store: judged by live handles only

        handle = LeaseHandle(lease_a, clock)
        REGISTRY.add(handle)
        try:
            assert (token_state(lease_a), token_state(lease_b), token_state(wire)) == (
                "held",
                "unknown",
                "held",
            )
            handle.mark_lost("renewal rejected (test)", "renewal_rejected")
            assert (token_state(lease_a), token_state(lease_b), token_state(wire)) == (
                "lost",
                "unknown",
                "lost",
            )
        finally:
            REGISTRY.end(handle, "lost")
        assert (token_state(lease_a), token_state(lease_b), token_state(wire)) == (
            "lost",
            "unknown",
            "unknown",
        )
        with pytest.raises(tenure.LeaseLost):
            check_token(lease_a)
        check_token(lease_b)  # store B's lease: left to its destination's fence
        dest = sqlite3.connect(tmp_path / "dest.db")
        try:
            effect = fence.apply_once(dest, lease_b, "k", lambda cur: "sent")
            assert effect.applied
            with pytest.raises(tenure.LeaseLost):
                fence.apply_once(dest, lease_a, "k2", lambda cur: "never")
        finally:
            dest.close()
