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
from typing import Any

__all__ = ["StatementBound"]


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

    def arm(self, pgconn: Any) -> int:
        """Watch a statement about to be sent on ``pgconn`` (a psycopg ``PGconn``)."""
        if self._thread is None:
            self._start_thread()
        ticket = next(self._tickets)
        self._running[ticket] = (time.monotonic() + self.seconds, pgconn)
        return ticket

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
