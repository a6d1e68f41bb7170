"""The tick math of periodic jobs (tenure._schedule): pure, with clock readings as numbers."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

import tenure
from tenure._schedule import (
    MAX_SCHEDULE_NAME,
    due_ticks,
    make_schedule,
    next_tick,
    tick_delay,
    tick_job_id,
    ticks_back,
    upcoming,
)
from tenure._validate import validate_id

PARIS = ZoneInfo("Europe/Paris")


def at(*fields: int, tz: ZoneInfo | None = None) -> float:
    return datetime(*fields, tzinfo=tz or timezone.utc).timestamp()  # type: ignore[misc]


def test_every_five_minutes() -> None:
    schedule = make_schedule("s", "*/5 * * * *", queue="q")
    assert next_tick(schedule, at(2026, 1, 1, 10, 2)) == at(2026, 1, 1, 10, 5)
    assert next_tick(schedule, at(2026, 1, 1, 10, 5)) == at(2026, 1, 1, 10, 10)  # strictly after


def test_nothing_due_until_the_tick() -> None:
    schedule = make_schedule("s", "*/5 * * * *", queue="q")
    last = at(2026, 1, 1, 10, 0)
    assert due_ticks(schedule, last, last + 299) == []
    assert due_ticks(schedule, last, last + 300) == [last + 300]
    assert due_ticks(schedule, last, last - 5) == []  # a clock that stepped back


def test_seconds_field_first() -> None:
    schedule = make_schedule("s", "*/10 * * * * *", queue="q")
    assert due_ticks(schedule, 100.0, 125.0) == [120.0]


def test_catch_up_skip_submits_the_latest_tick_only() -> None:
    schedule = make_schedule("s", "* * * * *", queue="q", catch_up="skip")
    assert due_ticks(schedule, at(2026, 1, 1), at(2026, 1, 1, 5, 30, 10)) == [at(2026, 1, 1, 5, 30)]


def test_catch_up_once_adds_one_run_for_the_missed_ticks() -> None:
    schedule = make_schedule("s", "* * * * *", queue="q", catch_up="once")
    assert due_ticks(schedule, at(2026, 1, 1), at(2026, 1, 1, 5, 30, 10)) == [
        at(2026, 1, 1, 0, 1),
        at(2026, 1, 1, 5, 30),
    ]
    # One tick due, nothing missed: one run.
    assert due_ticks(schedule, at(2026, 1, 1), at(2026, 1, 1, 0, 1, 5)) == [at(2026, 1, 1, 0, 1)]


def test_a_long_downtime_of_a_frequent_schedule_is_bounded() -> None:
    schedule = make_schedule("s", "* * * * * *", queue="q")  # every second
    now = at(2026, 6, 1)
    # A year of missed seconds: the ticks of the last LATE_GRACE seconds only.
    assert due_ticks(schedule, at(2025, 6, 1), now) == [now - n for n in range(9, -1, -1)]


def test_recent_ticks_are_all_due_whatever_the_policy() -> None:
    # A loop that looks 3 s late has missed nothing: every tick of the grace is due.
    schedule = make_schedule("s", "* * * * * *", queue="q", catch_up="skip")
    assert due_ticks(schedule, 100.0, 103.5) == [101.0, 102.0, 103.0]


def test_time_zone_and_spring_forward() -> None:
    # Europe/Paris skips 02:00-03:00 on 2026-03-29: a 02:30 schedule runs at 03:00 that day.
    schedule = make_schedule("s", "30 2 * * *", queue="q", tz="Europe/Paris")
    first = next_tick(schedule, at(2026, 3, 28, 12, tz=PARIS))
    assert first == at(2026, 3, 29, 3, 0, tz=PARIS)
    assert next_tick(schedule, first) == at(2026, 3, 30, 2, 30, tz=PARIS)


def test_time_zone_and_fall_back() -> None:
    # 2026-10-25 02:00-03:00 Paris happens twice: a 02:30 schedule ticks once that day.
    schedule = make_schedule("s", "30 2 * * *", queue="q", tz="Europe/Paris")
    start = at(2026, 10, 24, 12, tz=PARIS)
    ticks = due_ticks(
        make_schedule("s", "30 2 * * *", queue="q", tz="Europe/Paris", catch_up="once"),
        start,
        start + 26 * 3600,
    )
    assert ticks == [at(2026, 10, 25, 0, 30)]  # the first 02:30 (CEST, UTC+2)
    # The next 02:30 is CET's: 25 hours later, with no tick at the second 02:30 between.
    assert next_tick(schedule, ticks[0]) - ticks[0] == 25 * 3600


def test_hourly_ticks_across_fall_back_are_an_hour_apart() -> None:
    schedule = make_schedule("s", "0 * * * *", queue="q", tz="Europe/Paris")
    tick = at(2026, 10, 24, 23)
    for _ in range(5):
        following = next_tick(schedule, tick)
        assert following - tick == 3600
        tick = following


def test_tick_job_id_is_the_same_for_every_worker() -> None:
    assert tick_job_id("report", at(2026, 1, 1, 10, 5)) == "cron:report:2026-01-01T10:05:00Z"
    assert tick_job_id("report", at(2026, 1, 1, 10, 5) + 0.0004) == tick_job_id(
        "report", at(2026, 1, 1, 10, 5)
    )


def test_the_longest_schedule_name_makes_tick_ids_a_store_takes() -> None:
    name = "n" * MAX_SCHEDULE_NAME
    schedule = make_schedule(name, "* * * * *", queue="q")
    job_id = tick_job_id(schedule.name, at(2026, 12, 31, 23, 59))
    assert len(job_id) == 255
    assert validate_id("job_id", job_id) == job_id


def test_tick_delay_waits_for_the_tick_by_store_time() -> None:
    assert tick_delay(100.0, 70.0) == 30.0  # the submitting worker's clock is ahead
    assert tick_delay(100.0, 130.0) == 0.0  # behind: the tick is due already


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"name": "", "cron": "* * * * *"}, "name"),
        ({"name": "a:b", "cron": "* * * * *"}, "name"),
        ({"name": "n" * 230, "cron": "* * * * *"}, "name"),
        ({"name": "a", "cron": "not cron"}, "cron"),
        ({"name": "a", "cron": 5}, "cron"),
        ({"name": "a", "cron": "61 * * * *"}, "cron"),
        ({"name": "a", "cron": "* * * * *", "tz": "Mars/Olympus"}, "tz"),
        ({"name": "a", "cron": "* * * * *", "tz": ""}, "tz"),
        ({"name": "a", "cron": "* * * * *", "catch_up": "all"}, "catch_up"),
        ({"name": "a", "cron": "* * * * *", "queue": ""}, "queue"),
        ({"name": "a", "cron": "* * * * *", "payload": {"x": float("nan")}}, "payload"),
        ({"name": "a", "cron": "* * * * *", "payload": object()}, "payload"),
    ],
)
def test_bad_schedules(arguments: dict[str, object], named: str) -> None:
    options = {"queue": "q", **arguments}
    with pytest.raises(tenure.InvalidArgument) as caught:
        make_schedule(options.pop("name"), options.pop("cron"), **options)  # type: ignore[arg-type]
    assert caught.value.argument == named


# Zone names zoneinfo may find on a host that are the host's own files, not IANA zones:
# "localtime" is whatever zone the host is set to; the rest exist on some hosts only.
HOST_ZONES = ["localtime", "posixrules", "posix/Europe/Paris", "right/UTC", "LocalTime"]


@pytest.mark.parametrize("tz", HOST_ZONES)
def test_a_zone_of_the_hosts_own_is_refused(tz: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        make_schedule("a", "* * * * *", queue="q", tz=tz)
    assert caught.value.argument == "tz"
    assert "not an IANA time zone name" in caught.value.rule
    assert "'Europe/Paris' or 'UTC'" in caught.value.rule


@pytest.mark.parametrize("tz", ["Factory", "Etc/UTC", "America/Argentina/Buenos_Aires"])
def test_iana_names_are_kept(tz: str) -> None:
    # (Factory: the IANA zone of a host whose zone was never set, UTC everywhere)
    assert make_schedule("a", "* * * * *", queue="q", tz=tz).tz == tz


@pytest.mark.parametrize("tz", HOST_ZONES)
def test_no_upcoming_tick_is_shown_in_a_zone_no_worker_runs(tz: str) -> None:
    assert upcoming("* * * * *", tz, at(2026, 1, 1)) is None
    assert upcoming("* * * * *", "Europe/Paris", at(2026, 1, 1)) == at(2026, 1, 1, 0, 1)


def test_ticks_back_from_a_moment() -> None:
    schedule = make_schedule("s", "*/5 * * * *", queue="q")
    assert ticks_back(schedule, 600.0, 3) == [600.0, 300.0, 0.0]  # at the moment counts
    assert ticks_back(schedule, 599.0, 2) == [300.0, 0.0]


def test_without_cronsim_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)  # import cronsim raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'tenure\[cron\]'"):
        make_schedule("s", "* * * * *", queue="q")
