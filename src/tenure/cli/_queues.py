"""``tenure queues pause|resume|list``: paused queues from the command line (the store's
`pause_queue`, `resume_queue` and `paused_queues`)."""

from __future__ import annotations

import click

from . import CliState, common_options

__all__ = ["queues"]


@click.group()
def queues() -> None:
    """Pause, resume and list queues: workers claim nothing of a paused queue."""


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


@queues.command(name="list")
@common_options
@click.pass_obj
def list_queues(state: CliState) -> None:
    """The queues with live jobs (where the store can count them) and the paused ones, each
    with its paused state.

    --json: {"queues": [{"queue", "paused"}...], "store"}."""
    store = state.store(create=False)
    paused = set(store.paused_queues())
    stats = store.queue_stats()
    names = paused | {found.queue for found in (stats.queues if stats else ())}
    rows = [{"queue": name, "paused": name in paused} for name in sorted(names)]
    out = state.output()
    if out.json_mode:
        out.json({"queues": rows, "store": store.url})
    elif not rows:
        out.line(f"no queues with live jobs or paused on {store.url}")
    else:
        out.table(
            ["queue", "state"],
            [[str(row["queue"]), "paused" if row["paused"] else "running"] for row in rows],
        )
