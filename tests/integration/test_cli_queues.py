"""``tenure queues pause|resume|list``, in-process with CliRunner (issue #18)."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tests.backends import BACKENDS
from tests.integration._support import as_json, ok


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_pause_list_resume_with_json(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("a1", queue="a")
        store.submit("b1", queue="b")
        answer = as_json(cli("queues", "pause", "a", "--json"))
        assert (answer["queue"], answer["paused"]) == ("a", True)
        assert store.paused_queues() == ["a"]
        assert store.claim_next("w", 30, queues=["a"]) is None
        listed = as_json(cli("queues", "list", "--json"))["queues"]
        assert {"queue": "a", "paused": True} in listed
        if store.queue_stats() is not None:  # Redis counts no queues
            assert {"queue": "b", "paused": False} in listed
        answer = as_json(cli("queues", "resume", "a", "--json"))
        assert (answer["queue"], answer["paused"]) == ("a", False)
        assert store.paused_queues() == []
        lease = store.claim_next("w", 30, queues=["a"])
        assert lease is not None
        assert lease.job_id == "a1"


def test_text_output(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("a1", queue="a")
    assert "queue a paused on" in ok(cli("queues", "pause", "a")).stdout
    assert "queue a paused on" in ok(cli("queues", "pause", "a")).stdout  # idempotent
    out = ok(cli("queues", "list")).stdout
    assert "paused" in out
    assert "queue a resumed on" in ok(cli("queues", "resume", "a")).stdout
    assert "running" in ok(cli("queues", "list")).stdout


def test_a_bad_queue_name_is_one_line_with_an_exit_code(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("a1", queue="a")
    result = cli("queues", "pause", "x" * 300)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "queue" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    with tenure.connect(url) as store:
        assert store.paused_queues() == []
