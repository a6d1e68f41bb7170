"""``tenure jobs cancel|requeue|delete|purge``, in-process with CliRunner (issue #17)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tenure
from tests.backends import BACKENDS
from tests.integration._support import as_json, ok


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_cancel_requeue_delete_with_json(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("a")
        lease = store.claim("a", "w", 30)
        assert lease is not None
        job = as_json(cli("jobs", "cancel", "a", "--reason", "operator", "--json"))
        assert (job["state"], job["generation"], job["error"]) == ("cancelled", 2, "operator")
        with pytest.raises(tenure.LeaseLost):
            store.complete(lease)
        again = as_json(cli("jobs", "requeue", "a", "--delay", "1m", "--reset-attempts", "--json"))
        assert (again["state"], again["attempts"], again["generation"]) == ("ready", 0, 2)
        assert again["available_at"] == pytest.approx(again["as_of"] + 60)
        out = ok(cli("jobs", "cancel", "a")).stdout
        assert "a cancelled at generation 2" in out
        gone = as_json(cli("jobs", "delete", "a", "--json"))
        assert gone == {"deleted": "a", "store": store.url}
        with pytest.raises(tenure.JobNotFound):
            store.get("a")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_purge_with_json(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        for name in ("x", "y"):
            store.submit(name)
            store.cancel(name)
        store.submit("z")
        lease = store.claim("z", "w", 30)
        assert lease is not None
        store.complete(lease)
        store.submit("live")
        answer = as_json(
            cli("jobs", "purge", "--state", "cancelled", "--older-than", "0s", "--json")
        )
        assert (answer["deleted"], answer["states"]) == (2, ["cancelled"])
        assert answer["older_than"] == 0
        # Nothing is old enough for a week: nothing goes.
        assert as_json(cli("jobs", "purge", "--older-than", "7d", "--json"))["deleted"] == 0
        out = ok(cli("jobs", "purge", "--older-than", "0")).stdout
        assert "purged 1 job(s)" in out
        assert [job.job_id for job in store.jobs()] == ["live"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("jobs", "cancel", "missing"), 1, "job 'missing' does not exist"),
        (("jobs", "requeue", "live"), 1, "requeue refused for job 'live': it is ready"),
        (("jobs", "delete", "live"), 1, "delete refused for job 'live': it is ready"),
        (("jobs", "requeue", "live", "--delay", "soon"), 2, "'--delay': must be a duration"),
        (("jobs", "purge", "--older-than", "-1d"), 2, "'--older-than': must be 0 seconds or"),
        (("jobs", "purge"), 2, "Missing option '--older-than'"),
        (("jobs", "purge", "--older-than", "1d", "--state", "ready"), 2, "'ready' is not one"),
        (("jobs", "cancel", "live", "--reason", "x" * 5000), 2, "reason: must be at most 4096"),
    ],
)
def test_control_errors_are_one_line_with_an_exit_code(
    cli: Any, url: str, args: tuple[str, ...], code: int, message: str
) -> None:
    with tenure.connect(url) as store:
        store.submit("live")
    result = cli(*args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    with tenure.connect(url) as store:
        assert store.get("live").state == "ready"  # nothing changed


def test_state_conflict_is_json_with_json(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("live")
    result = cli("--json", "jobs", "delete", "live")
    assert result.exit_code == 1
    error = json.loads(result.stderr)
    assert error["error"] == "JobStateConflict"
    assert "it is ready" in error["message"]
