"""The dashboard's actions on jobs: each a POST with a CSRF token, confirmed on a page of
its own first, refused when the dashboard is read-only.

An `Action` names a store operation on one job. `ACTIONS`, offered by default, are the
store's job control: cancel (a ready, scheduled or leased job; a leased job's holder loses
its lease at its next renewal), requeue (a done, dead or cancelled job) and delete (a
finished job). The store stays the judge: a job whose state changed between the page and
the POST is refused by the store with `JobStateConflict`, which the dashboard shows.
Pausing and resuming a queue are the queues page's own actions (`create_app`'s
``/queue/confirm`` and ``/queue/action``), confirmed and CSRF-checked the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument
from ..models import Job

__all__ = ["ACTIONS", "Action", "actions_by_name"]


@dataclass(frozen=True)
class Action:
    """One action: ``name`` in URLs, ``label`` on its button, ``confirm`` the question its
    confirmation page asks (``{job}`` is replaced by the job id, escaped), ``states`` the
    job states it is offered for, ``run(store, job_id)`` what it does (the store given to
    `create_app`, its result awaited if it is awaitable; a blocking store's call runs in a
    worker thread), ``gone`` whether the job no longer exists afterwards (the POST then
    leads back to the jobs page, not to the job's)."""

    name: str
    label: str
    confirm: str
    states: tuple[str, ...]
    run: Callable[[Any, str], Awaitable[object] | object]
    gone: bool = False  # the job no longer exists afterwards: back to the jobs page

    def offered_for(self, job: Job) -> bool:
        return str(job.state) in self.states


def _cancel(store: Any, job_id: str) -> Awaitable[object] | object:
    done: Awaitable[object] | object = store.cancel(
        job_id, reason="cancelled from the tenure dashboard"
    )
    return done


def _requeue(store: Any, job_id: str) -> Awaitable[object] | object:
    done: Awaitable[object] | object = store.requeue(job_id)
    return done


def _delete(store: Any, job_id: str) -> Awaitable[object] | object:
    done: Awaitable[object] | object = store.delete(job_id)
    return done


ACTIONS: tuple[Action, ...] = (
    Action(
        "cancel",
        "Cancel",
        "Cancel job {job}? It will not run again unless requeued. If a worker holds it, its "
        "generation moves on now: the worker loses its lease at its next renewal, and its "
        "late completion and fenced writes are refused.",
        states=("ready", "leased"),
        run=_cancel,
    ),
    Action(
        "requeue",
        "Requeue",
        "Make job {job} ready to run again? Its attempt count is kept; its next claim takes "
        "a new generation.",
        states=("done", "dead", "cancelled"),
        run=_requeue,
    ),
    Action(
        "delete",
        "Delete",
        "Delete job {job} for good? Its payload, result and error are removed; if its id is "
        "submitted again, its generations start above every one it had.",
        states=("done", "dead", "cancelled"),
        run=_delete,
        gone=True,
    ),
)


def actions_by_name(actions: Sequence[Action]) -> dict[str, Action]:
    found: dict[str, Action] = {}
    for action in actions:
        if not isinstance(action, Action):
            raise InvalidArgument("actions", f"must be tenure.dashboard.Action, not {action!r}")
        if action.name in found:
            raise InvalidArgument("actions", f"{action.name!r} is given twice")
        found[action.name] = action
    return found
