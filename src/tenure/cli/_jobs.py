"""``tenure jobs submit|list|show|attempts|wait`` and ``tenure now``
(``cancel|requeue|delete|purge`` are in `tenure.cli._control`).

``list``, ``show`` and ``now`` only read: on a store that does not exist they say so and
create nothing (`CliState.store` with ``create=False``); ``submit`` creates the store.
"""

from __future__ import annotations

import json
import re
import sys
from typing import IO, Any

import click

from .._store import DEFAULT_MAX_ATTEMPTS
from ..errors import InvalidArgument, WaitTimeout
from ..models import Job, JobSpec, JobState
from . import CliState, common_options
from ._control import CONTROL_COMMANDS
from ._jobfile import FileSubmission, batches, parse_headers, read_submissions, refuse_constant
from ._output import Cell, format_duration, format_time, format_value, job_when, relative
from ._params import DURATION

_TERMINAL = (JobState.DONE, JobState.DEAD, JobState.CANCELLED)

__all__ = ["jobs", "now", "parse_payload"]

_STATES = [state.value for state in JobState]
_STATE_STYLES = {
    JobState.READY: None,
    JobState.LEASED: "warn",
    JobState.DONE: "good",
    JobState.DEAD: "bad",
    JobState.CANCELLED: "warn",
}


def parse_payload(text: str | None) -> Any:
    """``--payload``: JSON text, or ``-`` to read it from stdin."""
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except ValueError as exc:
        raise InvalidArgument(
            "--payload", f'must be JSON text (e.g. \'{{"month": "2026-11"}}\'): {exc}'
        ) from None


def _state_cell(job: Job) -> Cell:
    if job.lease_expired:
        return Cell("leased (expired)", "warn")
    return Cell(job.state, _STATE_STYLES[job.state])


@click.group()
def jobs() -> None:
    """Submit, inspect and control jobs."""


for _command in CONTROL_COMMANDS:
    jobs.add_command(_command)


@jobs.command()
@click.argument("job_id", required=False)
@click.option("--payload", metavar="JSON", help="The job's payload as JSON text; '-' reads stdin.")
@click.option("--queue", default="default", metavar="Q", help="Queue to put the job in.")
@click.option(
    "--delay",
    type=DURATION,
    default=0.0,
    help="How long before it can be claimed, e.g. 90s, 10m, 2h (a number alone: seconds).",
)
@click.option(
    "--max-attempts",
    type=int,
    default=DEFAULT_MAX_ATTEMPTS,
    metavar="N",
    help="Claims allowed before the job is dead.",
)
@click.option(
    "--priority",
    type=int,
    default=0,
    metavar="P",
    help="Claims take the highest priority first (-2147483648 to 2147483647; default 0).",
)
@click.option(
    "--timeout",
    type=DURATION,
    default=None,
    help="The job's own per-attempt timeout, e.g. 30s, 5m (a number alone: seconds; "
    "default: its handler's).",
)
@click.option(
    "--from-file",
    "from_file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    metavar="JSONL",
    help='Submit many jobs: one JSON object per line, e.g. {"job_id": "a", "payload": {...}, '
    '"queue": "q", "delay": 0, "max_attempts": 5, "priority": 0, "timeout": null, '
    '"unique_key": "k", "unique_for": 60, "headers": {"tenant": "acme"}} (the options '
    "give the defaults); '-' reads stdin.",
)
@click.option(
    "--unique-key",
    default=None,
    metavar="KEY",
    help="Create nothing while another job with this key is unfinished or in its window; "
    "that job is shown instead.",
)
@click.option(
    "--unique-for",
    type=DURATION,
    default=None,
    help="With --unique-key: how long this job keeps the key after it finishes, e.g. 1h "
    "(a number alone: seconds).",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    callback=parse_headers,
    metavar="NAME=VALUE",
    help="A header kept with the job (Job.headers), e.g. a traceparent; repeat for more. "
    "With --from-file: the headers of lines without their own.",
)
@common_options
@click.pass_obj
def submit(
    state: CliState,
    job_id: str | None,
    payload: str | None,
    queue: str,
    delay: float,
    max_attempts: int,
    priority: int,
    timeout: float | None,
    from_file: IO[str] | None,
    unique_key: str | None,
    unique_for: float | None,
    headers: dict[str, str] | None,
) -> None:
    """Add job JOB_ID (idempotent: an existing job is left unchanged), or every job of
    --from-file."""
    if from_file is not None:
        if job_id is not None or payload is not None or unique_key or unique_for:
            raise InvalidArgument(
                "--from-file", "give either JOB_ID (and --payload, --unique-key) or a file"
            )
        name = "stdin" if from_file.name == "<stdin>" else from_file.name
        wanted = read_submissions(
            from_file, name, queue, delay, max_attempts, priority, timeout, headers
        )
        _submit_many(state, wanted, name)
        return
    if job_id is None:
        raise InvalidArgument("JOB_ID", "missing: give a job id, or --from-file JSONL")
    job = state.store().submit(
        job_id,
        parse_payload(payload),
        queue=queue,
        delay=delay,
        max_attempts=max_attempts,
        priority=priority,
        timeout=timeout,
        unique_key=unique_key,
        unique_for=unique_for,
        headers=headers,
    )
    out = state.output()
    if out.json_mode:
        out.json(job.to_dict())  # "created": false when the job existed and was left as it was
        return
    if job.created:
        out.line(f"submitted {job.job_id} to queue {job.queue}: {job_when(job)}", "good")
    elif job.job_id != job_id:  # the job holding the unique key answered instead
        out.line(
            f"not submitted: {job.job_id} holds unique key {job.unique_key!r} ({_summary(job)})",
            "warn",
        )
    else:
        out.line(
            f"{job.job_id} already exists (submit is idempotent): left unchanged ({_summary(job)})",
            "warn",
        )


