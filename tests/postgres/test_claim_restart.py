"""A claim whose reply is lost to a server restart gets its lease back (issue #15), on a
throwaway PostgreSQL of the test's own (tests/servers.py) behind the tests' TCP proxy
(tests/proxy.py): the claim commits, the server goes down before its reply reaches the
client, and the store finds the lease by its secret once the server is back, instead of
leaving it to expire."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

import tenure
from tests.proxy import postgres_reply, proxy_for
from tests.servers import PostgresServer, postgres_server

pytestmark = pytest.mark.slow

TTL = 10.0
DOWN = 0.5  # seconds between the stop and the start


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


def test_a_claim_reply_lost_to_a_restart_gives_the_lease_back(
    pg: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    url = f"{pg.url}?schema=claim_restart&sslmode=disable&gssencmode=disable"
    starting: list[float] = []  # the server answers nothing before this
    restarted: list[float] = []
    threads: list[threading.Thread] = []

    def start_later() -> None:
        time.sleep(DOWN)
        starting.append(time.monotonic())
        pg.start()  # (returns once the server is up: a client may reach it first)
        restarted.append(time.monotonic())

    def stop_then_lose(held: bytes) -> tuple[int, bool] | None:
        verdict = postgres_reply(held)
        if verdict is not None and verdict[1] and not threads:
            # The claim ran and committed; its reply is held here. The server goes down
            # (pg_ctl stop -m fast) before the client sees anything, then comes back.
            pg.stop()
            threads.append(threading.Thread(target=start_later, daemon=True))
            threads[0].start()
        return verdict

    with (
        proxy_for(url, pg.port, stop_then_lose) as (proxy, through),
        tenure.connect(through) as store,
    ):
        store.submit("J")
        store.submit("K")
        proxy.lose_next_reply()
        sent = time.monotonic()
        lease = store.claim_next("A", TTL)
        answered = time.monotonic()
        threads[0].join(60)
        assert proxy.replies_lost == 1
        assert restarted, "the server did not come back"
        # The lease the lost reply carried, found by its secret after the restart: the
        # same generation (no second claim), K untouched, well within the TTL.
        assert lease is not None
        assert (lease.job_id, lease.generation, lease.attempt) == ("J", 1, 1)
        assert answered >= starting[0]
        assert answered - sent < TTL / 3 + 10  # the budget, plus the pool's wait
        assert lease.local_deadline > answered
        assert store.get("K").state == "ready"
        store.complete(lease, "ok")
        job = store.get("J")
        assert (job.state, job.generation, job.result) == ("done", 1, "ok")
    found = [r.getMessage() for r in caplog.records if "found the 1 lease(s)" in r.getMessage()]
    assert len(found) == 1, found
