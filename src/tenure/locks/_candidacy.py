"""`Candidacy`: where a leader candidate stands, and the lines it logs.

`Leader` runs its candidacy on a thread and `AsyncLeader` as a task: the loops differ in
how they wait, so each keeps its own, but what a term *is* (counted, announced, ended with
the reason it ended) is this one class, so that the two cannot drift apart.
"""

from __future__ import annotations

import logging
from typing import Generic, Protocol, TypeVar

from ..models import FencingToken

__all__ = ["ATTEMPT", "Candidacy", "HeldLock"]

log = logging.getLogger("tenure")

# The longest one acquire attempt waits before the candidate looks again at whether it was
# stopped (the thread) or tries again (the task, which stopping cancels at once).
ATTEMPT = 0.5


class HeldLock(Protocol):
    """What a candidacy reads of its lock (`Lock` and `AsyncLock` both answer it)."""

    @property
    def held(self) -> bool: ...

    @property
    def token(self) -> FencingToken: ...

    @property
    def lost_reason(self) -> str | None: ...


L = TypeVar("L", bound=HeldLock)


class Candidacy(Generic[L]):
    """The lock of the current term (None between terms) and the number of terms won."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock: L | None = None
        self.terms = 0

    @property
    def is_leader(self) -> bool:
        lock = self.lock
        return lock is not None and lock.held

    @property
    def token(self) -> FencingToken | None:
        """The token of the current term, or None when not the leader."""
        lock = self.lock
        return lock.token if lock is not None and lock.held else None

    def elected(self, lock: L) -> FencingToken:
        """A term begins on ``lock``: counted and announced; its token is the term's."""
        self.lock = lock
        self.terms += 1
        token = lock.token
        log.info("elected leader", extra={"lock": self.name, "generation": token.generation})
        return token

    def ended(self) -> None:
        """The term is over (the lock is being given back or is lost)."""
        self.lock = None

    def deposed(self, lock: L, token: FencingToken) -> None:
        """The term ended because the holding was lost, not because the candidate stopped."""
        log.warning(
            "leadership lost: %s",
            lock.lost_reason,
            extra={"lock": self.name, "generation": token.generation},
        )

    def store_down(self, exc: BaseException) -> None:
        log.warning(
            "leader election: the store is unavailable (%s); trying again",
            exc,
            extra={"lock": self.name},
        )

    def cannot_run(self) -> None:
        """The lock can never be taken (`LockNotAcquired` for a reason waiting cannot mend);
        call from the ``except`` block, whose traceback the line carries."""
        log.exception("tenure: leader election stopped", extra={"lock": self.name})

    def not_given_back(self, exc: BaseException) -> None:
        log.warning("leader: could not give the lock back (%s)", exc, extra={"lock": self.name})

    def callback_failed(self) -> None:
        """A user callback raised (from its ``except`` block): logged, the term goes on."""
        log.exception("tenure: a leader callback failed", extra={"lock": self.name})
