"""``tenure queues pause|resume|limit|rate|list``, in-process with CliRunner (issue #18)."""

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
        assert {"queue": "a", "paused": True, "limit": None, "rate": None} in listed
        assert {"queue": "b", "paused": False, "limit": None, "rate": None} in listed
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
        assert {"queue": "a", "paused": False, "limit": 1, "rate": None} in listed
        answer = as_json(cli("queues", "limit", "a", "--clear", "--json"))
        assert (answer["queue"], answer["limit"]) == ("a", None)
        assert store.queue_limits() == {}
        assert len(store.claim_many("w", 30, 10, queues=["a"])) == 1


def test_limit_text_output_and_bad_input(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("a1", queue="a")
    assert "queue a limited to 2 leased at once on" in ok(cli("queues", "limit", "a", "2")).stdout
    listed = ok(cli("queues", "list")).stdout.split("\n")[1].split()
    assert listed == ["a", "running", "2", "-", "-"]
    for bad in (["a", "0"], ["a", "-3"], ["a", "x"], ["a"], ["a", "2", "--clear"]):
        result = cli("queues", "limit", *bad)
        assert result.exit_code == 2, (bad, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout
    assert "n: must be from 1" in cli("queues", "limit", "a", "0").stderr
    assert "queue a has no limit on" in ok(cli("queues", "limit", "a", "--clear")).stdout
    with tenure.connect(url) as store:
        assert store.queue_limits() == {}


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_rate_list_and_clear_with_json(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        for job_id in ("a1", "a2", "a3"):
            store.submit(job_id, queue="a")
        answer = as_json(cli("queues", "rate", "a", "0.5", "--burst", "2", "--json"))
        assert answer["queue"] == "a"
        assert answer["rate"] == {"per_second": 0.5, "burst": 2}
        assert store.queue_rates() == {"a": tenure.QueueRate(0.5, 2)}
        assert len(store.claim_many("w", 30, 10, queues=["a"])) == 2
        listed = as_json(cli("queues", "list", "--json"))["queues"]
        rate = {"per_second": 0.5, "burst": 2}
        assert {"queue": "a", "paused": False, "limit": None, "rate": rate} in listed
        answer = as_json(cli("queues", "rate", "a", "--clear", "--json"))
        assert (answer["queue"], answer["rate"]) == ("a", None)
        assert store.queue_rates() == {}
        assert len(store.claim_many("w", 30, 10, queues=["a"])) == 1


def test_rate_text_output_and_bad_input(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("a1", queue="a")
    out = ok(cli("queues", "rate", "a", "2.5")).stdout
    assert "queue a starts at most 2.5 jobs a second (burst 3) on" in out
    listed = ok(cli("queues", "list")).stdout.split("\n")[1].split()
    assert listed == ["a", "running", "-", "2.5", "3"]
    bad_calls = (
        ["a", "0"],
        ["a", "-3"],
        ["a", "x"],
        ["a", "inf"],
        ["a", "nan"],
        ["a", "2", "--burst", "0"],
        ["a", "2", "--burst", "1.5"],
        ["a"],
        ["a", "2", "--clear"],
        ["a", "--clear", "--burst", "2"],
    )
    for bad in bad_calls:
        result = cli("queues", "rate", *bad)
        assert result.exit_code == 2, (bad, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout
    assert "per_second: must be a finite number" in cli("queues", "rate", "a", "0").stderr
    assert "burst: must be from 1" in cli("queues", "rate", "a", "1", "--burst", "0").stderr
    with tenure.connect(url) as store:
        assert store.queue_rates() == {"a": tenure.QueueRate(2.5, 3)}
    assert "queue a has no rate on" in ok(cli("queues", "rate", "a", "--clear")).stdout
    with tenure.connect(url) as store:
        assert store.queue_rates() == {}
