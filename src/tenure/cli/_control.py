"""``tenure jobs cancel|requeue|delete|purge``: job control from the command line (the
store's `cancel`, `requeue`, `delete` and `purge`; `tenure.cli._jobs` adds them to the
``jobs`` group)."""

from __future__ import annotations

import click

from .._validate import FINISHED_STATES
from ..models import Job
from . import CliState, common_options
from ._output import job_when
from ._params import DURATION

__all__ = ["CONTROL_COMMANDS"]


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
    "--delay",
    type=DURATION,
    default=0.0,
    help="Claimable after this long, e.g. 90s, 10m, 2h (a number alone: seconds).",
)
@click.option("--reset-attempts", is_flag=True, default=False, help="Count attempts from 0.")
@common_options
@click.pass_obj
def requeue(state: CliState, job_id: str, delay: float, reset_attempts: bool) -> None:
    """Make done, dead or cancelled job JOB_ID ready again (its generation is kept, so the
    next claim takes the next token); says when it is due, as submit does."""
    job = state.store(create=False).requeue(job_id, delay=delay, reset_attempts=reset_attempts)
    _report(
        state,
        job,
        f"{job.job_id} requeued: ready, {job_when(job)}, generation {job.generation}, "
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
    type=DURATION,
    required=True,
    help="Only jobs finished at least this long ago by store time, e.g. 12h, 7d, 2w (a "
    "number alone: seconds).",
)
@common_options
@click.pass_obj
def purge(state: CliState, states: tuple[str, ...], older_than: float) -> None:
    """Delete finished jobs older than --older-than, in small batches.

    --json: {"deleted": N, "states": [...], "older_than": seconds, "store": URL}."""
    wanted = states or FINISHED_STATES
    store = state.store(create=False)
    deleted = store.purge(older_than=older_than, states=wanted)
    out = state.output()
    if out.json_mode:
        out.json(
            {
                "deleted": deleted,
                "states": list(wanted),
                "older_than": older_than,
                "store": store.url,
            }
        )
        return
    out.line(f"purged {deleted} job(s) ({', '.join(wanted)}) from {store.url}", "good")


CONTROL_COMMANDS = (cancel, requeue, delete, purge)
