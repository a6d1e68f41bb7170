"""Periodic jobs: the tick math (pure; cron through cronsim, time zones through zoneinfo).

A schedule's ticks are the times its cron expression names in its time zone. Each tick is
one job whose id is derived from the schedule's name and the tick's UTC time
(`tick_job_id`): every worker of a fleet that decides a tick is due submits the same id,
and the store's idempotent submit keeps one job, whatever the workers' clocks say. Which
ticks are due is decided here from a clock reading (`due_ticks`); the catch-up policy says
what happens to ticks missed while nobody could submit them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._validate import encode_json, validate_attempts, validate_id
from .errors import InvalidArgument

__all__ = [
    "CATCH_UP",
    "LATE_GRACE",
    "STALL_GRACE",
    "TICK_PREFIX",
    "Schedule",
    "ScheduleRow",
    "due_ticks",
    "make_schedule",
    "next_tick",
    "tick_delay",
    "tick_job_id",
    "ticks_back",
    "upcoming",
]

CATCH_UP = ("skip", "once")
# A tick at most this old when a worker looks is submitted whatever the catch-up policy: a
# loop that looked a few seconds late has missed nothing. Older ticks were missed.
LATE_GRACE = 10.0
# A worker that has been submitting all along counts a late look as late, not as missed,
# when its last submitted tick is at most this old: a loop starved of CPU or held up by a
# slow store call must not skip the ticks it was running through (the catch-up policy is
# for when no worker ran). Older (a clock stepped forward, a stop of the world), the ticks
# count as missed again, with LATE_GRACE.
STALL_GRACE = 300.0
TICK_PREFIX = "cron:"
MAX_CRON = 1000  # characters of a cron expression: lists of every minute and hour fit
# A schedule's longest name: its ticks' job ids (`tick_job_id`: the prefix, the name, ':'
# and a 20-character UTC time) must fit a job id's 255 characters.
MAX_SCHEDULE_NAME = 255 - len(TICK_PREFIX) - 1 - len("2026-01-01T00:00:00Z")
# Ticks walked at most to find the latest one due: a schedule of every second missed for
# a long time is looked at from a recent window instead (see _latest_at_or_before).
_WALK = 10_000
_WINDOWS = (60.0, 3600.0, 86400.0, 32 * 86400.0, 366 * 86400.0, 5 * 366 * 86400.0)
# Names zoneinfo finds in a host's zone directory that are not zones of the IANA database
# but the host's own: "localtime" (a link to the host's local zone), "posixrules" (the
# rules a host applies to POSIX TZ strings; not built by default since 2020), the "posix/"
# and "right/" trees some distributions build beside the plain names ("right/" zones count
# leap seconds, which epoch seconds do not). A schedule in one would tick at different
# instants on different hosts (or not at all where the name is missing), so it is refused;
# zoneinfo.available_timezones() leaves out all but "localtime" too. ("Factory", the IANA
# zone of a host whose zone was never set, is kept: it is UTC with no name, everywhere.)
_HOST_ZONES = ("localtime", "posixrules")
_HOST_TREES = ("posix/", "right/")


def _cronsim() -> Any:
    try:
        import cronsim
    except ImportError as exc:
        raise ImportError(
            "periodic jobs need a cron parser: pip install 'tenure[cron]' (it installs cronsim)"
        ) from exc
    return cronsim


@dataclass(frozen=True)
class Schedule:
    """A periodic job: ``cron`` (5 fields, or 6 with a seconds field first, as cronsim
    reads them) in time zone ``tz``; each tick submits a job to ``queue`` with
    ``payload`` (and ``max_attempts``; None: submit's default)."""

    name: str
    cron: str
    queue: str
    payload: Any
    tz: str
    catch_up: str
    max_attempts: int | None = None

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)


class ScheduleRow(NamedTuple):
    """A store schedule as drivers keep it (``tenure_schedules``, Redis's schedules hash):
    the payload as JSON text, the times in store time (set by the store: ignored in what
    `put_schedule` is given)."""

    name: str
    cron: str
    queue: str
    payload: str | None
    timezone: str
    catch_up: str
    max_attempts: int
    created_at: float = 0.0
    updated_at: float = 0.0


