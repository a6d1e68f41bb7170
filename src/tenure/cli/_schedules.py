"""``tenure schedules list|add|remove``: the store's schedules from the command line (the
store's `schedules`, `add_schedule` and `remove_schedule`). Every worker serving a
schedule's queue submits its ticks (docs/worker.md, "Periodic jobs")."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from .._schedule import CATCH_UP, upcoming
from .._validate import DEFAULT_MAX_ATTEMPTS
from ..models import StoredSchedule
from . import CliError, CliState, common_options
from ._jobs import parse_payload

__all__ = ["schedules"]


@click.group()
def schedules() -> None:
    """Periodic jobs kept in the store: every worker serving the queue runs them."""


def _iso(moment: float | None) -> str:
    if moment is None:
        return "-"
    return dt.datetime.fromtimestamp(moment, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _view(schedule: StoredSchedule, now: float) -> dict[str, Any]:
    return {**schedule.to_dict(), "next_tick": upcoming(schedule.cron, schedule.timezone, now)}


@schedules.command(name="list")
@common_options
@click.pass_obj
def list_schedules(state: CliState) -> None:
    """The store's schedules, by name, each with its next tick (UTC, by store time).

    --json: {"schedules": [{"name", "cron", "queue", "payload", "timezone", "catch_up",
    "max_attempts", "created_at", "updated_at", "next_tick"}...], "store"}."""
    store = state.store(create=False)
    now = store.now()
    rows = [_view(schedule, now) for schedule in store.schedules()]
    out = state.output()
    if out.json_mode:
        out.json({"schedules": rows, "store": store.url})
    elif not rows:
        out.line(f"no schedules on {store.url}")
    else:
        out.table(
            ["name", "cron", "timezone", "queue", "catch-up", "next tick"],
            [
                [
                    str(row["name"]),
                    str(row["cron"]),
                    str(row["timezone"]),
                    str(row["queue"]),
                    str(row["catch_up"]),
                    _iso(row["next_tick"]),
                ]
                for row in rows
            ],
        )


@schedules.command()
@click.argument("name")
@click.argument("cron")
@click.option("--queue", required=True, metavar="Q", help="The queue its jobs go to.")
@click.option("--payload", metavar="JSON", help="Each job's payload as JSON text; '-': stdin.")
@click.option("--timezone", default="UTC", metavar="TZ", help="IANA time zone of CRON.")
@click.option(
    "--catch-up",
    type=click.Choice(CATCH_UP),
    default="skip",
    help="Ticks missed while no worker ran: skip them, or run once for them.",
)
@click.option(
    "--max-attempts",
    type=int,
    default=DEFAULT_MAX_ATTEMPTS,
    metavar="N",
    help="Claims allowed before a tick's job is dead.",
)
@common_options
@click.pass_obj
def add(
    state: CliState,
    name: str,
    cron: str,
    queue: str,
    payload: str | None,
    timezone: str,
    catch_up: str,
    max_attempts: int,
) -> None:
    """Add the schedule NAME, or replace the one of that name: a job to --queue for each
    tick of CRON (quote it: "0 3 * * *"; 6 fields: seconds first), one across the fleet.

    Workers see it within 30 s. --json: the schedule, with "next_tick" and "store"."""
    store = state.store()
    added = store.add_schedule(
        name,
        cron,
        queue=queue,
        payload=parse_payload(payload),
        timezone=timezone,
        catch_up=catch_up,
        max_attempts=max_attempts,
    )
    view = _view(added, store.now())
    out = state.output()
    if out.json_mode:
        out.json({**view, "store": store.url})
    else:
        out.line(
            f"schedule {added.name} set on {store.url}: {added.cron!r} ({added.timezone}) "
            f"to queue {added.queue}, next tick {_iso(view['next_tick'])}",
            "good",
        )


@schedules.command()
@click.argument("name")
@common_options
@click.pass_obj
def remove(state: CliState, name: str) -> None:
    """Remove the schedule NAME: workers stop submitting its ticks within 30 s (jobs
    already submitted stay). No such schedule: exit code 1.

    --json: {"name", "removed": true, "store"}."""
    store = state.store(create=False)
    if not store.remove_schedule(name):
        raise CliError(
            f"no schedule {name!r} on {store.url}", json_mode=state.json, kind="ScheduleNotFound"
        )
    out = state.output()
    if out.json_mode:
        out.json({"name": name, "removed": True, "store": store.url})
    else:
        out.line(f"schedule {name} removed from {store.url}", "good")
