"""Connection loss, lost replies, lost scripts, persistence warnings, layout versions."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest

import tenure
import tenure.aio
from tenure._protocol import hash_secret, settle_receipt
from tenure.stores.redis import RedisDriver, _common
from tests.backends import REDIS
from tests.proxy import Proxy, proxy_for


@pytest.fixture
def through_proxy(url: str) -> Iterator[tuple[Proxy, str]]:
    with proxy_for(url, 6379) as running:
        yield running


@pytest.fixture
def proxy(through_proxy: tuple[Proxy, str]) -> Proxy:
    return through_proxy[0]


@pytest.fixture
def proxied_url(through_proxy: tuple[Proxy, str]) -> str:
    return through_proxy[1]


def test_unreachable_server_at_connect() -> None:
    with pytest.raises(tenure.StoreUnavailable) as caught:
        tenure.connect("redis://127.0.0.1:1/0?prefix=nowhere&connect_timeout=1")
    assert caught.value.outcome_unknown is False
    assert caught.value.operation == "connect"


def test_a_database_the_server_lacks_is_the_urls_fault(tmp_path: Any) -> None:
    # The connection's SELECT is refused ("DB index is out of range"): that raised
    # redis-py's ResponseError as it was. The URL is wrong, and nothing was written.
    with REDIS.isolated_url(tmp_path) as url:
        parts = urlsplit(url)
        missing = urlunsplit(parts._replace(path="/99"))  # a server has 16 unless told
        with pytest.raises(tenure.InvalidArgument) as caught:
            tenure.connect(missing)
        assert caught.value.argument == "url"
        assert "database" in str(caught.value)
        with pytest.raises(tenure.InvalidArgument):
            anyio.run(tenure.aio.connect, missing)


def test_lost_reply_to_complete_is_unknown_and_safe_to_retry(
    open_real_store: Callable[..., tenure.Store], proxied_url: str, proxy: Proxy
) -> None:
    store = open_real_store(url=proxied_url)
    store.submit("J")
    lease = store.claim("J", "A", 10)
    assert lease is not None
    driver: Any = store._driver
    proxy.lose_next_reply()
    secret_hash = hash_secret(lease.secret)
    receipt = settle_receipt(secret_hash, "complete")
    with pytest.raises(tenure.StoreUnavailable) as caught:
        driver.complete("J", "A", lease.generation, secret_hash, receipt, '"r"')
    assert caught.value.outcome_unknown is True
    assert proxy.replies_lost == 1
    assert store.get("J").state == "done"  # it did take effect
    store.complete(lease, "r")  # the retry answers success and changes nothing
    assert store.get("J").result == "r"


def test_store_retries_renew_and_claim_through_lost_replies(
    open_real_store: Callable[..., tenure.Store], proxied_url: str, proxy: Proxy
) -> None:
    store = open_real_store(url=proxied_url)
    store.submit("J")
    proxy.lose_next_reply()
    lease = store.claim("J", "A", 10)  # retried with the same secret: the same lease
    assert proxy.replies_lost == 1
    assert lease is not None
    assert lease.generation == 1
    proxy.lose_next_reply()
    renewed = store.renew(lease)
    assert proxy.replies_lost == 2
    assert renewed.generation == 1
    proxy.lose_next_reply()
    store.complete(renewed)
    assert proxy.replies_lost == 3
    job = store.get("J")
    assert (job.state, job.generation) == ("done", 1)


def test_lost_reply_to_claim_next_is_recovered_not_repeated(
    open_real_store: Callable[..., tenure.Store], proxied_url: str, proxy: Proxy
) -> None:
    store = open_real_store(url=proxied_url)
    store.submit("J")
    store.submit("K")
    proxy.lose_next_reply()
    lease = store.claim_next("A", 10)
    assert proxy.replies_lost == 1
    # The lost claim took J; the store found that lease by its secret (issue #15), so K was
    # not taken behind our back and J is held, not left to expire.
    assert lease is not None
    assert (lease.job_id, lease.generation) == ("J", 1)
    assert store.get("K").state == "ready"
    store.complete(lease)
    assert store.get("J").state == "done"


def test_server_gone_after_connect_is_known_not_applied(
    open_real_store: Callable[..., tenure.Store], proxied_url: str, proxy: Proxy
) -> None:
    store = open_real_store(url=proxied_url)
    store.submit("J")
    proxy.close()
    for call in (lambda: store.claim_next("A", 10), lambda: store.submit("K")):
        with pytest.raises(tenure.StoreUnavailable) as caught:
            call()
        assert caught.value.outcome_unknown is False


@pytest.mark.anyio
async def test_server_gone_after_connect_is_known_not_applied_async(
    proxied_url: str, proxy: Proxy
) -> None:
    store = await tenure.aio.connect(proxied_url)
    try:
        await store.submit("J")
        proxy.close()
        await anyio.sleep(0.05)  # the event loop sees the connection's EOF
        with pytest.raises(tenure.StoreUnavailable) as caught:
            await store.claim_next("A", 10)
        assert caught.value.outcome_unknown is False
    finally:
        await store.close()


def test_scripts_reload_after_script_flush(real_store: tenure.Store, raw: Any) -> None:
    real_store.submit("J")
    raw.script_flush()
    lease = real_store.claim_next("A", 10)
    assert lease is not None
    claim_next = _common.SCRIPTS["claim_next"]
    assert raw.script_exists(claim_next.sha) == [True]  # cached again for EVALSHA
    raw.script_flush()
    real_store.complete(lease)
    assert real_store.get("J").state == "done"


def test_closed_store_refuses(url: str) -> None:
    store = tenure.connect(url)
    store.close()
    with pytest.raises(tenure.StoreUnavailable) as caught:
        store.submit("J")
    assert caught.value.outcome_unknown is False
    store.close()  # twice is fine


def test_newer_layout_is_refused(url: str, raw: Any, prefix: str) -> None:
    raw.hset("{" + prefix + "}:meta", mapping={"store_id": "x", "layout": "99"})
    with pytest.raises(tenure.StoreUnavailable, match="layout version 99"):
        tenure.connect(url)
    # Refused before anything is written to it: no clock made for its store id.
    assert raw.exists("{" + prefix + "}:clock:x") == 0
    assert raw.hgetall("{" + prefix + "}:meta") == {b"store_id": b"x", b"layout": b"99"}


def test_opening_a_current_store_is_one_script_run(
    url: str, raw: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store exists in the current layout, and this process has checked the server's
    # persistence settings (once per server and process): what is left of an open is
    # the store's own request.
    tenure.connect(url).close()
    ran: list[str] = []
    send = RedisDriver._send

    def counting_send(driver: Any, operation: str, command: Any, **options: Any) -> Any:
        ran.append(command[0])
        return send(driver, operation, command, **options)

    monkeypatch.setattr(RedisDriver, "_send", counting_send)
    with tenure.connect(url) as store:
        # One EVALSHA (then an EVAL, had the server's script cache been emptied) answers
        # the id and makes sure of the store's clock key, which every script needs.
        assert ran in (["EVALSHA"], ["EVALSHA", "EVAL"]), ran
        assert raw.exists("{" + prefix + "}:clock:" + store.store_id) == 1
        assert store.submit("J").job_id == "J"


def test_store_id_is_kept(open_real_store: Callable[..., tenure.Store]) -> None:
    assert open_real_store().store_id == open_real_store().store_id != ""


def test_warns_when_redis_keeps_nothing_on_disk(
    url: str, raw: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This machine's Redis keeps nothing on disk: the warning fires here.
    monkeypatch.setattr(_common, "_noted", set())
    config = [raw.config_get(name) for name in _common.CHECKED_CONFIG]
    expected = [
        risk
        for risk in (_common.persistence_risk(*config[:3]), _common.eviction_risk(config[3]))
        if risk is not None
    ]
    with caplog.at_level(logging.INFO, logger="tenure"):
        tenure.connect(url).close()
        tenure.connect(url).close()  # once per server and process
    records = [record for record in caplog.records if record.name == "tenure"]
    assert [(record.levelno, record.getMessage()) for record in records] == expected
    if config[0] == {"appendonly": "no"} and not config[2].get("save"):
        assert "keeps nothing on disk" in records[0].getMessage()
        assert records[0].levelno == logging.WARNING


def test_the_configuration_is_read_once_per_server_and_process(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker opens two stores (its own, and its renewer's ahead of a renewal): the second
    reads no settings."""
    from tenure.stores.redis._driver import RedisDriver

    monkeypatch.setattr(_common, "_noted", set())
    sent: list[tuple[Any, ...]] = []
    send = RedisDriver._send

    def recording(self: RedisDriver, operation: str, command: Any, **options: Any) -> Any:
        sent.extend(tuple(c) for c in (command, *options.get("pipelined", ())))
        return send(self, operation, command, **options)

    monkeypatch.setattr(RedisDriver, "_send", recording)
    tenure.connect(url).close()
    assert [c[2] for c in sent if c[:2] == ("CONFIG", "GET")] == list(_common.CHECKED_CONFIG)
    sent.clear()
    tenure.connect(url).close()
    assert sent  # the store's own commands still go through _send
    assert not [c for c in sent if c[0] == "CONFIG"]


