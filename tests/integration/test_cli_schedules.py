"""``tenure schedules list|add|remove``, in-process with CliRunner (issue #18)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tenure
from tests.backends import BACKENDS
from tests.integration._support import as_json, ok


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_add_list_remove_with_json(cli: Any, url: str) -> None:
    answer = as_json(
        cli(
            "schedules",
            "add",
            "nightly",
            "0 3 * * *",
            "--queue",
            "reports",
            "--payload",
            '{"kind": "daily"}',
            "--timezone",
            "Europe/Paris",
            "--catch-up",
            "once",
            "--json",
        )
    )
    assert (answer["name"], answer["cron"], answer["queue"]) == ("nightly", "0 3 * * *", "reports")
    assert (answer["payload"], answer["timezone"], answer["catch_up"]) == (
        {"kind": "daily"},
        "Europe/Paris",
        "once",
    )
    assert answer["next_tick"] > answer["created_at"]
    with tenure.connect(url) as store:
        assert [s.name for s in store.schedules()] == ["nightly"]
    listed = as_json(cli("schedules", "list", "--json"))["schedules"]
    assert [(s["name"], s["next_tick"]) for s in listed] == [("nightly", answer["next_tick"])]
    removed = as_json(cli("schedules", "remove", "nightly", "--json"))
    assert (removed["name"], removed["removed"]) == ("nightly", True)
    assert as_json(cli("schedules", "list", "--json"))["schedules"] == []


def test_text_output_and_upsert(cli: Any, url: str) -> None:
    out = ok(cli("schedules", "add", "beat", "*/5 * * * *", "--queue", "q")).stdout
    assert "schedule beat set on" in out
    assert "next tick" in out
    ok(cli("schedules", "add", "beat", "*/10 * * * *", "--queue", "q"))  # replaces it
    out = ok(cli("schedules", "list")).stdout
    assert "*/10 * * * *" in out
    assert "*/5 " not in out
    assert "schedule beat removed" in ok(cli("schedules", "remove", "beat")).stdout
    assert "no schedules on" in ok(cli("schedules", "list")).stdout


def test_options_from_the_environment(cli: Any, url: str) -> None:
    env = {"TENURE_SCHEDULES_ADD_QUEUE": "from-env", "TENURE_SCHEDULES_ADD_TIMEZONE": "Asia/Tokyo"}
    answer = as_json(cli("schedules", "add", "s", "0 * * * *", "--json", env=env))
    assert (answer["queue"], answer["timezone"]) == ("from-env", "Asia/Tokyo")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["bad", "nope", "--queue", "q"], "cron"),
        (["bad", "* * * * *", "--queue", "q", "--timezone", "Mars/Olympus"], "timezone"),
        (["bad", "* * * * *", "--queue", "q", "--payload", "{not json"], "--payload"),
        (["a:b", "* * * * *", "--queue", "q"], "name"),
    ],
)
def test_bad_input_is_one_line_with_exit_code_2(
    cli: Any, url: str, args: list[str], named: str
) -> None:
    result = cli("schedules", "add", *args, "--json")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    error = json.loads(result.stderr)
    assert error["error"] == "InvalidArgument"
    assert error["message"].startswith(named)
    assert "Traceback" not in result.stderr + result.stdout
    with tenure.connect(url) as store:
        assert store.schedules() == []


def test_a_bad_catch_up_is_a_usage_error(cli: Any) -> None:
    result = cli("schedules", "add", "s", "* * * * *", "--queue", "q", "--catch-up", "always")
    assert result.exit_code == 2
    assert "catch-up" in result.stderr


def test_removing_a_missing_schedule_exits_1(cli: Any, url: str) -> None:
    with tenure.connect(url):
        pass  # the store exists, without schedules
    result = cli("schedules", "remove", "nope", "--json")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert json.loads(result.stderr)["error"] == "ScheduleNotFound"
