"""``tenure queues pause|resume|limit|list``: paused and limited queues from the command
line (the store's `pause_queue`, `resume_queue`, `paused_queues`, `set_queue_limit` and
`queue_limits`)."""

from __future__ import annotations

import click

from . import CliState, common_options

__all__ = ["queues"]


@click.group()
def queues() -> None:
    """Pause, resume, limit and list queues: workers claim nothing of a paused queue, and
    at most N jobs of a limited one at once, fleet-wide."""


def _done(state: CliState, queue: str, paused: bool) -> None:
    store = state.store(create=False)
    if paused:
        store.pause_queue(queue)
    else:
        store.resume_queue(queue)
    out = state.output()
    if out.json_mode:
        out.json({"queue": queue, "paused": paused, "store": store.url})
    else:
        out.line(f"queue {queue} {'paused' if paused else 'resumed'} on {store.url}", "good")


@queues.command()
@click.argument("queue")
@common_options
@click.pass_obj
def pause(state: CliState, queue: str) -> None:
    """Pause QUEUE: claims skip its jobs until it is resumed; jobs running go on.

    Pausing a paused queue changes nothing. --json: {"queue", "paused": true, "store"}."""
    _done(state, queue, True)


@queues.command()
@click.argument("queue")
@common_options
@click.pass_obj
def resume(state: CliState, queue: str) -> None:
    """Resume QUEUE: its jobs are claimable again (resuming a running queue changes nothing).

    --json: {"queue", "paused": false, "store"}."""
    _done(state, queue, False)


@queues.command()
@click.argument("queue")
@click.argument("n", type=int, required=False)
@click.option("--clear", is_flag=True, help="Remove the queue's limit.")
@common_options
@click.pass_obj
def limit(state: CliState, queue: str, n: int | None, clear: bool) -> None:
    """Let at most N jobs of QUEUE be leased at once, across every worker (--clear: no
    limit). Leases already held go on; lowering the limit below them makes claims wait.

    --json: {"queue", "limit": N or null, "store"}."""
    if clear == (n is not None):
        raise click.UsageError("give either N or --clear")
    store = state.store(create=False)
    store.set_queue_limit(queue, n)
    out = state.output()
    if out.json_mode:
        out.json({"queue": queue, "limit": n, "store": store.url})
    elif n is None:
        out.line(f"queue {queue} has no limit on {store.url}", "good")
    else:
        out.line(f"queue {queue} limited to {n} leased at once on {store.url}", "good")


@queues.command(name="list")
@common_options
@click.pass_obj
def list_queues(state: CliState) -> None:
    """The queues with live jobs (where the store can count them), the paused ones and the
    limited ones, each with its paused state and its limit.

    --json: {"queues": [{"queue", "paused", "limit"}...], "store"} (limit null: none)."""
    store = state.store(create=False)
    paused = set(store.paused_queues())
    limits = store.queue_limits()
    stats = store.queue_stats()
    names = paused | set(limits) | {found.queue for found in (stats.queues if stats else ())}
    rows = [
        {"queue": name, "paused": name in paused, "limit": limits.get(name)}
        for name in sorted(names)
    ]
    out = state.output()
    if out.json_mode:
        out.json({"queues": rows, "store": store.url})
    elif not rows:
        out.line(f"no queues with live jobs, paused or limited on {store.url}")
    else:
        out.table(
            ["queue", "state", "limit"],
            [
                [
                    str(row["queue"]),
                    "paused" if row["paused"] else "running",
                    "-" if row["limit"] is None else str(row["limit"]),
                ]
                for row in rows
            ],
        )