@pytest.mark.parametrize("opener", ["sync", "async"])
def test_the_configuration_is_read_in_one_round_trip(
    url: str, monkeypatch: pytest.MonkeyPatch, opener: str
) -> None:
    """A new process's first connect to a server reads its settings in one write and one
    wait for the replies, not one per setting (each is a round trip to a distant server)."""
    import redis.asyncio.connection
    import redis.connection

    monkeypatch.setattr(_common, "_noted", set())
    writes: list[bytes] = []
    sync_send = redis.connection.Connection.send_packed_command
    async_send = redis.asyncio.connection.Connection.send_packed_command

    def sync_recording(self: Any, command: Any, check_health: bool = True) -> None:
        writes.append(b"".join(command))
        sync_send(self, command, check_health)

    async def async_recording(self: Any, command: Any, check_health: bool = True) -> None:
        writes.append(b"".join(command))
        await async_send(self, command, check_health)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", sync_recording)
    monkeypatch.setattr(redis.asyncio.connection.Connection, "send_packed_command", async_recording)
    if opener == "sync":
        tenure.connect(url).close()
    else:

        async def open_and_close() -> None:
            store = await tenure.aio.connect(url)
            await store.close()

        anyio.run(open_and_close)
    with_config = [write for write in writes if b"CONFIG" in write]
    assert len(with_config) == 1, with_config
    for name in _common.CHECKED_CONFIG:
        assert name.encode() in with_config[0]


