"""Every page of the dashboard, through Starlette's TestClient, over every store (the
``store`` fixture: deterministic clocks, so lease times are exact)."""

from __future__ import annotations

import html as html_module
import math
import re
import threading
import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

import tenure
from tenure.dashboard import create_app


@pytest.fixture
def client(store: tenure.Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as opened:
        yield opened


def _text(html: str) -> str:
    """The visible text of a page, whitespace collapsed."""
    return html_module.unescape(" ".join(re.sub(r"<[^>]+>", " ", html).split()))


def test_home_redirects_to_queues(client: TestClient) -> None:
    answer = client.get("/", follow_redirects=False)
    assert answer.status_code == 302
    assert answer.headers["location"].endswith("/queues")


def test_queues_page_counts_live_jobs(
    store: tenure.Store, clock: tenure.ManualClock, client: TestClient
) -> None:
    for index in range(3):
        store.submit(f"e{index}", queue="emails")
    store.submit("later", queue="emails", delay=600)
    store.claim("e0", "w1", 1)
    clock.advance(5)  # e0's lease expired; e1, e2 waited 5 s
    store.submit("r0", queue="reports")
    assert store.claim("r0", "w2", 60) is not None

    page = client.get("/queues")
    assert page.status_code == 200
    text = _text(page.text)
    # queue, ready (due), scheduled, leased now, expired, oldest ready waits
    assert re.search(r"emails 2 1 0 1 5\.0 s", text), text
    assert re.search(r"reports 0 0 1 0 —", text), text
    fragment = client.get("/queues/table")
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    assert 'hx-trigger="every 2s"' in fragment.text


def test_jobs_page_lists_filters_and_pages(
    store: tenure.Store, clock: tenure.ManualClock, client: TestClient
) -> None:
    for index in range(120):
        store.submit(f"job-{index:03d}", {"n": index}, queue="bulk" if index % 2 else "other")
    lease = store.claim("job-001", "alice", 30)
    assert lease is not None
    clock.advance(10)

    first = client.get("/jobs")
    assert first.status_code == 200
    assert first.text.count('class="job-row') == 50
    assert "job-000" in first.text
    assert "job-050" not in first.text
    assert "first page" not in first.text
    # Pages follow the store's cursor, from the rel=next link of each.
    second = client.get(_next_link(first.text))
    assert second.text.count('class="job-row') == 50
    assert "job-050" in second.text
    assert "page 2</span>" in second.text
    assert "first page" in second.text
    third = client.get(_next_link(second.text))
    assert third.text.count('class="job-row') == 20
    assert "job-119" in third.text
    assert 'rel="next"' not in third.text

    bulk = client.get("/jobs", params={"queue": "bulk"})
    assert bulk.text.count('class="job-row') == 50
    assert "job-000" not in bulk.text
    leased = client.get("/jobs", params={"state": "leased"})
    assert leased.text.count('class="job-row') == 1
    assert "20 s left" in _text(leased.text)  # 30 s lease, 10 s later by the store's clock
    owned = client.get("/jobs", params={"owner": "alice"})
    assert owned.text.count('class="job-row') == 1
    assert "job-001" in owned.text
    prefixed = client.get("/jobs", params={"prefix": "job-11"})
    assert prefixed.text.count('class="job-row') == 10
    nothing = client.get("/jobs", params={"prefix": "zzz"})
    assert "No job matches" in nothing.text

    bulk_next = _next_link(bulk.text)
    assert bulk_next.startswith("/jobs?queue=bulk&")
    table = client.get("/jobs/table" + bulk_next.removeprefix("/jobs"))
    assert "<html" not in table.text
    assert table.text.count('class="job-row') == 10
    # the fragment polls itself with the same filters and the same page
    polled = re.search(r'hx-get="([^"]+)"', table.text)
    assert polled is not None
    assert html_module.unescape(polled.group(1)) == "/jobs/table" + bulk_next.removeprefix("/jobs")


def test_jobs_pages_reach_past_the_first_thousand(store: tenure.Store, client: TestClient) -> None:
    store.submit_many([tenure.JobSpec(f"job-{i:04d}") for i in range(1000)])
    store.submit_many([tenure.JobSpec(f"job-{i:04d}") for i in range(1000, 1030)])
    link, seen = "/jobs", 0
    for _ in range(30):
        page = client.get(link).text
        seen += page.count('class="job-row')
        if 'rel="next"' not in page:
            break
        link = _next_link(page)
    assert seen == 1030
    assert "job-1029" in page
    # An id prefix reads on through the store's pages to find its matches.
    late = client.get("/jobs", params={"prefix": "job-102"}).text
    assert late.count('class="job-row') == 10


def _next_link(page: str) -> str:
    found = re.search(r'<a rel="next" href="([^"]+)"', page)
    assert found is not None, "no next page"
    return html_module.unescape(found.group(1))


def test_jobs_page_refuses_bad_filters(client: TestClient) -> None:
    assert client.get("/jobs", params={"state": "sleeping"}).status_code == 400
    bad_page = client.get("/jobs", params={"page": "0"})
    assert bad_page.status_code == 400
    assert "page" in bad_page.text
    no_cursor = client.get("/jobs", params={"page": "3"})  # a page number is not a position
    assert no_cursor.status_code == 400
    bad_cursor = client.get("/jobs", params={"after": "not-a-cursor", "page": "2"})
    assert bad_cursor.status_code == 400
    assert "cursor" in bad_cursor.text


def test_job_page_shows_lease_owner_generation_and_values(
    store: tenure.Store, clock: tenure.ManualClock, client: TestClient
) -> None:
    store.submit("report-7", {"month": "2026-11"}, queue="reports", max_attempts=3)
    first = store.claim("report-7", "worker-a", 5)
    assert first is not None
    store.fail(first, "disk full", retry_in=0)
    second = store.claim("report-7", "worker-b", 40)
    assert second is not None
    clock.advance(15)

    page = client.get("/job", params={"id": "report-7"})
    assert page.status_code == 200
    text = _text(page.text)
    assert "state leased" in text
    assert "owner worker-b" in text
    assert "generation 2" in text
    assert "attempts 2 of 3" in text
    assert "25 s left" in text
    assert "by the store's clock" in text
    assert '"month": "2026-11"' in text
    assert "disk full" in text
    # The attempt history: a bar per generation, in the chaos report's colours, and a row.
    assert text.count("gen 1") == 1
    assert "gen 2" in text
    assert re.search(r"1\s*worker-a.*failed disk full", text), text
    assert re.search(r"2\s*worker-b.*current", text), text
    assert "background: hsl(67, 65%, 55%)" in page.text  # generation 1
    assert "background: hsl(134, 65%, 55%)" in page.text  # generation 2

    summary = client.get("/job/summary", params={"id": "report-7"})
    assert "<html" not in summary.text
    assert "25 s left" in _text(summary.text)
    assert 'hx-get="/job/summary?id=report-7"' in summary.text

    store.complete(second, {"rows": 12})
    done = _text(client.get("/job", params={"id": "report-7"}).text)
    assert "state done" in done
    assert "none held" in done
    assert "worker-b" in done
    assert "completed" in done
    assert '"rows": 12' in done


def test_job_page_shows_headers_and_unique_key(client: TestClient, store: tenure.Store) -> None:
    store.submit(
        "mail-9",
        headers={
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tenant": "<acme>",
        },
        unique_key="mail:ada",
    )
    page = client.get("/job", params={"id": "mail-9"}).text
    text = _text(page)
    assert "unique key mail:ada" in text
    assert "tenant <acme>" in text
    assert "traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" in text
    assert "&lt;acme&gt;" in page  # escaped, as every value the page shows
    # Sorted by name: tenant before traceparent.
    assert text.index("tenant") < text.index("traceparent")

    store.submit("plain")
    plain = _text(client.get("/job", params={"id": "plain"}).text)
    assert "Headers none" in plain
    assert "unique key —" in plain


def test_job_page_of_a_job_never_claimed(client: TestClient, store: tenure.Store) -> None:
    store.submit("fresh")
    page = client.get("/job", params={"id": "fresh"}).text
    assert "never claimed" in _text(page)
    assert 'class="timeline"' not in page


def test_job_page_of_an_expired_lease(
    store: tenure.Store, clock: tenure.ManualClock, client: TestClient
) -> None:
    store.submit("slow")
    assert store.claim("slow", "w", 2) is not None
    clock.advance(9)
    text = _text(client.get("/job", params={"id": "slow"}).text)
    assert "expired 7.0 s ago, not claimed again yet" in text


def test_unknown_and_invalid_job(client: TestClient) -> None:
    missing = client.get("/job", params={"id": "nope"})
    assert missing.status_code == 404
    assert "nope" in missing.text
    assert client.get("/job").status_code == 400  # no id


def test_static_htmx_is_served_from_the_package(client: TestClient) -> None:
    script = client.get("/static/htmx.min.js")
    assert script.status_code == 200
    assert script.text.startswith("/*! htmx 2.")
    assert "Zero-Clause BSD" in script.text
    page = client.get("/queues")
    assert '<script src="/static/htmx.min.js"' in page.text
    assert "http://" not in page.text.split("<main>")[0].replace("http://testserver", "")


def test_mounted_under_a_prefix(store: tenure.Store) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    store.submit("m1", queue="q")
    outer = Starlette(routes=[Mount("/ops/tenure", app=create_app(store))])
    with TestClient(outer) as client:
        page = client.get("/ops/tenure/jobs")
        assert page.status_code == 200
        assert 'href="/ops/tenure/job?id=m1"' in page.text
        assert 'src="/ops/tenure/static/htmx.min.js"' in page.text
        assert client.get("/ops/tenure/static/htmx.min.js").status_code == 200
        home = client.get("/ops/tenure/", follow_redirects=False)
        assert home.headers["location"].endswith("/ops/tenure/queues")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_async_store_works_too(url: str, clock: tenure.ManualClock) -> None:
    import httpx

    astore = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    try:
        await astore.submit("a1", {"k": 1}, queue="async-q")
        transport = httpx.ASGITransport(app=create_app(astore))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            page = await client.get("/job", params={"id": "a1"})
            assert page.status_code == 200
            assert "async-q" in page.text
            listing = await client.get("/jobs")
            assert "a1" in listing.text
    finally:
        await astore.close()


def test_create_app_checks_its_arguments(store: tenure.Store) -> None:
    with pytest.raises(tenure.InvalidArgument, match="store"):
        create_app("sqlite:///x.db")  # type: ignore[arg-type]
    with pytest.raises(tenure.InvalidArgument, match="refresh"):
        create_app(store, refresh=0)


# -- a store that does not answer ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "read"),
    [
        ("/queues", "queue_stats"),
        ("/jobs", "jobs"),
        ("/job?id=J", "get"),
        ("/schedules", "schedules"),
    ],
)
def test_a_page_answers_503_in_time_when_the_store_hangs(
    store: tenure.Store, monkeypatch: pytest.MonkeyPatch, path: str, read: str
) -> None:
    # A PostgreSQL store that is away takes 20-30 s to say so (its pool waits for a
    # connection, twice): the page said nothing that long.
    store.submit("J")
    release = threading.Event()

    def hangs(*_: object, **__: object) -> None:
        release.wait(10)

    monkeypatch.setattr(store, read, hangs)
    try:
        with TestClient(create_app(store, read_timeout=0.2)) as client:
            started = time.monotonic()
            page = client.get(path)
            took = time.monotonic() - started
    finally:
        release.set()
    assert page.status_code == 503, page.text
    assert f"did not answer ({read}) within 0.2 s" in _text(page.text)
    assert took < 2


def test_a_write_is_not_cut_short_by_the_read_timeout(
    store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write given up on could still take effect after the page said it failed.
    pause = store.pause_queue

    def slow_pause(queue: str) -> None:
        time.sleep(0.3)
        pause(queue)

    monkeypatch.setattr(store, "pause_queue", slow_pause)
    with TestClient(create_app(store, read_timeout=0.1)) as client:
        page = client.get("/queue/confirm", params={"queue": "default", "action": "pause"})
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        done = client.post(
            "/queue/action",
            data={"csrf_token": token.group(1), "queue": "default", "action": "pause"},
            follow_redirects=False,
        )
    assert done.status_code == 303, done.text
    assert store.paused_queues() == ["default"]


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "5", True, None])
def test_read_timeout_must_be_a_positive_number_of_seconds(
    store: tenure.Store, bad: object
) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        create_app(store, read_timeout=bad)  # type: ignore[arg-type]
    assert caught.value.argument == "read_timeout"