def _submit_many(state: CliState, wanted: list[FileSubmission], name: str) -> None:
    """One store connection, one `submit_many` per 1000 jobs (a new batch where an id
    repeats, so that the repeat is answered as existing, as `submit` would)."""
    store = state.store()
    existing: list[str] = []
    for batch in batches(wanted):
        try:
            answers = store.submit_many(
                [
                    JobSpec(
                        item.job_id,
                        item.payload,
                        item.queue,
                        item.delay,
                        item.max_attempts,
                        item.priority,
                        item.timeout,
                        item.unique_key,
                        item.unique_for,
                        item.headers,
                    )
                    for item in batch
                ]
            )
        except InvalidArgument as exc:
            found = re.match(r"jobs\[(\d+)\]", exc.argument)
            item = batch[int(found.group(1))] if found else batch[0]
            done = wanted.index(batch[0])
            raise InvalidArgument(
                "--from-file",
                f"{name} line {item.line} ({item.job_id!r}): {exc}; the {done} job(s) before "
                "its batch were submitted (submit is idempotent: fix the file and run it again)",
            ) from None
        # By the line's id: a job whose unique key was held is answered with the holder.
        existing += [
            item.job_id for item, job in zip(batch, answers, strict=True) if not job.created
        ]
    out = state.output()
    submitted = len(wanted) - len(existing)
    if out.json_mode:
        out.json({"submitted": submitted, "existing": existing, "store": store.url})
        return
    line = f"submitted {submitted} job(s) from {name} to {store.url}"
    if existing:
        line += f"; {len(existing)} already existed and were left unchanged"
    out.line(line, "good")


def _summary(job: Job) -> str:
    """A job in a few words: state, generation, payload (cut short)."""
    payload = format_value(job.payload)
    if len(payload) > 60:
        payload = payload[:59] + "…"
    return f"{job.state}, generation {job.generation}, payload {payload}"


