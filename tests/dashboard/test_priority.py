"""The dashboard shows a job's priority and its own timeout (issue #18): a column of the
jobs table, and two fields of a job's page (every store)."""

from __future__ import annotations

import html as html_module
import re
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
    return html_module.unescape(" ".join(re.sub(r"<[^>]+>", " ", html).split()))


def test_priority_and_timeout_are_shown(store: tenure.Store, client: TestClient) -> None:
    store.submit("urgent", priority=7, timeout=2.5)
    store.submit("plain")
    table = _text(client.get("/jobs").text)
    assert "job queue priority state" in table
    assert "urgent default 7 ready" in table
    page = _text(client.get("/job", params={"id": "urgent"}).text)
    assert "priority 7" in page
    assert "timeout 2.5 s per attempt" in page
    assert "timeout its handler's" in _text(client.get("/job", params={"id": "plain"}).text)
