"""``tenure jobs submit|list|show`` and ``tenure now``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .._store import DEFAULT_MAX_ATTEMPTS
from ..errors import InvalidArgument
from ..models import Job
from . import CliState, common_options
from ._output import Cell, format_time, format_value, relative

__all__ = ["jobs", "now"]

_STATES = ("ready", "leased", "done", "dead")
_STATE_STYLES = {"ready": None, "leased": "warn", "done": "good", "dead": "bad"}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_payload(text: str | None) -> Any:
    """``--payload``: JSON text, or ``-`` to read it from stdin."""
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise InvalidArgument(
            "--payload", f'must be JSON text (e.g. \'{{"month": "2026-11"}}\'): {exc}'
        ) from None


def _state_cell(job: Job) -> Cell:
    if job.lease_expired:
        return Cell("leased (expired)", "warn")
    return Cell(job.state, _STATE_STYLES[job.state])


def _when(job: Job) -> str:
    """When the job next matters, in words, relative to store time."""
    if job.state == "ready":
        due = relative(job.available_at, job.as_of)
        return "due now" if job.available_at <= job.as_of else f"due {due}"
    if job.state == "leased" and job.lease_until is not None:
        if job.lease_expired:
            return f"lease ended {relative(job.lease_until, job.as_of)}, claimable"
        return f"lease ends {relative(job.lease_until, job.as_of)}"
    return f"{job.state} {relative(job.updated_at, job.as_of)}"


@click.group()
def jobs() -> None:
    """Submit and inspect jobs."""


@jobs.command()
@click.argument("job_id")
@click.option("--payload", metavar="JSON", help="The job's payload as JSON text; '-' reads stdin.")
@click.option("--queue", default="default", metavar="Q", help="Queue to put the job in.")
@click.option(
    "--delay", type=float, default=0.0, metavar="S", help="Seconds before it can be claimed."
)
@click.option(
    "--max-attempts",
    type=int,
    default=DEFAULT_MAX_ATTEMPTS,
    metavar="N",
    help="Claims allowed before the job is dead.",
)
@common_options
@click.pass_obj
def submit(
    state: CliState,
    job_id: str,
    payload: str | None,
    queue: str,
    delay: float,
    max_attempts: int,
) -> None:
    """Add job JOB_ID (idempotent: an existing job is left unchanged)."""
    value = parse_payload(payload)
    job = state.store().submit(job_id, value, queue=queue, delay=delay, max_attempts=max_attempts)
    out = state.output()
    if out.json_mode:
        out.json(job.to_dict())
        return
    as_requested = (job.queue, job.payload, job.max_attempts) == (queue, value, max_attempts)
    if as_requested and job.created_at == job.as_of:
        out.line(f"submitted {job.job_id} to queue {job.queue}: {_when(job)}", "good")
    else:
        out.line(f"{job.job_id} already exists (submit is idempotent): left unchanged", "warn")
    _show_job(state, job)


@jobs.command("list")
@click.option("--queue", default=None, metavar="Q", help="Only this queue.")
@click.option(
    "--state", "state_", type=click.Choice(_STATES), default=None, help="Only this state."
)
@click.option("--limit", type=int, default=100, metavar="N", help="At most N jobs (1-1000).")
@common_options
@click.pass_obj
def list_jobs(state: CliState, queue: str | None, state_: str | None, limit: int) -> None:
    """List jobs, oldest first."""
    found = state.store().jobs(queue=queue, state=state_, limit=limit)  # type: ignore[arg-type]
    out = state.output()
    if out.json_mode:
        out.json([job.to_dict() for job in found])
        return
    if not found:
        filters = " ".join(
            f"{name} {value}" for name, value in (("queue", queue), ("state", state_)) if value
        )
        out.line(f"no jobs{' with ' + filters if filters else ''} in {state.store().url}")
        return
    out.table(
        ["job", "queue", "state", "gen", "owner", "attempts", "when"],
        [
            [
                job.job_id,
                job.queue,
                _state_cell(job),
                str(job.generation),
                job.owner or "-",
                f"{job.attempts}/{job.max_attempts}",
                _when(job),
            ]
            for job in found
        ],
    )


@jobs.command()
@click.argument("job_id")
@common_options
@click.pass_obj
def show(state: CliState, job_id: str) -> None:
    """Show one job (JobNotFound: exit code 1)."""
    job = state.store().get(job_id)
    out = state.output()
    if out.json_mode:
        out.json(job.to_dict())
        return
    _show_job(state, job)


def _show_job(state: CliState, job: Job) -> None:
    def at(moment: float | None) -> str:
        if moment is None:
            return "-"
        return f"{format_time(moment)} ({relative(moment, job.as_of)})"

    state.output().fields(
        [
            ("job", job.job_id),
            ("queue", job.queue),
            ("state", _state_cell(job)),
            ("when", _when(job)),
            ("generation", str(job.generation)),
            ("owner", job.owner or "-"),
            ("attempts", f"{job.attempts} of {job.max_attempts}"),
            ("lease until", at(job.lease_until)),
            ("available at", at(job.available_at)),
            ("payload", format_value(job.payload)),
            ("result", format_value(job.result)),
            ("error", job.error or "-"),
            ("created", at(job.created_at)),
            ("updated", at(job.updated_at)),
            ("store time", format_time(job.as_of)),
        ]
    )


@click.command()
@common_options
@click.pass_obj
def now(state: CliState) -> None:
    """Print the store's clock (the time that decides lease expiry)."""
    store = state.store()
    seconds = store.now()
    out = state.output()
    if out.json_mode:
        out.json({"now": seconds, "iso": format_time(seconds), "store": store.url})
        return
    out.line(
        f"{format_time(seconds)}  ({seconds:.6f} s since the epoch, store time of {store.url})"
    )
