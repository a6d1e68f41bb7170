"""`Candidacy`: where a leader candidate stands, and the lines it logs.

`Leader` runs its candidacy on a thread and `AsyncLeader` as a task: the loops differ in
how they wait, so each keeps its own, but what a term *is* (counted, announced, ended with
the reason it ended) is this one class, so that the two cannot drift apart.
"""

from __future__ import annotations

import logging
from typing import Generic, Protocol, TypeVar

from ..errors import LockNotAcquired
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
    """The lock of the current term (None between terms), the number of terms won, and
    the error that stopped the candidate for good (None while it runs, or if it was
    stopped)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock: L | None = None
        self.terms = 0
        self.error: Exception | None = None

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

    def cannot_run(self, exc: Exception) -> None:
        """The lock cannot be taken until someone mends it (`LockNotAcquired`: an operator
        cancelled it, or its job is dead; `InvalidArgument`: its job id is another queue's
        job): the candidate stops, and says so in one line (no traceback: this is not a
        crash, and the error says what to do)."""
        self.error = exc
        log.error(
            "leader election of %r stopped: %s",
            self.name,
            exc,
            extra={"lock": self.name},
        )

    def crashed(self, exc: Exception) -> None:
        """The candidate failed unexpectedly (a bug): it stops; logged with the traceback
        (call from the ``except`` block)."""
        self.error = exc
        log.exception("tenure: leader election of %r stopped", self.name, extra={"lock": self.name})

    def stopped_error(self) -> LockNotAcquired:
        """What `wait_elected` raises once the candidate stopped before being elected."""
        why = f": {self.error}" if self.error is not None else " (stop() was called)"
        return LockNotAcquired(f"leader election of {self.name!r} stopped{why}", name=self.name)

    def not_given_back(self, exc: BaseException) -> None:
        log.warning("leader: could not give the lock back (%s)", exc, extra={"lock": self.name})

    def callback_failed(self) -> None:
        """A user callback raised (from its ``except`` block): logged, the term goes on."""
        log.exception("tenure: a leader callback failed", extra={"lock": self.name})
