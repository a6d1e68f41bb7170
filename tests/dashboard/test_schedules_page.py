"""The dashboard's schedules page (issue #18): the store's schedules, each with its next
tick by store time, every user value escaped; linked from every page's nav. Over every
store, on the test's manual clock."""

from __future__ import annotations

import html as html_module
import re
from collections.abc import Iterator

import markupsafe
import pytest
from starlette.testclient import TestClient

import tenure
from tenure.dashboard import create_app
from tenure.dashboard._views import clock_time

NASTY = "<script>alert(1)</script>"
BREAKER = '"onmouseover="alert(2)'
RAW = ["<script>alert", '"onmouseover=', "</textarea><img", "<img src=x"]


@pytest.fixture
def client(store: tenure.Store) -> Iterator[TestClient]:
    with TestClient(create_app(store, read_only=True)) as opened:
        yield opened


def _text(html: str) -> str:
    return html_module.unescape(" ".join(re.sub(r"<[^>]+>", " ", html).split()))


def test_the_page_lists_schedules_with_their_next_tick(
    store: tenure.Store, clock: tenure.ManualClock, client: TestClient
) -> None:
    assert "No schedules in this store." in client.get("/schedules").text
    clock.advance(3600 - clock.time() % 3600 + 60)  # one minute past a whole hour
    hour = clock.time() - 60
    store.add_schedule("hourly", "0 * * * *", queue="reports", payload={"kind": "h"})
    store.add_schedule("tokyo", "30 9 * * *", queue="q", timezone="Asia/Tokyo", catch_up="once")
    page = client.get("/schedules")
    assert page.status_code == 200
    text = _text(page.text)
    assert re.search(r"hourly 0 \* \* \* \* UTC reports .* \(in 59 min 0 s\) skip 5", text), text
    tokyo = text[text.index("tokyo") :]
    assert tokyo.startswith("tokyo 30 9 * * * Asia/Tokyo q")
    assert ":30:00.000 UTC" in tokyo
    assert "once" in tokyo
    assert clock_time(hour + 3600) in text
    assert 'href="/jobs?queue=reports"' in page.text
    assert 'aria-current="page">Schedules' in page.text


def test_every_page_links_to_it(client: TestClient) -> None:
    for path in ("/queues", "/jobs"):
        assert 'href="/schedules"' in client.get(path).text


def test_user_values_are_escaped(store: tenure.Store, client: TestClient) -> None:
    store.add_schedule(
        f"n{NASTY}",
        "*/5 * * * *",
        queue=f"q{BREAKER}",
        payload={NASTY: "</textarea><img src=x onerror=alert(4)>"},
    )
    page = client.get("/schedules").text
    for raw in RAW:
        assert raw not in page, f"{raw!r} rendered unescaped"
    assert str(markupsafe.escape(f"n{NASTY}")) in page
