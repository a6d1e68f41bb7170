"""The bound on a statement's time, its wait for a synchronous standby included, and what a
commit the standby did not confirm leaves owed.

PostgreSQL's ``statement_timeout`` does not end the wait of a commit for a synchronous
standby (``synchronous_standby_names``): with the standby down, a statement waits until it
returns. `StatementBound` cancels a statement still running ``command_timeout`` seconds
after it was sent (one watchdog thread per driver, started at the first statement, waking
at most 20 times a second). A cancel during the wait does not undo the local commit: the
server answers as for a success, with a WARNING ("might not have been replicated"), which
the driver reports as ``StoreUnavailable(outcome_unknown=True)`` (`unreplicated`), and the
driver then owes a confirmation: each later operation first runs
``sql/confirm_replication.sql`` (a commit that waits for the standby, bounded the same way)
and fails the same way until that commits without the warning, so that no retry or claim
recovery reports what only the primary holds as done.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import weakref
from typing import Any

import psycopg

from ...errors import StoreUnavailable

__all__ = ["StatementBound", "unreplicated", "watch_replication"]


class StatementBound:
    """Cancels the statements that run past ``seconds``; ``owed``: a commit of this driver
    is not confirmed by the synchronous standby yet."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.owed = False
        self._running: dict[int, tuple[float, Any]] = {}  # ticket: (deadline, pgconn)
        self._tickets = itertools.count()
        self._start = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self, pgconn: Any, seen: list[str]) -> int:
        """Watch a statement about to be sent on ``pgconn`` (a psycopg ``PGconn``), whose
        `watch_replication` list is ``seen`` (emptied here)."""
        seen.clear()
        if self._thread is None:
            self._start_thread()
        ticket = next(self._tickets)
        self._running[ticket] = (time.monotonic() + self.seconds, pgconn)
        return ticket

    def check(self, operation: str, seen: list[str]) -> None:
        """After the statement: raise `unreplicated` (and owe a confirmation) when its
        commit's wait for the standby ended unconfirmed; a confirmation that was not pays
        what was owed."""
        if seen:
            self.owed = True
            raise unreplicated(operation, list(seen))
        if operation == "confirm_replication":
            self.owed = False  # that commit was confirmed, so were all before it

    def disarm(self, ticket: int) -> None:
        self._running.pop(ticket, None)

    def close(self) -> None:
        self._stop.set()

    def _start_thread(self) -> None:
        with self._start:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._watch, name="tenure-statement-bound", daemon=True
                )
                self._thread.start()

    def _watch(self) -> None:
        poll = max(0.05, min(1.0, self.seconds / 20))
        while not self._stop.wait(poll):
            now = time.monotonic()
            for ticket, (deadline, pgconn) in list(self._running.items()):
                if now >= deadline and self._running.pop(ticket, None) is not None:
                    with contextlib.suppress(Exception):
                        pgconn.get_cancel().cancel()


_WATCHED: weakref.WeakKeyDictionary[psycopg.BaseConnection[Any], list[str]] = (
    weakref.WeakKeyDictionary()
)


def watch_replication(conn: psycopg.BaseConnection[Any]) -> list[str]:
    """A list that gets the words of each WARNING by which a synchronous-replication wait
    ended without the standby's confirmation (cancelled, or the backend terminated): the
    transaction "has already committed locally, but might not have been replicated to the
    standby", and the server still answers as for a success. The driver turns a statement
    that got one into `unreplicated`. One list (and handler) per connection."""
    seen = _WATCHED.get(conn)
    if seen is not None:
        return seen
    seen = _WATCHED[conn] = []

    def notice(diag: psycopg.errors.Diagnostic) -> None:
        primary, detail = diag.message_primary or "", diag.message_detail or ""
        if "synchronous replication" in primary or "might not have been replicated" in detail:
            seen.append(f"{primary} {detail}".strip())

    conn.add_notice_handler(notice)
    return seen


def unreplicated(operation: str, words: list[str]) -> StoreUnavailable:
    return StoreUnavailable(
        f"{operation}: PostgreSQL committed it locally but the synchronous standby did not "
        f"confirm it ({'; '.join(words)}): a failover now could lose it, so it is not "
        "reported as done; it may or may not have taken effect",
        operation=operation,
        outcome_unknown=True,
    )
