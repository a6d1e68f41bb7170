"""Store schedules on every store (issue #18): add_schedule upserts by name (created_at
kept, updated_at by store time), schedules() lists them by name, remove_schedule removes
one; bad input is InvalidArgument naming the argument, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
import tenure.aio
from tests.conformance._bad_values import BAD_IDS, BAD_JSON

PAYLOAD = {"report": "daily", "é": [1, 2.5, None, True], "n": 10**15 + 1}


def test_add_list_and_remove(store: tenure.Store, clock: tenure.ManualClock) -> None:
    assert store.schedules() == []
    added = store.add_schedule("nightly", "0 3 * * *", queue="reports", payload=PAYLOAD)
    assert isinstance(added, tenure.StoredSchedule)
    assert (added.name, added.cron, added.queue, added.payload) == (
        "nightly",
        "0 3 * * *",
        "reports",
        PAYLOAD,
    )
    assert (added.timezone, added.catch_up, added.max_attempts) == ("UTC", "skip", 5)
    assert added.created_at == added.updated_at == pytest.approx(clock.time(), abs=1e-3)
    store.add_schedule("beat", "*/5 * * * * *", queue="beat", catch_up="once", max_attempts=1)
    listed = store.schedules()
    assert [s.name for s in listed] == ["beat", "nightly"]
    assert listed[1] == added
    assert (listed[0].catch_up, listed[0].max_attempts, listed[0].payload) == ("once", 1, None)
    assert store.remove_schedule("nightly") is True
    assert store.remove_schedule("nightly") is False
    assert [s.name for s in store.schedules()] == ["beat"]


def test_add_again_replaces_and_keeps_created_at(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    first = store.add_schedule("s", "* * * * *", queue="a", payload=[1])
    clock.advance(90)
    second = store.add_schedule(
        "s", "*/2 * * * *", queue="b", timezone="Europe/Paris", catch_up="once", max_attempts=3
    )
    assert second.created_at == first.created_at
    assert second.updated_at == pytest.approx(first.updated_at + 90, abs=1e-3)
    assert store.schedules() == [second]
    assert (second.cron, second.queue, second.payload, second.timezone) == (
        "*/2 * * * *",
        "b",
        None,
        "Europe/Paris",
    )
    assert (second.catch_up, second.max_attempts) == ("once", 3)
    assert second.to_dict()["timezone"] == "Europe/Paris"


@pytest.mark.anyio
async def test_the_async_store_has_the_same_methods(astore: tenure.aio.AsyncStore) -> None:
    added = await astore.add_schedule("a", "0 * * * *", queue="q", payload="hi")
    assert await astore.schedules() == [added]
    assert await astore.remove_schedule("a") is True
    assert await astore.schedules() == []


# (argument, value): each must be refused with that argument named. One test per store
# walks them all (a store per case would cost a schema each on PostgreSQL).
BAD: list[tuple[str, Any]] = [
    # (230 characters: its ticks' job ids would pass 255, and every tick be refused)
    *(("name", value) for value in [*BAD_IDS[:6], "has:colon", "n" * 230, 7, None]),
    *(("cron", value) for value in ["nope", "* * *", "61 * * * *", "", 5, None, "* " * 600]),
    *(("queue", value) for value in [*BAD_IDS[:4], 3, None]),
    *(("payload", value) for value in [*BAD_JSON[:4], "a" * (1024 * 1024)]),
    # ("Europe": a directory of the zone database; 300 characters: too long a path)
    *(("timezone", v) for v in ["Mars/Olympus", "", 1, None, "../etc", "Europe", "a" * 300]),
    # Zone files of the host's own, not IANA zones: "localtime" is whatever the host is set
    # to, the others exist on some hosts only (a fleet's workers would tick apart).
    *(("timezone", v) for v in ["localtime", "posixrules", "posix/Asia/Tokyo", "right/UTC"]),
    *(("catch_up", value) for value in ["always", "", None, True]),
    *(("max_attempts", value) for value in [0, -1, True, 1.5, "3", None]),
]


def test_bad_input_names_the_argument_and_changes_nothing(store: tenure.Store) -> None:
    kept = store.add_schedule("kept", "* * * * *", queue="q", payload={"v": 1})
    for argument, value in BAD:
        call: dict[str, Any] = {"name": "kept", "cron": "*/5 * * * *", "queue": "other"}
        call[argument] = value
        name, cron = call.pop("name"), call.pop("cron")
        with pytest.raises(tenure.InvalidArgument) as caught:
            store.add_schedule(name, cron, **call)
        assert caught.value.argument == argument, (argument, value, caught.value)
        assert caught.value.rule
    for name in [*BAD_IDS[:6], 7, None]:
        with pytest.raises(tenure.InvalidArgument) as caught:
            store.remove_schedule(name)
        assert caught.value.argument == "name"
    assert store.schedules() == [kept]
