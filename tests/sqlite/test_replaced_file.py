"""A SQLite store whose file was replaced (an older copy moved into place) or removed is
refused by the clients that had it open: their writes are `StoreLost`, nothing changed, from
the first one 50 ms after the last check of the file on.

What cannot be noticed (docs/how-it-works.md, "A store that lost its memory"): a client that
opens the path after the replacement sees the older file as the store, and a copy written
*into* the same file (same inode) is not told apart from the store's own writes.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

import tenure
from tenure.stores.sqlite import _driver


def _copy(source: Path, target: Path) -> None:
    # A consistent copy of a live WAL database, as a backup would take it.
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


@pytest.mark.parametrize("how", ["replaced by an older copy", "removed"])
def test_a_replaced_or_removed_file_is_refused_by_its_open_clients(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_driver, "FILE_CHECK_EVERY", 0.0)  # every write checks
    path = tmp_path / "jobs.db"
    clock = tenure.ManualClock()
    store = tenure.connect(f"sqlite:///{path}", clock=clock, store_clock=clock)
    store.submit("J")
    store.submit("K")
    held = store.claim("J", "w1", 30)
    assert held is not None
    _copy(path, tmp_path / "backup.db")  # generation 1 of J is in the backup
    again = store.claim("K", "w1", 30)
    assert again is not None
    if how == "removed":
        os.remove(path)
    else:
        for suffix in ("-wal", "-shm"):  # as an operator restoring a file would
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.replace(tmp_path / "backup.db", path)
    writes = {
        "renew": lambda: store.renew(held),
        "complete": lambda: store.complete(held, "done"),
        "claim": lambda: store.claim("K", "w2", 30),
        "claim_next": lambda: store.claim_next("w2", 30),
        "submit": lambda: store.submit("L"),
    }
    for name, write in writes.items():
        with pytest.raises(tenure.StoreLost) as caught:
            write()
        message = str(caught.value)
        assert "is no longer the file this client opened" in message, name
        assert "refuses to go on" in message
        assert caught.value.outcome_unknown is False
    store.close()
    if how != "removed":
        # The restored file is untouched by the refused writes: K is ready there, as it
        # was when the backup was taken, and L was never submitted.
        with sqlite3.connect(path) as raw:
            states = dict(raw.execute("SELECT job_id, state FROM tenure_jobs"))
        assert states == {"J": "leased", "K": "ready"}


def test_writes_check_the_file_at_most_every_file_check_every(tmp_path: Path) -> None:
    # A stat per write would cost 7 % of a cycle: the check runs when the last one is
    # FILE_CHECK_EVERY (50 ms) old, so a replacement is noticed within that much time.
    path = tmp_path / "jobs.db"
    store = tenure.connect(f"sqlite:///{path}")
    store.submit("J")
    os.remove(path)
    time.sleep(_driver.FILE_CHECK_EVERY * 1.5)
    with pytest.raises(tenure.StoreLost):
        store.submit("K")
    store.close()