def make_schedule(
    name: object,
    cron: object,
    *,
    queue: object,
    payload: Any = None,
    tz: object = "UTC",
    catch_up: object = "skip",
    max_attempts: object = None,
) -> Schedule:
    """A validated `Schedule`; bad input raises `InvalidArgument` naming the argument."""
    name_s = validate_id("name", name)
    if ":" in name_s:
        # The tick's job id is cron:<name>:<tick>; a colon in the name would make two
        # schedules' ids meet.
        raise InvalidArgument("name", f"must not contain ':', got {name_s!r}")
    if len(name_s) > MAX_SCHEDULE_NAME:
        # A longer one makes tick ids past a job id's 255 characters: every tick refused.
        raise InvalidArgument(
            "name",
            f"must be at most {MAX_SCHEDULE_NAME} characters (its ticks' job ids, "
            f"cron:<name>:<tick>, are 26 more), got {len(name_s)}",
        )
    queue_s = validate_id("queue", queue)
    encode_json("payload", payload)  # refused now, not at every tick
    if not isinstance(tz, str) or not tz:
        raise InvalidArgument("tz", f"must be an IANA time zone name, got {tz!r}")
    if _host_zone(tz):
        raise InvalidArgument(
            "tz",
            f"{tz[:100]!r} is not an IANA time zone name but a zone file of this host's, "
            "which differs from host to host (and so would a fleet's ticks); use an IANA "
            "name such as 'Europe/Paris' or 'UTC'",
        )
    try:
        zone = ZoneInfo(tz)
    # (OSError: a name that is a directory of the zone database, or too long a path)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidArgument("tz", f"unknown time zone {tz[:100]!r}") from exc
    if catch_up not in CATCH_UP:
        raise InvalidArgument("catch_up", f"must be 'skip' or 'once', got {catch_up!r}")
    if not isinstance(cron, str):
        raise InvalidArgument("cron", f"must be a str, not {type(cron).__name__}")
    if len(cron) > MAX_CRON:  # (stored with the schedule, read by every worker)
        raise InvalidArgument("cron", f"must be at most {MAX_CRON} characters, got {len(cron)}")
    cronsim = _cronsim()
    try:
        cronsim.CronSim(cron, datetime.now(zone))
    except cronsim.CronSimError as exc:
        raise InvalidArgument("cron", f"not a cron expression ({exc}): {cron!r}") from exc
    attempts = None if max_attempts is None else validate_attempts(max_attempts)
    return Schedule(name_s, cron, queue_s, payload, tz, str(catch_up), attempts)


def _host_zone(tz: str) -> bool:
    """Whether ``tz`` names a zone of the host rather than of the IANA database (see
    `_HOST_ZONES`), in any case: a case-insensitive file system finds "LocalTime" too."""
    folded = tz.lower()
    return folded in _HOST_ZONES or folded.startswith(_HOST_TREES)


def _ticks(schedule: Schedule, after: float) -> Iterator[float]:
    """Every tick strictly after ``after`` (UTC epoch seconds), in order."""
    start = datetime.fromtimestamp(math.floor(after), timezone.utc).astimezone(schedule.zone())
    for moment in _cronsim().CronSim(schedule.cron, start):
        tick = moment.timestamp()
        if tick > after:
            yield tick


def next_tick(schedule: Schedule, after: float) -> float:
    """The first tick strictly after ``after``."""
    return next(_ticks(schedule, after))


def _latest_at_or_before(schedule: Schedule, last: float, now: float) -> float | None:
    # From a window before now (growing until a tick is found), so that a long downtime of
    # a frequent schedule walks at most _WALK ticks.
    for window in (*_WINDOWS, now - last):
        start = max(last, now - window)
        found: float | None = None
        for walked, tick in enumerate(_ticks(schedule, start)):
            if tick > now or walked >= _WALK:
                break
            found = tick
        if found is not None or start <= last:
            return found
    return None


def due_ticks(
    schedule: Schedule, last: float, now: float, *, grace: float = LATE_GRACE
) -> list[float]:
    """The ticks to submit at ``now`` when ticks up to ``last`` were submitted, oldest
    first. Every tick of the last ``grace`` seconds is due (a loop that looked late
    misses none: `LATE_GRACE`, or `STALL_GRACE` for a worker that has been submitting all
    along); older ones were missed, and the catch-up policy decides: ``'skip'``
    submits only the latest of them when no recent tick is due, ``'once'`` submits the
    first missed one (one run standing for all of them) besides."""
    if now <= last:
        return []
    recent: list[float] = []
    for tick in _ticks(schedule, max(last, now - grace)):
        if tick > now or len(recent) >= _WALK:
            break
        recent.append(tick)
    first = next_tick(schedule, last)
    if first >= (recent[0] if recent else now):
        return recent  # nothing missed
    once = schedule.catch_up == "once"
    if recent:
        return [first, *recent] if once else recent
    latest = _latest_at_or_before(schedule, last, now)
    if latest is None:
        return []
    return [first, latest] if once and first < latest else [latest]


def upcoming(cron: str, tz: str, after: float) -> float | None:
    """The first tick of ``cron`` in time zone ``tz`` strictly after ``after`` (for showing
    a store schedule); None when this host cannot read it (no cron extra, no such zone) or
    no worker runs it (a zone of the host's own, `_host_zone`)."""
    if _host_zone(tz):
        return None
    try:
        refused = _cronsim().CronSimError
    except ImportError:
        return None
    try:
        return next_tick(Schedule("upcoming", cron, "upcoming", None, tz, "skip"), after)
    except (refused, ValueError, StopIteration, ZoneInfoNotFoundError, OSError):
        return None


def ticks_back(schedule: Schedule, at: float, count: int) -> list[float]:
    """Up to ``count`` ticks at or before ``at``, latest first."""
    start = datetime.fromtimestamp(math.floor(at) + 1, timezone.utc).astimezone(schedule.zone())
    found: list[float] = []
    for moment in _cronsim().CronSim(schedule.cron, start, reverse=True):
        if len(found) >= count:
            break
        tick = moment.timestamp()
        if tick <= at:
            found.append(tick)
    return found


def tick_job_id(name: str, tick: float) -> str:
    """``cron:<name>:<tick in UTC, ISO 8601, to the second>``: the same for every worker."""
    moment = datetime.fromtimestamp(round(tick), timezone.utc)
    return f"{TICK_PREFIX}{name}:{moment.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def tick_delay(tick: float, store_now: float) -> float:
    """The delay that makes a tick's job claimable at its tick time by the store's clock
    (a worker whose clock is ahead submits early; its job waits)."""
    return max(0.0, min(tick - store_now, 366 * 86400.0))
