"""SQLite's write lock held by another connection for longer than the store's busy timeout
(the URL's ``?timeout=``, seconds to wait for the write lock): every write of the store gives
up with `tenure.StoreUnavailable` naming the operation, ``outcome_unknown`` False (it never
got the lock, so nothing was written: tenure.errors says such a call is safe to repeat),
and nothing changed; once the lock is let go the same calls succeed, the lease taken
before it included.

The lock is a second sqlite3 connection's ``BEGIN IMMEDIATE``, as any other process on
the file (a migration, a backup, your own long transaction) can hold it. Reads go on
meanwhile: the store's file is in WAL mode.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import tenure
from tests.backends import sqlite_path
from tests.conformance._support import snapshot

BUSY_TIMEOUT = 0.05


@contextmanager
def write_lock(url: str) -> Iterator[None]:
    """The file's write lock, held by another connection for the block."""
    conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@pytest.fixture
def busy(open_store: Callable[..., tenure.Store], url: str) -> tenure.Store:
    """A client that waits at most BUSY_TIMEOUT for the write lock (its retries' pauses
    drawn from a fixed seed)."""
    return open_store(url=f"{url}?timeout={BUSY_TIMEOUT}", rng=random.Random(7))


def test_writes_give_up_on_a_lock_held_past_the_busy_timeout_and_change_nothing(
    store: tenure.Store, busy: tenure.Store, url: str
) -> None:
    store.submit("J")
    store.submit("K")
    lease = busy.claim("J", "A", 30)
    assert lease is not None
    before = snapshot(store)
    writes: dict[str, Callable[[], object]] = {
        "claim_next": lambda: busy.claim_next("B", 30),
        "complete": lambda: busy.complete(lease, "r"),
        "submit": lambda: busy.submit("new"),
    }
    with write_lock(url):
        for operation, write in writes.items():
            started = time.monotonic()
            with pytest.raises(tenure.StoreUnavailable) as refused:
                write()
            took = time.monotonic() - started
            assert refused.value.operation == operation
            assert refused.value.outcome_unknown is False
            assert "busy" in str(refused.value)
            assert not isinstance(refused.value, tenure.StoreLost)
            # It waited for the lock (the busy timeout, on each of the store's own tries),
            # and no longer than that: not the default 30 s.
            assert BUSY_TIMEOUT <= took < 5
        assert snapshot(store) == before  # a read goes on beside the lock
    assert snapshot(store) == before
    # The lock let go: the same lease completes, the others' calls take effect.
    busy.complete(lease, "r")
    assert (store.get("J").state, store.get("J").result) == ("done", "r")
    taken = busy.claim_next("B", 30)
    assert taken is not None
    assert taken.job_id == "K"
    assert busy.submit("new").created


def test_a_lock_let_go_within_the_busy_timeout_is_waited_for(
    store: tenure.Store, open_store: Callable[..., tenure.Store], url: str
) -> None:
    # The other side of the timeout: a write that finds the lock held waits for it (SQLite's
    # busy handler) instead of failing at once, and goes through once it is let go.
    patient = open_store(url=f"{url}?timeout=10")
    store.submit("J")
    lease = patient.claim("J", "A", 30)
    assert lease is not None
    conn = sqlite3.connect(sqlite_path(url), isolation_level=None, check_same_thread=False)
    released: list[float] = []

    def let_go() -> None:
        time.sleep(0.2)  # the other connection's transaction, 0.2 s long
        released.append(time.monotonic())
        conn.execute("ROLLBACK")

    try:
        conn.execute("BEGIN IMMEDIATE")
        thread = threading.Thread(target=let_go)
        thread.start()
        patient.complete(lease, "r")
        completed = time.monotonic()
        thread.join()
    finally:
        conn.close()
    assert completed >= released[0]
    assert store.get("J").state == "done"
