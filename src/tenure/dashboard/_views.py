"""What each page shows, read from the store: plain values for the templates (which escape
every one of them), no HTML here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from .._queue_stats import StoreStats
from .._schedule import upcoming
from .._validate import MAX_BATCH
from ..errors import InvalidArgument
from ..models import Attempt, Job, JobState, QueueRate, StoredSchedule
from ._reader import Reader

__all__ = [
    "PAGE_SIZE",
    "SCAN_LIMIT",
    "STATES",
    "Filters",
    "JobsPage",
    "QueuesPage",
    "ScheduleLine",
    "SchedulesPage",
    "TimelineBar",
    "clock_time",
    "jobs_page",
    "pretty_json",
    "queues_page",
    "schedules_page",
    "seconds",
    "timeline",
]

PAGE_SIZE = 50
STATES = tuple(str(state) for state in JobState)


@dataclass(frozen=True)
class Filters:
    """The jobs page's filters, from its query string. ``queue``, ``state`` and ``owner``
    (exact) go to the store; ``prefix`` (of the job id) is applied to what it returns.
    ``after`` is the store's cursor of the page to show (None: the first), ``page`` only
    the number shown for it."""

    queue: str | None = None
    state: str | None = None
    owner: str | None = None
    prefix: str | None = None
    after: str | None = None
    page: int = 1

    @classmethod
    def parse(cls, query: Any) -> Filters:
        def text(name: str) -> str | None:
            value = str(query.get(name, "")).strip()
            return value or None

        state = text("state")
        if state is not None and state not in STATES:
            raise InvalidArgument("state", f"must be one of {', '.join(STATES)}, got {state!r}")
        after = text("after")
        page_text = text("page") or "1"
        if not (page_text.isascii() and page_text.isdigit()) or not 1 <= int(page_text) <= 10**9:
            raise InvalidArgument("page", f"must be a page number from 1, got {page_text!r}")
        if (after is None) != (int(page_text) == 1):
            raise InvalidArgument("page", "a page after the first comes with its cursor (after)")
        return cls(text("queue"), state, text("owner"), text("prefix"), after, int(page_text))

    def query(self, **changes: Any) -> str:
        """This filter's query string, with ``changes`` (e.g. the next page's)."""
        values = {
            "queue": self.queue,
            "state": self.state,
            "owner": self.owner,
            "prefix": self.prefix,
            "after": self.after,
            "page": self.page,
            **changes,
        }
        kept = {k: v for k, v in values.items() if v is not None and not (k == "page" and v == 1)}
        return urlencode(kept)

    def next_page(self, cursor: str) -> str:
        return self.query(after=cursor, page=self.page + 1)

    def first_page(self) -> str:
        return self.query(after=None, page=1)


@dataclass(frozen=True)
class JobsPage:
    filters: Filters
    jobs: list[Job]
    as_of: float
    # The store's cursor of the next page (None: this is the last).
    next_cursor: str | None
    # Jobs the store listed for this page and the id prefix left out (a page with a prefix
    # reads at most SCAN_LIMIT of them, then offers to go on).
    scanned: int = 0


# Jobs a page with an id prefix reads from the store at most before it shows what it found
# and offers the next page: a prefix matching nothing costs a bounded read per view.
SCAN_LIMIT = 5 * MAX_BATCH


async def jobs_page(reader: Reader, filters: Filters) -> JobsPage:
    """One page of jobs, oldest first, through the store's paged listing: PAGE_SIZE of
    them; with an id prefix, the store's pages are read on until PAGE_SIZE match (a page
    may then show up to MAX_BATCH) or SCAN_LIMIT jobs were read."""
    cursor, shown, scanned = filters.after, [], 0
    as_of: float | None = None
    while True:
        size = PAGE_SIZE if filters.prefix is None else MAX_BATCH
        found = await reader.jobs(
            queue=filters.queue,
            state=filters.state,
            owner=filters.owner,
            limit=size,
            cursor=cursor,
        )
        if as_of is None and found:
            as_of = found[0].as_of
        cursor = found.next_cursor
        if filters.prefix is None:
            shown = list(found)
            break
        scanned += len(found)
        shown += [job for job in found if job.job_id.startswith(filters.prefix)]
        if cursor is None or len(shown) >= PAGE_SIZE or scanned >= SCAN_LIMIT:
            break
    if as_of is None:
        as_of = await reader.now()
    return JobsPage(filters, shown, as_of, cursor, scanned)


@dataclass(frozen=True)
class QueuesPage:
    stats: StoreStats | None
    as_of: float
    # Queues seen in the oldest jobs (when the store cannot count), else empty.
    seen: list[str] = field(default_factory=list)
    # The paused queues (claims skip them), sorted.
    paused: list[str] = field(default_factory=list)
    # The fleet-wide limits of the limited queues (at most so many leased at once).
    limits: dict[str, int] = field(default_factory=dict)
    # The fleet-wide rates of the rate-limited queues (jobs started a second, burst).
    rates: dict[str, QueueRate] = field(default_factory=dict)


async def queues_page(reader: Reader) -> QueuesPage:
    paused = await reader.paused_queues()
    limits = await reader.queue_limits()
    rates = await reader.queue_rates()
    stats = await reader.queue_stats()
    if stats is not None:
        return QueuesPage(stats, stats.as_of, paused=paused, limits=limits, rates=rates)
    found = await reader.jobs(queue=None, state=None, limit=MAX_BATCH)
    as_of = found[0].as_of if found else await reader.now()
    seen = sorted({job.queue for job in found})
    return QueuesPage(None, as_of, seen, paused, limits, rates)


@dataclass(frozen=True)
class ScheduleLine:
    schedule: StoredSchedule
    # Its next tick after the store's time (None: this host cannot read its cron or zone).
    next_tick: float | None


@dataclass(frozen=True)
class SchedulesPage:
    lines: list[ScheduleLine]
    as_of: float


async def schedules_page(reader: Reader) -> SchedulesPage:
    found = await reader.schedules()
    now = await reader.now()
    lines = [ScheduleLine(s, upcoming(s.cron, s.timezone, now)) for s in found]
    return SchedulesPage(lines, now)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def clock_time(value: float | None) -> str:
    """A store time as UTC, to the millisecond."""
    if value is None:
        return "—"
    moment = datetime.fromtimestamp(value, tz=timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def seconds(value: float) -> str:
    """A duration, short: 0.4 s, 12 s, 3 min 5 s, 2 h 1 min."""
    size = abs(value)
    sign = "-" if value < 0 else ""
    if size < 10:
        return f"{sign}{size:.1f} s"
    if size < 120:
        return f"{sign}{size:.0f} s"
    if size < 7200:
        return f"{sign}{int(size // 60)} min {int(size % 60)} s"
    return f"{sign}{int(size // 3600)} h {int(size % 3600 // 60)} min"


@dataclass(frozen=True)
class TimelineBar:
    """One attempt on the job page's timeline: where its bar sits (percent of the span
    from the first attempt's start to the last one's end, or to now while it is open) and
    its colour, the chaos report's colour of its generation."""

    attempt: Attempt
    left: float
    width: float
    color: str
    duration: float

    @property
    def label(self) -> str:
        return "current" if self.attempt.ending is None else str(self.attempt.ending)


def generation_color(generation: int) -> str:
    """The chaos report's colour of a generation (tenure.chaos's _gen_color)."""
    return f"hsl({(generation * 67) % 360}, 65%, 55%)"


def timeline(attempts: list[Attempt], as_of: float) -> list[TimelineBar]:
    """The bars of the job page's attempt timeline, oldest first."""
    if not attempts:
        return []
    start = attempts[0].started_at
    ends = [as_of if a.ended_at is None else a.ended_at for a in attempts]
    span = max(max(ends) - start, 1e-9)
    bars = []
    for attempt, end in zip(attempts, ends, strict=True):
        left = 100.0 * (attempt.started_at - start) / span
        width = max(0.5, 100.0 * (end - attempt.started_at) / span)
        bars.append(
            TimelineBar(
                attempt,
                round(min(left, 99.5), 2),
                round(min(width, 100.0 - min(left, 99.5)), 2),
                generation_color(attempt.generation),
                end - attempt.started_at,
            )
        )
    return bars
