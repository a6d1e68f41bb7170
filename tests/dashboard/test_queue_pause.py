"""The queues page shows each queue's paused state and offers pause and resume (issue #18),
on every backend: confirmed on a page of their own, done by a POST carrying the CSRF token,
refused without it and in read-only mode."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from starlette.testclient import TestClient

import tenure
from tenure.dashboard import create_app


@pytest.fixture
def client(store: tenure.Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as opened:
        yield opened


def _token(client: TestClient, queue: str, action: str) -> str:
    page = client.get("/queue/confirm", params={"queue": queue, "action": action})
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def _act(client: TestClient, queue: str, action: str, token: str | None = None) -> httpx.Response:
    token = _token(client, queue, action) if token is None else token
    return client.post(
        "/queue/action",
        data={"csrf_token": token, "queue": queue, "action": action},
        follow_redirects=False,
    )


def test_pause_then_resume_from_the_queues_page(client: TestClient, store: tenure.Store) -> None:
    store.submit("j1", queue="mail")
    page = client.get("/queues").text
    assert "queue=mail&amp;action=pause" in page
    done = _act(client, "mail", "pause")
    assert done.status_code == 303
    assert done.headers["location"] == "/queues"
    assert store.paused_queues() == ["mail"]
    assert store.claim_next("w", 30, queues=["mail"]) is None
    page = client.get("/queues").text
    assert "paused" in page
    assert "queue=mail&amp;action=resume" in page
    assert _act(client, "mail", "resume").status_code == 303
    assert store.paused_queues() == []


def test_pause_needs_the_csrf_token_and_a_known_action(
    client: TestClient, store: tenure.Store
) -> None:
    _token(client, "mail", "pause")  # the cookie is set
    for token in ("", "forged"):
        refused = _act(client, "mail", "pause", token)
        assert refused.status_code == 403
        assert "CSRF" in refused.text
    assert client.get("/queue/confirm", params={"queue": "mail", "action": "x"}).status_code == 400
    assert client.get("/queue/confirm", params={"queue": "", "action": "pause"}).status_code == 400
    assert store.paused_queues() == []


def test_read_only_offers_no_pause_and_refuses_it(store: tenure.Store) -> None:
    store.submit("j1", queue="mail")
    store.pause_queue("mail")
    with TestClient(create_app(store, read_only=True)) as client:
        page = client.get("/queues").text
        assert "paused" in page
        assert "/queue/confirm" not in page
        client.cookies.set("tenure_csrf", "t")
        confirm = client.get("/queue/confirm", params={"queue": "mail", "action": "resume"})
        assert confirm.status_code == 403
        assert _act(client, "mail", "resume", "t").status_code == 403
    assert store.paused_queues() == ["mail"]


def test_the_queues_page_shows_limits(client: TestClient, store: tenure.Store) -> None:
    store.submit("j1", queue="mail")
    store.set_queue_limit("mail", 4)
    page = client.get("/queues").text
    assert "mail: at most 4 leased at once, fleet-wide" in page
    store.set_queue_limit("mail", None)
    assert "Limited queues" not in client.get("/queues").text


def test_the_queues_page_shows_rates(client: TestClient, store: tenure.Store) -> None:
    store.submit("j1", queue="mail")
    store.set_queue_rate("mail", 2.5, burst=5)
    page = client.get("/queues").text
    assert "mail: at most 2.5 started a second (burst 5), fleet-wide" in page
    store.set_queue_rate("mail", None)
    assert "Rate-limited queues" not in client.get("/queues").text
