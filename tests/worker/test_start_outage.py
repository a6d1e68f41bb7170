"""A worker started while its store is down waits for it (tenure.worker._retry
`open_through_outage`): one WARNING when the store is unavailable, one INFO when it is
back, then it works as usual; bounded by `START_WAIT`. A throwaway PostgreSQL server
(tests/servers.py) that starts two seconds after the worker."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import tenure
from tests.servers import postgres_server
from tests.worker._support import run_burst

pytestmark = pytest.mark.slow


def test_a_worker_started_before_its_store_waits_for_it(caplog: pytest.LogCaptureFixture) -> None:
    with postgres_server() as server:
        url = f"{server.url}?schema=late&sslmode=disable&connect_timeout=2"
        with tenure.connect(url) as store:
            store.submit("J")
        server.stop()
        ran: list[str] = []
        worker = tenure.Worker(url, concurrency=1, ttl=5.0, summary_every=0)

        @worker.handler("default")
        async def handle(ctx: tenure.JobContext) -> str:
            ran.append(ctx.job_id)
            return "ok"

        def start_late() -> None:
            time.sleep(2.0)
            server.start()

        late = threading.Thread(target=start_late, daemon=True)
        late.start()
        began = time.monotonic()
        with caplog.at_level(logging.INFO, logger="tenure"):
            run_burst(worker, timeout=60)
        took = time.monotonic() - began
        late.join(30)
        assert ran == ["J"]
        assert took >= 2.0
        with tenure.connect(url) as store:
            assert store.get("J").state == "done"
    warnings = [r for r in caplog.records if r.getMessage().startswith("store unavailable")]
    back = [r for r in caplog.records if r.getMessage().startswith("store available again")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].levelno == logging.WARNING
    assert len(back) == 1
    assert back[0].levelno == logging.INFO


def test_the_wait_at_start_is_bounded() -> None:
    """A store still down after ``within`` seconds: its last error propagates."""
    import random

    import anyio

    from tenure.worker._retry import Outage, open_through_outage

    calls: list[float] = []

    async def down() -> object:
        calls.append(time.monotonic())
        raise tenure.StoreUnavailable(
            "connect: refused", operation="connect", outcome_unknown=False
        )

    outage = Outage(tenure.ManualClock())
    began = time.monotonic()
    with pytest.raises(tenure.StoreUnavailable, match="refused"):
        anyio.run(lambda: open_through_outage(down, outage, random.Random(1), within=0.5))
    assert time.monotonic() - began < 2.0
    assert len(calls) >= 2
    assert outage.active  # the one WARNING was logged; no INFO, the store never came back


def test_a_lost_store_is_not_waited_for() -> None:
    import random

    import anyio

    from tenure.worker._retry import Outage, open_through_outage

    async def lost() -> object:
        raise tenure.StoreLost("connect: replaced", operation="connect", outcome_unknown=False)

    with pytest.raises(tenure.StoreLost):
        anyio.run(lambda: open_through_outage(lost, Outage(tenure.ManualClock()), random.Random()))
