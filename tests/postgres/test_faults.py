"""Connections that die: at connect, while idle in the pool, in the middle of an operation,
and after the server committed but before the reply arrived."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

import tenure
from tenure._protocol import hash_secret, settle_receipt
from tests.backends import POSTGRES_URL
from tests.postgres._support import backends_of, blocked_then_killed, driver_of, terminate
from tests.proxy import Proxy
from tests.servers import free_port


def test_unreachable_server_at_connect() -> None:
    port = free_port()  # a port nobody listens on
    started = time.monotonic()
    with pytest.raises(tenure.StoreUnavailable) as caught:
        tenure.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres?pool_timeout=1")
    assert time.monotonic() - started < 10
    assert caught.value.operation == "connect"
    assert caught.value.outcome_unknown is False
    assert "127.0.0.1" in str(caught.value)


def test_closed_store_refuses(real_store: tenure.Store) -> None:
    real_store.close()
    with pytest.raises(tenure.StoreUnavailable) as caught:
        real_store.submit("J")
    assert caught.value.outcome_unknown is False


def test_pool_recovers_from_terminated_idle_connections(
    open_real_store: Callable[..., tenure.Store], admin: Any, app_name: str, url: str
) -> None:
    """A server restart or pg_terminate_backend kills every pooled connection: the next
    operations find out before sending anything and go on with fresh connections."""
    store = open_real_store(url=url.replace("pool_", "x_") + "&pool_min=3&pool_max=3")
    store.submit("J")
    leases = [store.claim_many("A", 30, 1) for _ in range(3)]
    assert len(leases[0]) == 1
    deadline = time.monotonic() + 5
    while len(backends_of(admin, app_name)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    terminate(admin, backends_of(admin, app_name))
    time.sleep(0.05)  # let the FATAL messages arrive
    driver = driver_of(store)
    # At the driver: no error at all, not even one that a retry would hide.
    for _ in range(5):
        assert driver.get("J").row is not None
    lease = leases[0][0]
    store.complete(lease, "ok")
    assert store.get("J").state == "done"


@pytest.fixture
def killing(schema: str, admin: Any, app_name: str) -> Callable[..., Any]:
    from psycopg import sql

    lock_sql = sql.SQL("SELECT 1 FROM {}.tenure_jobs WHERE job_id = %s FOR UPDATE").format(
        sql.Identifier(schema)
    )

    def kill_during(job_id: str, call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        return blocked_then_killed(POSTGRES_URL, admin, app_name, lock_sql, job_id, call)

    return kill_during


def test_killed_during_claim(real_store: tenure.Store, killing: Callable[..., Any]) -> None:
    real_store.submit("J")
    driver = driver_of(real_store)
    result, error = killing("J", lambda: driver.claim("J", "A", 30, "h" * 64))
    assert result is None
    assert isinstance(error, tenure.StoreUnavailable)
    assert error.outcome_unknown is True
    job = real_store.get("J")
    assert (job.state, job.generation, job.attempts) == ("ready", 0, 0)  # rolled back
    # Through the store, the same kill is retried with the same secret: one generation.
    lease, error = killing("J", lambda: real_store.claim("J", "A", 30))
    assert error is None
    assert lease is not None
    assert lease.generation == 1
    assert real_store.get("J").generation == 1


@pytest.mark.parametrize("operation", ["renew", "complete", "release", "fail"])
def test_killed_during_holder_operation(
    real_store: tenure.Store, killing: Callable[..., Any], operation: str
) -> None:
    real_store.submit("J")
    lease = real_store.claim("J", "A", 30)
    assert lease is not None
    before = real_store.get("J")
    calls: dict[str, Callable[[], Any]] = {
        "renew": lambda: real_store.renew(lease, 60),
        "complete": lambda: real_store.complete(lease, "r"),
        "release": lambda: real_store.release(lease),
        "fail": lambda: real_store.fail(lease, "boom", retry_in=0),
    }
    driver = driver_of(real_store)
    secret_hash = hash_secret(lease.secret)
    raw: dict[str, Callable[[], Any]] = {
        "renew": lambda: driver.renew("J", "A", 1, secret_hash, 60),
        "complete": lambda: driver.complete(
            "J", "A", 1, secret_hash, settle_receipt(secret_hash, "complete"), '"r"'
        ),
        "release": lambda: driver.release(
            "J", "A", 1, secret_hash, settle_receipt(secret_hash, "release")
        ),
        "fail": lambda: driver.fail(
            "J", "A", 1, secret_hash, settle_receipt(secret_hash, "fail"), "boom", 0
        ),
    }
    _, error = killing("J", raw[operation])
    assert isinstance(error, tenure.StoreUnavailable)
    assert error.outcome_unknown is True
    assert real_store.get("J").updated_at == before.updated_at  # nothing happened
    _, error = killing("J", calls[operation])  # the store retries with the same lease
    assert error is None, error
    job = real_store.get("J")
    expected = {"renew": "leased", "complete": "done", "release": "ready", "fail": "ready"}
    assert (job.state, job.generation) == (expected[operation], 1)


def test_lost_reply_to_complete_is_unknown_and_retry_is_safe(
    proxied: tuple[Proxy, str], open_real_store: Callable[..., tenure.Store]
) -> None:
    proxy, url = proxied
    store = open_real_store(url=url)
    store.submit("J")
    lease = store.claim("J", "A", 30)
    assert lease is not None
    driver = driver_of(store)
    proxy.lose_next_reply()
    secret_hash = hash_secret(lease.secret)
    receipt = settle_receipt(secret_hash, "complete")
    with pytest.raises(tenure.StoreUnavailable) as caught:
        driver.complete("J", "A", 1, secret_hash, receipt, '"first"')
    assert caught.value.outcome_unknown is True
    assert proxy.replies_lost == 1
    job = store.get("J")
    assert (job.state, job.result) == ("done", "first")  # it did commit
    # Retrying with the same lease answers success and changes nothing.
    store.complete(lease, "first")
    assert store.get("J").updated_at == job.updated_at
    # Through the store, a lost reply is retried transparently.
    store.submit("K")
    lease_k = store.claim("K", "A", 30)
    assert lease_k is not None
    proxy.lose_next_reply()
    store.complete(lease_k, "k")
    assert proxy.replies_lost == 2
    assert store.get("K").state == "done"


def test_lost_reply_to_claim_gives_the_same_lease(
    proxied: tuple[Proxy, str], open_real_store: Callable[..., tenure.Store]
) -> None:
    proxy, url = proxied
    store = open_real_store(url=url)
    store.submit("J")
    proxy.lose_next_reply()
    lease = store.claim("J", "A", 30)
    assert proxy.replies_lost == 1
    assert lease is not None
    assert lease.generation == 1
    store.renew(lease)
    proxy.lose_next_reply()
    renewed = store.renew(lease, 60)
    assert proxy.replies_lost == 2
    assert renewed.generation == 1
    store.complete(renewed)


def test_lost_reply_to_claim_next_is_recovered_not_repeated(
    proxied: tuple[Proxy, str], open_real_store: Callable[..., tenure.Store]
) -> None:
    proxy, url = proxied
    store = open_real_store(url=url)
    store.submit("J")
    store.submit("K")
    proxy.lose_next_reply()
    lease = store.claim_next("A", 30)
    assert proxy.replies_lost == 1
    # It took J, and the store found that lease by its secret: not sent again, so K was
    # not taken, and J is held, not left to expire.
    assert lease is not None
    assert (lease.job_id, lease.generation) == ("J", 1)
    assert store.get("K").state == "ready"
    store.complete(lease)
    assert (store.get("J").state, store.get("J").generation) == ("done", 1)


def test_connect_errors_say_what_is_wrong(schema: str) -> None:
    target = urlsplit(POSTGRES_URL)
    url = f"postgresql://{target.username or 'postgres'}@{target.hostname}:{target.port or 5432}"
    started = time.monotonic()
    with pytest.raises(tenure.StoreUnavailable) as caught:
        tenure.connect(f"{url}/no_such_database_here?schema={schema}")
    assert "no_such_database_here" in str(caught.value)
    assert caught.value.outcome_unknown is False
    assert time.monotonic() - started < 5
