"""``tenure chaos --workload locks``: what changes when the run's workload is one named lock
instead of a queue of jobs.

Several processes (the ``lock-taker`` role of tenure.chaos._proc, in the workers' places)
take one `tenure.Lock` over and over, each holding writing to the fenced sink with the
lock's token. A lock is a job (``lock:<name>`` in queue ``tenure.lock:<name>``), taken with
``claim`` and given back with ``release``, so the recorded history is a job history and the
checker's invariants apply to the lock's job as they are: I1 (no token issued twice, tokens
growing with store time), I2 (no two holders at once by the store's clock), I3 (a stale
holder's renewal or release refused), I4 (in the sink's order, the holders' writes never go
back to a lower token: no two holders' writes interleave out of token order, a stale
holder's late write is refused). I5 becomes: the lock can still be taken after the run
(its job ready or leased, never done, dead or cancelled).

Not in this workload's mix: claim storms and ``cancel`` (both act on jobs by id, and a
storm's completion or a cancel would end the lock's job), ``pause-complete`` (a lock is
never completed: the point is never reached). ``--unsafe`` is for the jobs workload.
"""

from __future__ import annotations

from ..errors import InvalidArgument
from ._nemesis import KINDS, OPT_IN, STORE_FAULTS

__all__ = ["LOCK_KINDS", "WORKLOADS", "check_lock_options", "lock_kinds"]

WORKLOADS = ("jobs", "locks", "flow")
NOT_FOR_LOCKS = ("storm", "cancel", "pause-complete")
# The default mix of a locks run: the jobs run's, less what does not apply.
LOCK_KINDS = tuple(k for k in KINDS if k not in OPT_IN and k not in NOT_FOR_LOCKS)


def check_lock_options(kinds: tuple[str, ...] | None, unsafe: str | None) -> None:
    """Refuse what a locks run cannot do (`InvalidArgument`, naming the option)."""
    if unsafe is not None:
        raise InvalidArgument(
            "--unsafe",
            "applies to the jobs and flow workloads only; leave it out with --workload locks",
        )
    refused = sorted(set(kinds or ()) & set(NOT_FOR_LOCKS))
    if refused:
        raise InvalidArgument(
            "--faults",
            f"not with --workload locks: {', '.join(refused)} (storms and cancels act on "
            "jobs by id, a lock is never completed); choose from "
            f"{', '.join((*LOCK_KINDS, *STORE_FAULTS))}",
        )


def lock_kinds(kinds: tuple[str, ...] | None) -> tuple[str, ...]:
    """The fault kinds of a locks run: those named, else `LOCK_KINDS`."""
    return kinds if kinds is not None else LOCK_KINDS
