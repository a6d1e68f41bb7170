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
        assert {"queue": "a", "paused": True, "limit": None} in listed
        assert {"queue": "b", "paused": False, "limit": None} in listed
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


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_limit_list_and_clear_with_json(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        for job_id in ("a1", "a2"):
            store.submit(job_id, queue="a")
        answer = as_json(cli("queues", "limit", "a", "1", "--json"))
        assert (answer["queue"], answer["limit"]) == ("a", 1)
        assert store.queue_limits() == {"a": 1}
        assert len(store.claim_many("w", 30, 10, queues=["a"])) == 1
        listed = as_json(cli("queues", "list", "--json"))["queues"]
        assert {"queue": "a", "paused": False, "limit": 1} in listed
        answer = as_json(cli("queues", "limit", "a", "--clear", "--json"))
        assert (answer["queue"], answer["limit"]) == ("a", None)
        assert store.queue_limits() == {}
        assert len(store.claim_many("w", 30, 10, queues=["a"])) == 1


def test_limit_text_output_and_bad_input(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("a1", queue="a")
    assert "queue a limited to 2 leased at once on" in ok(cli("queues", "limit", "a", "2")).stdout
    assert ok(cli("queues", "list")).stdout.split("\n")[1].split() == ["a", "running", "2"]
    for bad in (["a", "0"], ["a", "-3"], ["a", "x"], ["a"], ["a", "2", "--clear"]):
        result = cli("queues", "limit", *bad)
        assert result.exit_code == 2, (bad, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout
    assert "n: must be from 1" in cli("queues", "limit", "a", "0").stderr
    assert "queue a has no limit on" in ok(cli("queues", "limit", "a", "--clear")).stdout
    with tenure.connect(url) as store:
        assert store.queue_limits() == {}