@jobs.command("list")
@click.option("--queue", default=None, metavar="Q", help="Only this queue.")
@click.option(
    "--state", "state_", type=click.Choice(_STATES), default=None, help="Only this state."
)
@click.option("--owner", default=None, metavar="W", help="Only jobs last claimed by W.")
@click.option(
    "--older-than",
    type=DURATION,
    default=None,
    help="Only jobs created at least this long ago, e.g. 90s, 1m, 7d (a number alone: seconds).",
)
@click.option("--limit", type=int, default=100, metavar="N", help="N jobs a page (1-1000).")
@click.option("--cursor", default=None, metavar="C", help="The page after C (a next_cursor).")
@click.option("--all", "all_pages", is_flag=True, help="Every page, not only the first.")
@common_options
@click.pass_obj
def list_jobs(
    state: CliState,
    queue: str | None,
    state_: str | None,
    owner: str | None,
    older_than: float | None,
    limit: int,
    cursor: str | None,
    all_pages: bool,
) -> None:
    """List jobs, oldest first, a page at a time; says how to get the next page.

    --json: {"jobs": [...], "shown": N, "more": true|false, "next_cursor": C|null,
    "store": URL}; pass C back as --cursor for the next page (--all: every page)."""
    store = state.store(create=False)
    page = store.jobs(
        queue=queue, state=state_, owner=owner, older_than=older_than, limit=limit, cursor=cursor
    )
    found = list(page)
    while all_pages and page.next_cursor is not None:
        page = store.jobs(
            queue=queue,
            state=state_,
            owner=owner,
            older_than=older_than,
            limit=limit,
            cursor=page.next_cursor,
        )
        found.extend(page)
    next_cursor = page.next_cursor
    out = state.output()
    if out.json_mode:
        out.json(
            {
                "jobs": [job.to_dict() for job in found],
                "shown": len(found),
                "more": next_cursor is not None,
                "next_cursor": next_cursor,
                "store": store.url,
            }
        )
        return
    if not found:
        filters = " ".join(
            f"{name} {value}"
            for name, value in (("queue", queue), ("state", state_), ("owner", owner))
            if value
        )
        out.line(f"no jobs{' with ' + filters if filters else ''} in {store.url}")
        return
    out.table(
        ["job", "queue", "pri", "state", "gen", "owner", "attempts", "when"],
        [
            [
                job.job_id,
                job.queue,
                str(job.priority),
                _state_cell(job),
                str(job.generation),
                job.owner or "-",
                f"{job.attempts}/{job.max_attempts}",
                job_when(job),
            ]
            for job in found
        ],
    )
    if next_cursor is not None:
        out.line(f"{len(found)} shown, more exist: next page --cursor {next_cursor} (or --all)")


# `tenure jobs wait`'s exit codes past 0 (done), 1 (an error, e.g. an unknown job) and 2
# (bad input): so that `tenure jobs wait ID && next` stops unless the job was done.
WAIT_TIMEOUT = 3
WAIT_EXIT = {JobState.DEAD: 4, JobState.CANCELLED: 5}


@jobs.command()
@click.argument("job_id")
@click.option(
    "--timeout",
    type=DURATION,
    default=60.0,
    help="Give up after this long, e.g. 30s, 10m (a number alone: seconds).",
)
@common_options
@click.pass_obj
def wait(state: CliState, job_id: str, timeout: float) -> None:
    """Wait until job JOB_ID is finished and show it, as `jobs show` does. Exit code by
    how it ended: 0 done, 4 dead, 5 cancelled; 3 when the timeout passes first (the job
    is shown as it was then, followed by a line saying so); 1 for an unknown job.

    --json: the job, as `jobs show --json`; on timeout {"timeout": S, "job": {...},
    "error": "..."}."""
    store = state.store(create=False)
    out = state.output()
    try:
        job = store.wait(job_id, timeout=timeout)
    except WaitTimeout as exc:
        last = exc.job if isinstance(exc.job, Job) else None
        if out.json_mode:
            found = None if last is None else last.to_dict()
            out.json({"timeout": exc.timeout, "job": found, "error": str(exc)})
        else:
            if last is not None:
                _show_job(state, last)
            out.line(str(exc), "warn")
        raise click.exceptions.Exit(WAIT_TIMEOUT) from None
    if out.json_mode:
        out.json(job.to_dict())
    else:
        _show_job(state, job)
    code = WAIT_EXIT.get(JobState(job.state))
    if code is not None:
        raise click.exceptions.Exit(code)


