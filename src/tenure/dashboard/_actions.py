"""The dashboard's actions on jobs: each a POST with a CSRF token, confirmed on a page of
its own first, refused when the dashboard is read-only.

An `Action` names a store operation on one job. The store on main has none an operator
may call on someone else's job yet (cancel, requeue and delete are coming with the
job-control work), so `ACTIONS` is empty and the pages show no buttons; each one will be
one entry here, e.g.::

    Action("requeue", "Requeue", "Make job {job} ready again, with fresh attempts?",
           states=("dead",), run=lambda store, job_id: store.requeue(job_id))
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
    `create_app`, its result awaited if it is awaitable)."""

    name: str
    label: str
    confirm: str
    states: tuple[str, ...]
    run: Callable[[Any, str], Awaitable[object] | object]

    def offered_for(self, job: Job) -> bool:
        return str(job.state) in self.states


# None on main yet: see the module docstring.
ACTIONS: tuple[Action, ...] = ()


def actions_by_name(actions: Sequence[Action]) -> dict[str, Action]:
    found: dict[str, Action] = {}
    for action in actions:
        if not isinstance(action, Action):
            raise InvalidArgument("actions", f"must be tenure.dashboard.Action, not {action!r}")
        if action.name in found:
            raise InvalidArgument("actions", f"{action.name!r} is given twice")
        found[action.name] = action
    return found
