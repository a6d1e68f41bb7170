"""``tenure jobs cancel|requeue|delete|purge``: job control from the command line (the
store's `cancel`, `requeue`, `delete` and `purge`; `tenure.cli._jobs` adds them to the
``jobs`` group)."""

from __future__ import annotations

import re

import click

from .._validate import FINISHED_STATES
from ..errors import InvalidArgument
from ..models import Job
from . import CliState, common_options

__all__ = ["CONTROL_COMMANDS", "parse_duration"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", re.IGNORECASE)


def parse_duration(argument: str, text: str) -> float:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d`` or ``2w`` as seconds."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise InvalidArgument(
            argument, f"must be a duration like 90s, 15m, 12h, 7d or 2w, got {text!r}"
        )
    return float(found.group(1)) * _UNITS[(found.group(2) or "s").lower()]


def _report(state: CliState, job: Job, line: str) -> None:
    out = state.output()
    if out.json_mode:
        out.json(job.to_dict())
    else:
        out.line(line, "good")


@click.command()
@click.argument("job_id")
@click.option("--reason", default=None, metavar="TEXT", help="Kept as the job's error.")
@common_options
@click.pass_obj
def cancel(state: CliState, job_id: str, reason: str | None) -> None:
    """Cancel job JOB_ID (ready or leased; a leased job's holder loses its lease).

    Cancelling a cancelled job answers as the first time; a done or dead job is refused
    (exit code 1)."""
    job = state.store(create=False).cancel(job_id, reason)
    _report(state, job, f"{job.job_id} cancelled at generation {job.generation}: {job.error}")


@click.command()
@click.argument("job_id")
@click.option(
    "--delay", default="0", metavar="DURATION", help="Claimable after this long (e.g. 10m)."
)
@click.option("--reset-attempts", is_flag=True, default=False, help="Count attempts from 0.")
@common_options
@click.pass_obj
def requeue(state: CliState, job_id: str, delay: str, reset_attempts: bool) -> None:
    """Make done, dead or cancelled job JOB_ID ready again (its generation is kept, so the
    next claim takes the next token)."""
    seconds = parse_duration("--delay", delay)
    job = state.store(create=False).requeue(job_id, delay=seconds, reset_attempts=reset_attempts)
    _report(
        state,
        job,
        f"{job.job_id} requeued: ready, generation {job.generation}, "
        f"attempts {job.attempts} of {job.max_attempts}",
    )


@click.command()
@click.argument("job_id")
@common_options
@click.pass_obj
def delete(state: CliState, job_id: str) -> None:
    """Delete finished (done, dead or cancelled) job JOB_ID. Its generations are never
    issued again, even to a new job of the same id."""
    store = state.store(create=False)
    store.delete(job_id)
    out = state.output()
    if out.json_mode:
        out.json({"deleted": job_id, "store": store.url})
    else:
        out.line(f"{job_id} deleted from {store.url}", "good")


@click.command()
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(FINISHED_STATES),
    help="Only jobs in this state (repeat for more; default: done, dead and cancelled).",
)
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="DURATION",
    help="Only jobs finished at least this long ago by store time, e.g. 7d.",
)
@common_options
@click.pass_obj
def purge(state: CliState, states: tuple[str, ...], older_than: str) -> None:
    """Delete finished jobs older than --older-than, in small batches.

    --json: {"deleted": N, "states": [...], "older_than": seconds, "store": URL}."""
    seconds = parse_duration("--older-than", older_than)
    wanted = states or FINISHED_STATES
    store = state.store(create=False)
    deleted = store.purge(older_than=seconds, states=wanted)
    out = state.output()
    if out.json_mode:
        out.json(
            {
                "deleted": deleted,
                "states": list(wanted),
                "older_than": seconds,
                "store": store.url,
            }
        )
        return
    out.line(f"purged {deleted} job(s) ({', '.join(wanted)}) from {store.url}", "good")


CONTROL_COMMANDS = (cancel, requeue, delete, purge)
