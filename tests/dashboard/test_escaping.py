"""Every user value on every page is escaped: ids, queues, owners, payloads, results and
errors that carry markup, attribute breakers, a closing textarea and unicode."""

from __future__ import annotations

from collections.abc import Iterator

import markupsafe
import pytest
from starlette.testclient import TestClient

import tenure
from tenure.dashboard import create_app

NASTY = [
    "<script>alert(1)</script>",
    '"onmouseover="alert(2)',
    "'onfocus='alert(3)",
    "</textarea><img src=x onerror=alert(4)>",
    "ünïcødé ☃ 日本語 \u202eevil",
]
# What must never appear raw in a page: the markup each value would inject.
RAW = ["<script>alert", '"onmouseover=', "'onfocus=", "</textarea><img", "<img src=x"]


@pytest.fixture
def client(store: tenure.Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as opened:
        yield opened


@pytest.fixture
def nasty_jobs(store: tenure.Store) -> list[str]:
    ids = []
    for index, value in enumerate(NASTY):
        job_id = f"{value}#{index}"
        store.submit(job_id, {"v": value, value: [value]}, queue=f"q{value}"[:60])
        ids.append(job_id)
    lease = store.claim(ids[0], owner=f"owner{NASTY[1]}", ttl=30)
    assert lease is not None
    store.fail(lease, NASTY[3], retry_in=0)
    lease = store.claim(ids[1], owner=f"owner{NASTY[0]}", ttl=30)
    assert lease is not None
    store.complete(lease, {"r": NASTY[0], "t": NASTY[3]})
    return ids


def _assert_escaped(page: str) -> None:
    for raw in RAW:
        assert raw not in page, f"{raw!r} rendered unescaped"


def test_listing_pages_escape_everything(client: TestClient, nasty_jobs: list[str]) -> None:
    pages = [
        client.get("/queues"),
        client.get("/queues/table"),
        client.get("/jobs"),
        client.get("/jobs/table"),
        client.get("/jobs", params={"owner": f"owner{NASTY[1]}"}),
        client.get("/jobs", params={"queue": f"q{NASTY[0]}", "prefix": NASTY[0]}),
    ]
    for page in pages:
        assert page.status_code == 200
        _assert_escaped(page.text)
    listing = pages[2].text
    for job_id in nasty_jobs:
        assert str(markupsafe.escape(job_id)) in listing  # shown, as text
    # the filter values come back inside value="..." attributes, escaped
    filtered = pages[5].text
    assert 'value="q&lt;script&gt;alert(1)&lt;/script&gt;"' in filtered


def test_job_pages_escape_everything(client: TestClient, nasty_jobs: list[str]) -> None:
    for job_id in nasty_jobs:
        page = client.get("/job", params={"id": job_id})
        assert page.status_code == 200, job_id
        _assert_escaped(page.text)
        _assert_escaped(client.get("/job/summary", params={"id": job_id}).text)
        # the unicode survives as text
        if "☃" in job_id:
            assert "ünïcødé ☃ 日本語" in page.text
    failed = client.get("/job", params={"id": nasty_jobs[0]}).text
    assert "&lt;/textarea&gt;&lt;img src=x onerror=alert(4)&gt;" in failed  # the error
    # ... in the attempt table too; owners are escaped there and in the bars' titles
    assert 'class="attempts"' in failed
    assert failed.count("&lt;/textarea&gt;&lt;img src=x onerror=alert(4)&gt;") >= 2
    done = client.get("/job", params={"id": nasty_jobs[1]}).text
    assert str(markupsafe.escape(f"owner{NASTY[0]}")) in done


def test_not_found_and_bad_request_messages_escape_the_input(client: TestClient) -> None:
    missing = client.get("/job", params={"id": NASTY[0]})
    assert missing.status_code == 404
    _assert_escaped(missing.text)
    bad = client.get("/jobs", params={"state": NASTY[3]})
    assert bad.status_code == 400
    _assert_escaped(bad.text)


def test_pages_forbid_inline_script(client: TestClient) -> None:
    page = client.get("/jobs")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("style-src")[0]
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
