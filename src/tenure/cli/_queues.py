"""``tenure queues pause|resume|limit|rate|list``: paused, limited and rate-limited queues
from the command line (the store's `pause_queue`, `resume_queue`, `paused_queues`,
`set_queue_limit`, `queue_limits`, `set_queue_rate` and `queue_rates`)."""

from __future__ import annotations

import click

from ..models import QueueRate
from . import CliState, common_options
from ._params import NegativeNumbers

__all__ = ["queues"]


@click.group()
def queues() -> None:
    """Pause, resume, limit and list queues: workers claim nothing of a paused queue, at
    most N jobs of a limited one at once, and start at most R a second of a rate-limited
    one, fleet-wide."""


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


@queues.command(cls=NegativeNumbers)
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


@queues.command(cls=NegativeNumbers)
@click.argument("queue")
@click.argument("per_second", type=float, required=False)
@click.option(
    "--burst",
    type=int,
    default=None,
    help="The most jobs started at once after an idle spell (default: PER_SECOND rounded up).",
)
@click.option("--clear", is_flag=True, help="Remove the queue's rate.")
@common_options
@click.pass_obj
def rate(
    state: CliState, queue: str, per_second: float | None, burst: int | None, clear: bool
) -> None:
    """Let workers start at most PER_SECOND jobs of QUEUE a second, across every worker: a
    token bucket by the store's clock of --burst tokens (--clear: no rate). A new rate
    starts with a full bucket; jobs running go on.

    --json: {"queue", "rate": {"per_second", "burst"} or null, "store"}."""
    if clear == (per_second is not None):
        raise click.UsageError("give either PER_SECOND or --clear")
    if clear and burst is not None:
        raise click.UsageError("--burst goes with PER_SECOND, not --clear")
    store = state.store(create=False)
    store.set_queue_rate(queue, per_second, burst=burst)
    found = store.queue_rates().get(queue)
    out = state.output()
    if out.json_mode:
        out.json({"queue": queue, "rate": _rate(found), "store": store.url})
    elif found is None:
        out.line(f"queue {queue} has no rate on {store.url}", "good")
    else:
        out.line(
            f"queue {queue} starts at most {found.per_second:g} jobs a second "
            f"(burst {found.burst}) on {store.url}",
            "good",
        )


def _rate(found: QueueRate | None) -> dict[str, float | int] | None:
    return None if found is None else {"per_second": found.per_second, "burst": found.burst}


@queues.command(name="list")
@common_options
@click.pass_obj
def list_queues(state: CliState) -> None:
    """The queues with live jobs (where the store can count them), the paused ones, the
    limited ones and the rate-limited ones, each with its paused state, its limit and its
    rate.

    --json: {"queues": [{"queue", "paused", "limit", "rate"}...], "store"} (limit null:
    none; rate {"per_second", "burst"}, null: none)."""
    store = state.store(create=False)
    paused = set(store.paused_queues())
    limits = store.queue_limits()
    rates = store.queue_rates()
    stats = store.queue_stats()
    names = paused | set(limits) | set(rates)
    names |= {found.queue for found in (stats.queues if stats else ())}
    rows = [
        {
            "queue": name,
            "paused": name in paused,
            "limit": limits.get(name),
            "rate": _rate(rates.get(name)),
        }
        for name in sorted(names)
    ]
    out = state.output()
    if out.json_mode:
        out.json({"queues": rows, "store": store.url})
    elif not rows:
        out.line(f"no queues with live jobs, paused, limited or rate-limited on {store.url}")
    else:
        out.table(
            ["queue", "state", "limit", "rate/s", "burst"],
            [_cells(name, paused, limits, rates) for name in sorted(names)],
        )


def _cells(
    name: str, paused: set[str], limits: dict[str, int], rates: dict[str, QueueRate]
) -> list[str]:
    """A row of the queue table; "-": no limit, no rate."""
    limit, found = limits.get(name), rates.get(name)
    return [
        name,
        "paused" if name in paused else "running",
        "-" if limit is None else str(limit),
        "-" if found is None else f"{found.per_second:g}",
        "-" if found is None else str(found.burst),
    ]
