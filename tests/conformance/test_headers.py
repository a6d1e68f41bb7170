"""A job's headers on every store (issue #20): what submit, submit_many (each job its own)
and submit in the caller's transaction store comes back on every snapshot and through
every state change (claim, fail, complete, cancel, requeue), an existing job keeps its
own, and bad headers are refused with nothing stored."""

from __future__ import annotations

import pickle
import sqlite3
from typing import Any

import psycopg
import pytest

import tenure
import tenure.aio
from tests.backends import POSTGRES_URL, Backend, sqlite_path
from tests.conformance._support import snapshot

TRACE = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
}


def test_headers_come_back_on_every_snapshot_and_state_change(store: tenure.Store) -> None:
    submitted = store.submit("J", {"n": 1}, headers=TRACE, max_attempts=3)
    assert submitted.headers == TRACE
    assert isinstance(submitted.headers, tenure.models.JobHeaders)
    [(lease, claimed)] = store.claim_jobs("W", 10, queues=["default"], limit=1)
    assert (claimed.job_id, claimed.headers) == ("J", TRACE)
    store.fail(lease, "boom", retry_in=0)  # retried: ready again, headers kept
    assert store.get("J").headers == TRACE
    [(lease, again)] = store.claim_jobs("W", 10, queues=["default"], limit=1)
    assert (again.job_id, again.generation, again.headers) == ("J", 2, TRACE)
    store.complete(lease, "ok")
    done = store.get("J")
    assert (done.state, done.headers) == ("done", TRACE)
    requeued = store.requeue("J")
    assert (requeued.state, requeued.headers) == ("ready", TRACE)
    assert store.cancel("J").headers == TRACE
    assert store.submit("plain").headers == {}
    assert {job.job_id: job.headers for job in store.jobs()} == {"J": TRACE, "plain": {}}
    assert store.get("J").to_dict()["headers"] == TRACE
    # An existing id keeps its own headers: submit changes nothing on it.
    repeat = store.submit("J", headers={"traceparent": "other"})
    assert (repeat.created, repeat.headers) == (False, TRACE)
    # A job goes to a handler's own process pickled: its headers too.
    assert pickle.loads(pickle.dumps(store.get("J"))).headers == TRACE


def test_submit_many_stores_each_jobs_own_headers(store: tenure.Store) -> None:
    jobs = store.submit_many(
        [
            {"job_id": "a", "headers": {"traceparent": "a"}},
            tenure.JobSpec("b"),
            tenure.JobSpec("c", headers={"x-tenant": "é unicode", "empty": ""}),
            {"job_id": "d", "headers": {}},
        ]
    )
    expected = {"a": {"traceparent": "a"}, "b": {}, "c": {"x-tenant": "é unicode", "empty": ""}}
    expected["d"] = {}
    assert {job.job_id: job.headers for job in jobs} == expected
    assert {job.job_id: job.headers for job in store.jobs()} == expected
    # Unique keys take their own statements (SQL) or branch (Lua): headers there too.
    keyed = store.submit("k1", headers={"h": "1"}, unique_key="k")
    [k2, k3] = store.submit_many(
        [
            {"job_id": "k2", "unique_key": "k", "headers": {"h": "2"}},
            {"job_id": "k3", "unique_key": "other", "headers": {"h": "3"}},
        ]
    )
    assert (keyed.headers, k2.job_id, k2.headers, k3.headers) == (
        {"h": "1"},
        "k1",
        {"h": "1"},
        {"h": "3"},
    )
    assert store.get("k3").headers == {"h": "3"}


@pytest.mark.anyio
async def test_async_submit_with_headers(astore: tenure.aio.AsyncStore) -> None:
    job = await astore.submit("a", headers={"k": "v"})
    [batch] = await astore.submit_many([{"job_id": "b", "headers": {"k": "w"}}])
    assert (job.headers, batch.headers) == ({"k": "v"}, {"k": "w"})
    assert (await astore.get("b")).headers == {"k": "w"}


def _own_connection(backend: Backend, url: str) -> Any:
    if backend.name == "sqlite":
        return sqlite3.connect(sqlite_path(url), timeout=10)
    return psycopg.connect(POSTGRES_URL)


def test_headers_submitted_in_your_transaction(
    backend: Backend, url: str, real_store: tenure.Store
) -> None:
    if backend.name == "redis":  # no transaction to share: refused, nothing stored
        with pytest.raises(tenure.InvalidArgument) as refused:
            real_store.submit("a", headers={"k": "a"}, conn=object())
        assert refused.value.argument == "conn"
        with pytest.raises(tenure.InvalidArgument):
            real_store.submit_many([{"job_id": "b", "headers": {"k": "b"}}], conn=object())
        assert list(real_store.jobs()) == []
        return
    conn = _own_connection(backend, url)
    try:
        job = real_store.submit("a", headers={"k": "a"}, conn=conn)
        [b, c] = real_store.submit_many(
            [
                {"job_id": "b", "headers": {"k": "b"}},
                {"job_id": "c", "unique_key": "u", "headers": {"k": "c"}},
            ],
            conn=conn,
        )
        conn.commit()
    finally:
        conn.close()
    assert (job.headers, b.headers, c.headers) == ({"k": "a"}, {"k": "b"}, {"k": "c"})
    assert {j.job_id: j.headers for j in real_store.jobs()} == {
        "a": {"k": "a"},
        "b": {"k": "b"},
        "c": {"k": "c"},
    }


# -- bad input ---------------------------------------------------------------------------

BAD: list[tuple[Any, str, str]] = [
    ("traceparent=x", "headers", "must be a mapping"),
    ([("k", "v")], "headers", "must be a mapping"),
    ({"k": 1}, "headers['k']", "must be a str"),
    ({"k": None}, "headers['k']", "must be a str"),
    ({"k": b"v"}, "headers['k']", "must be a str"),
    ({1: "v"}, "headers name", "must be a str"),
    ({"": "v"}, "headers name", "must not be empty"),
    ({"a\nb": "v"}, "headers name", "control characters"),
    ({"x" * 256: "v"}, "headers name", "at most 255"),
    ({"k": "a\r\nb"}, "headers['k']", "control characters"),
    ({"k": "lone \ud800"}, "headers['k']", "lone surrogate"),
    ({f"h{n}": "v" for n in range(33)}, "headers", "at most 32"),
    ({"k": "v" * 8192}, "headers", "at most 8192 characters"),
]


def test_bad_headers_are_refused_and_change_nothing(store: tenure.Store) -> None:
    store.submit("held", headers={"k": "v"})
    before = snapshot(store)
    for value, argument, rule in BAD:  # one store for all: each case is a refusal
        with pytest.raises(tenure.InvalidArgument) as raised:
            store.submit("n", headers=value)
        assert raised.value.argument == argument, value
        assert rule in str(raised.value), (argument, str(raised.value))
        with pytest.raises(tenure.InvalidArgument) as raised:
            store.submit_many([{"job_id": "m"}, {"job_id": "n", "headers": value}])
        assert raised.value.argument == f"jobs[1].{argument}", value
        assert rule in str(raised.value), argument
    assert snapshot(store) == before
