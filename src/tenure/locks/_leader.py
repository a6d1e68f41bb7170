"""`Leader`: leader election on a named lock, on a thread of its own.

The leader is whoever holds the lock ``name``; the token of its holding is its term, and
every later term has a greater one, so a deposed leader's fenced writes are refused. A
`Leader` keeps trying to acquire, calls ``on_elected(token)`` when it has the lock and
``on_lost(token)`` when the holding is lost (then tries again), and gives the lock back
when stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType

from .._store import Store
from ..errors import InvalidArgument, LeaseLost, LockNotAcquired, StoreUnavailable
from ..models import FencingToken
from ._candidacy import ATTEMPT, Candidacy
from ._core import validate_callback, validate_wait
from ._lock import Lock

__all__ = ["Leader", "elect"]

Callback = Callable[[FencingToken], object]


class Leader:
    """Run for leader of ``name`` until stopped::

        with tenure.Leader(store, "scheduler", ttl=15, on_elected=start, on_lost=halt):
            ...   # while inside, this process takes its turn as leader

    Callbacks run on the leader's thread and must return promptly (they delay the next
    attempt, not the renewals). ``is_leader`` and ``token`` say where it stands now;
    ``stopped`` and ``error`` whether it still runs (a lock an operator cancelled stops it
    for good: ``error`` says so, and ``wait_elected`` raises it).
    """

    def __init__(
        self,
        store: Store,
        name: str,
        ttl: float | timedelta = 30.0,
        *,
        on_elected: Callback | None = None,
        on_lost: Callback | None = None,
        owner: str | None = None,
    ) -> None:
        self._probe = Lock(store, name, ttl, owner=owner)  # validates the arguments
        validate_callback("on_elected", on_elected)
        validate_callback("on_lost", on_lost)
        self._store, self._ttl = store, ttl
        self._on_elected, self._on_lost = on_elected, on_lost
        self._wake = threading.Event()
        self._stopping = threading.Event()
        # Notified when a term begins and when the candidate stops (`wait_elected`).
        self._changed = threading.Condition()
        self._leading = False
        self._candidacy: Candidacy[Lock] = Candidacy(self._probe.name)
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self._probe.name

    @property
    def terms(self) -> int:
        """How many times this candidate was elected."""
        return self._candidacy.terms

    @property
    def is_leader(self) -> bool:
        return self._candidacy.is_leader

    @property
    def token(self) -> FencingToken | None:
        """The token of the current term, or None when not the leader."""
        return self._candidacy.token

    @property
    def stopped(self) -> bool:
        """True once the candidate no longer runs: `stop()` was called (or its ``with``
        ended), or it stopped on its own because its lock cannot be taken (``error``)."""
        return self._stopping.is_set()

    @property
    def error(self) -> Exception | None:
        """Why the candidate stopped on its own (a `LockNotAcquired` saying, e.g., that an
        operator cancelled the lock and how to use it again), or None."""
        return self._candidacy.error

    def wait_elected(self, timeout: float | timedelta | None = None) -> bool:
        """Wait until this process is the leader (True) or ``timeout`` passes (seconds or a
        timedelta, as `Lock.acquire` takes; None or infinity: no limit). Returns at once
        once stopped: False after `stop()`; `LockNotAcquired` (from ``error``) if it
        stopped on its own."""
        seconds = validate_wait(True, timeout)
        with self._changed:
            self._changed.wait_for(lambda: self._leading or self._stopping.is_set(), seconds)
            if self._leading:
                return True
        if self._candidacy.error is not None:
            raise self._candidacy.stopped_error() from self._candidacy.error
        return False

    def start(self) -> Leader:
        """Start the candidate thread (once: a started leader is returned as it is)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(
            target=self._run, name=f"tenure-leader-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop running; a leader gives the lock back (the next candidate is woken)."""
        self._stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> Leader:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- the thread ----------------------------------------------------------------------

    def _stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        with self._changed:
            self._changed.notify_all()

    def _set_leading(self, leading: bool) -> None:
        with self._changed:
            self._leading = leading
            self._changed.notify_all()

    def _run(self) -> None:
        try:
            self._campaign()
        except Exception as exc:
            self._candidacy.crashed(exc)
        finally:
            self._set_leading(False)
            self._stop()

    def _campaign(self) -> None:
        while not self._stopping.is_set():
            lock = Lock(self._store, self.name, self._ttl, owner=self._probe.owner)
            try:
                if not lock.acquire(timeout=ATTEMPT):
                    continue
            except (LockNotAcquired, InvalidArgument) as exc:  # until someone mends it
                self._candidacy.cannot_run(exc)
                return
            except StoreUnavailable as exc:
                self._candidacy.store_down(exc)
                self._stopping.wait(ATTEMPT)
                continue
            self._term(lock)

    def _term(self, lock: Lock) -> None:
        self._wake.clear()
        lock.on_loss(self._wake.set)
        token = self._candidacy.elected(lock)
        self._set_leading(True)
        self._call(self._on_elected, token)
        self._wake.wait()
        self._set_leading(False)
        try:
            lock.release()
        except (LeaseLost, StoreUnavailable) as exc:
            self._candidacy.not_given_back(exc)
        self._candidacy.ended()
        if lock.lost:  # lost while held, or found lost by the release
            self._candidacy.deposed(lock, token)
            self._call(self._on_lost, token)

    def _call(self, callback: Callback | None, token: FencingToken) -> None:
        if callback is None:
            return
        try:
            callback(token)
        except Exception:
            self._candidacy.callback_failed()


def elect(
    store: Store,
    name: str,
    ttl: float | timedelta = 30.0,
    *,
    on_elected: Callback | None = None,
    on_lost: Callback | None = None,
    owner: str | None = None,
) -> Leader:
    """Start running for leader of ``name`` (a started `Leader`; call ``stop()``)."""
    return Leader(store, name, ttl, on_elected=on_elected, on_lost=on_lost, owner=owner).start()
