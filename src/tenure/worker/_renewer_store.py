"""The keeper's own store connection, opened when the first renewal draws near rather than
at the worker's start.

A worker whose jobs all end within a fraction of their TTL never renews a lease, and then
never needs this connection: a short run (a burst, one process of a fleet draining a
queue, a rolling restart) used to open and close it for nothing, which costs a Redis
worker about a sixth of its start's CPU, and a PostgreSQL worker a third of it plus a
server backend. The keeper opens it ahead of its first renewal (`LeaseKeeper`: half a
renewal period before), so that a renewal still never waits for a connect; if that early
open fails, the renewal opens it itself, and a failure there is a failed renewal like any
other (retried while the lease's local deadline allows, then a loss).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from .._store import Store
from ..errors import LeaseLost, StoreUnavailable
from ..models import Lease

__all__ = ["OnDemandStore"]


class OnDemandStore:
    """A `Renewer` (``renew``, ``renew_many``) over a store connection that ``open_store``
    opens at the first call of `open`, ``renew`` or ``renew_many``, on the calling thread
    (the keeper's renewer). `close` closes it, if it was opened, from any thread: a
    connection whose open was still under way when closed is closed as it arrives."""

    def __init__(self, open_store: Callable[[], Store]) -> None:
        self._open_store = open_store
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._closed = False

    @property
    def is_open(self) -> bool:
        return self._store is not None

    def open(self) -> Store:
        """The connection, opened now if it is not yet (raises what ``open_store`` raises,
        `tenure.StoreUnavailable` for a store that cannot be reached)."""
        store = self._store
        if store is not None:
            return store
        store = self._open_store()  # not under the lock: a connect can take long
        with self._lock:
            if not self._closed and self._store is None:
                self._store = store
                return store
            kept = self._store
        store.close()  # closed meanwhile, or opened twice
        if kept is None:
            # The worker stopped while this open was under way (its keeper's stop timed
            # out): no renewal of its leases is sent any more.
            raise StoreUnavailable(
                "the worker has stopped: its renewer's connection is closed",
                operation="renew",
                outcome_unknown=False,
            )
        return kept

    def renew(self, lease: Lease) -> Lease:
        return self.open().renew(lease)

    def renew_many(self, leases: Sequence[Lease]) -> list[Lease | LeaseLost]:
        return self.open().renew_many(leases)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            store, self._store = self._store, None
        if store is not None:
            store.close()