def test_a_server_that_refuses_config_is_noted_and_served(
    url: str, raw: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Managed services often refuse CONFIG: every refusal of the one round trip is read
    (the connection stays in step), the settings are said to be unchecked, and the store
    works on that same connection."""
    monkeypatch.setattr(_common, "_noted", set())
    user = f"tenure-noconfig-{uuid.uuid4().hex[:8]}"
    raw.execute_command("ACL", "SETUSER", user, "on", "nopass", "~*", "&*", "+@all", "-config")
    try:
        limited = url.replace("redis://", f"redis://{user}@", 1)
        with caplog.at_level(logging.INFO, logger="tenure"):
            store = tenure.connect(limited)
        try:
            store.submit("after-config")
            assert store.get("after-config").state == "ready"
            lease = store.claim_next("w", 30)
            assert lease is not None
            assert lease.job_id == "after-config"
        finally:
            store.close()
    finally:
        raw.execute_command("ACL", "DELUSER", user)
    said = [r.getMessage() for r in caplog.records if r.name == "tenure"]
    assert len(said) == 1, said
    assert said[0].startswith("could not read Redis persistence settings (")
    assert "config" in said[0].lower(), said


@pytest.mark.parametrize(
    ("policy", "warns"),
    [("noeviction", False), ("volatile-lru", False), ("allkeys-lru", True)],
)
def test_eviction_risk(policy: str, warns: bool) -> None:
    risk = _common.eviction_risk({"maxmemory-policy": policy})
    assert (risk is not None) == warns


@pytest.mark.parametrize(
    ("appendonly", "appendfsync", "save", "level", "words"),
    [
        ("no", "everysec", "", logging.WARNING, "keeps nothing on disk"),
        ("no", "everysec", "3600 1", logging.WARNING, "only RDB snapshots"),
        ("yes", "everysec", "", logging.INFO, "appendfsync everysec"),
        ("yes", "no", "3600 1", logging.INFO, "appendfsync no"),
        ("yes", "always", "", None, None),
    ],
)
def test_persistence_risk(
    appendonly: str, appendfsync: str, save: str, level: int | None, words: str | None
) -> None:
    risk = _common.persistence_risk(
        ["appendonly", appendonly], {"appendfsync": appendfsync}, ["save", save]
    )
    if level is None:
        assert risk is None
    else:
        assert risk is not None
        assert risk[0] == level
        assert words is not None
        assert words in risk[1]


# A request whose reply never comes ends at the URL's timeout (async: one bound around the
# request and its answer, the pool's sockets having none; sync: the socket's own), and so
# does opening a connection whose handshake is never answered.


def _silent(proxy: Proxy, proxied_url: str) -> str:
    proxy.drop_replies(60)
    return f"{proxied_url}&timeout=0.5&connect_timeout=0.5"


def test_a_request_with_no_reply_ends_at_the_timeout(
    open_real_store: Callable[..., tenure.Store], proxied_url: str, proxy: Proxy
) -> None:
    store = open_real_store(url=f"{proxied_url}&timeout=0.5")
    driver: Any = store._driver
    proxy.drop_replies(60)
    started = time.monotonic()
    with pytest.raises(tenure.StoreUnavailable) as caught:
        driver.now()
    assert 0.4 < time.monotonic() - started < 3
    assert caught.value.outcome_unknown is True


@pytest.mark.anyio
async def test_a_request_with_no_reply_ends_at_the_timeout_async(
    proxied_url: str, proxy: Proxy
) -> None:
    store = await tenure.aio.connect(f"{proxied_url}&timeout=0.5")
    try:
        driver: Any = store._driver
        proxy.drop_replies(60)
        started = time.monotonic()
        with anyio.fail_after(10), pytest.raises(tenure.StoreUnavailable) as caught:
            await driver.now()
        assert 0.4 < time.monotonic() - started < 3
        assert caught.value.outcome_unknown is True
    finally:
        proxy.heal()
        with anyio.move_on_after(5):
            await store.close()


def test_a_connection_whose_handshake_is_not_answered_ends_at_the_timeouts(
    proxied_url: str, proxy: Proxy
) -> None:
    url = _silent(proxy, proxied_url)
    started = time.monotonic()
    with pytest.raises(tenure.StoreUnavailable) as caught:
        tenure.connect(url)
    assert time.monotonic() - started < 10
    assert caught.value.operation == "connect"


@pytest.mark.anyio
async def test_a_connection_whose_handshake_is_not_answered_ends_at_the_timeouts_async(
    proxied_url: str, proxy: Proxy
) -> None:
    url = _silent(proxy, proxied_url)
    started = time.monotonic()
    with anyio.fail_after(20), pytest.raises(tenure.StoreUnavailable) as caught:
        await tenure.aio.connect(url)
    assert time.monotonic() - started < 10
    assert caught.value.operation == "connect"