@jobs.command()
@click.argument("job_id")
@common_options
@click.pass_obj
def show(state: CliState, job_id: str) -> None:
    """Show one job (JobNotFound: exit code 1)."""
    job = state.store(create=False).get(job_id)
    out = state.output()
    if out.json_mode:
        out.json(job.to_dict())
        return
    _show_job(state, job)


_ENDING_STYLES = {"completed": "good", "failed": "bad", "dead": "bad", "lost": "warn"}


@jobs.command()
@click.argument("job_id")
@common_options
@click.pass_obj
def attempts(state: CliState, job_id: str) -> None:
    """Show the attempts of job JOB_ID, oldest first: each claim's generation, owner, start
    and end by store time and how it ended (JobNotFound: exit code 1). The store keeps
    the newest 100 per job.

    --json: {"job_id": ..., "attempts": [{"generation", "owner", "started_at",
    "ended_at", "ending", "error"}...], "as_of": store time}."""
    store = state.store(create=False)
    job = store.get(job_id)
    found = store.attempts(job_id)
    out = state.output()
    if out.json_mode:
        listed = [attempt.to_dict() for attempt in found]
        out.json({"job_id": job.job_id, "attempts": listed, "as_of": job.as_of})
        return
    if not found:
        out.line(f"job {job.job_id} was never claimed ({job.state})")
        return
    rows: list[list[str | Cell]] = []
    for attempt in found:
        ending = "-" if attempt.ending is None else str(attempt.ending)
        end = job.as_of if attempt.ended_at is None else attempt.ended_at
        rows.append(
            [
                str(attempt.generation),
                attempt.owner,
                format_time(attempt.started_at),
                format_duration(end - attempt.started_at),
                Cell(
                    ending if attempt.ended_at is not None else "current",
                    _ENDING_STYLES.get(ending),
                ),
                attempt.error or "",
            ]
        )
    out.table(
        ["gen", "owner", "started", "lasted", "ending", "error"], rows, title=f"job {job.job_id}"
    )


def _show_job(state: CliState, job: Job) -> None:
    def at(moment: float | None) -> str:
        if moment is None:
            return "-"
        return f"{format_time(moment)} ({relative(moment, job.as_of)})"

    state.output().fields(
        [
            ("job", job.job_id),
            ("queue", job.queue),
            ("priority", str(job.priority)),
            ("timeout", "handler's" if job.timeout is None else f"{job.timeout:g} s"),
            ("state", _state_cell(job)),
            ("when", job_when(job)),
            ("generation", str(job.generation)),
            ("owner", job.owner or "-"),
            ("attempts", f"{job.attempts} of {job.max_attempts}"),
            ("lease until", at(job.lease_until)),
            # A finished job is never claimed again (unless requeued): no time it becomes available.
            ("available at", "-" if job.state in _TERMINAL else at(job.available_at)),
            ("payload", format_value(job.payload)),
            ("result", format_value(job.result)),
            ("error", job.error or "-"),
            ("headers", " ".join(f"{k}={v}" for k, v in job.headers.items()) or "-"),
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
    store = state.store(create=False)
    seconds = store.now()
    out = state.output()
    if out.json_mode:
        out.json({"now": seconds, "iso": format_time(seconds), "store": store.url})
        return
    out.line(
        f"{format_time(seconds)}  ({seconds:.6f} s since the epoch, store time of {store.url})"
    )
