"""Fence stores: where a service that receives fenced requests keeps, per job, the highest
generation it has accepted. The ASGI middleware uses one; anything with ``advance`` and
``highest`` (and a ``blocking`` flag) will do.

* `MemoryFenceStore`: a dict under a lock; for tests and single-process services whose
  fence may start from zero at each restart (only safe if the effects themselves are
  fenced elsewhere, or lost with the process too).
* `SQLiteFenceStore`: a SQLite file, the same ``tenure_fence`` table as `sql_fence`, so
  the service can also fence its own writes in that file in the same transaction.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from .._sqlite import enter_wal
from .._validate import validate_id
from ..errors import InvalidArgument, StaleToken
from ..models import FencingToken
from ._sql import SQLFenceGuard, create_fence_table, fence_generation

__all__ = ["FenceStore", "FenceVerdict", "MemoryFenceStore", "SQLiteFenceStore"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FenceVerdict:
    """``accepted``: the token's generation is now the job's highest (or was already, when
    not strict). ``current``: the job's highest accepted generation after the call."""

    accepted: bool
    current: int | None


class FenceStore(Protocol):
    """What the ASGI middleware needs from a fence store."""

    #: True when the methods do I/O: async callers run them in a worker thread.
    blocking: bool

    def advance(self, token: FencingToken, *, strict: bool = False) -> FenceVerdict:
        """Accept ``token`` if its generation is at least (``strict``: above) the job's
        highest, raising the highest to it; atomically."""
        ...

    def highest(self, job_id: str) -> int | None: ...


class MemoryFenceStore:
    """A fence store in this process's memory. Thread-safe."""

    blocking = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._highest: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<MemoryFenceStore {len(self._highest)} jobs>"

    def advance(self, token: FencingToken, *, strict: bool = False) -> FenceVerdict:
        with self._lock:
            current = self._highest.get(token.job_id)
            if (
                current is None
                or token.generation > current
                or (token.generation == current and not strict)
            ):
                self._highest[token.job_id] = token.generation
                return FenceVerdict(True, token.generation)
            return FenceVerdict(False, current)

    def highest(self, job_id: str) -> int | None:
        with self._lock:
            return self._highest.get(validate_id("job_id", job_id))


class SQLiteFenceStore:
    """A fence store in a SQLite file (``tenure_fence``, as written by `sql_fence`).

    One connection, used under a lock by whichever thread calls; `run` lends it out for
    writes that must commit together with the fence (see `tenure.fence.sink`).
    """

    blocking = True

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = str(path)
        if self.path == ":memory:" or not self.path:
            raise InvalidArgument("path", "must name a file (the fence must outlive requests)")
        self._lock = threading.RLock()
        try:
            conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            enter_wal(conn, timeout)
            conn.execute("PRAGMA synchronous=FULL")  # an accepted generation survives a crash
        except sqlite3.Error as exc:
            raise InvalidArgument("path", f"cannot open SQLite file {self.path!r}: {exc}") from exc
        self._conn = conn
        create_fence_table(conn)

    def __repr__(self) -> str:
        return f"<SQLiteFenceStore {self.path}>"

    def run(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body(connection)`` under the store's lock (the connection is idle, in
        autocommit mode: use `sql_fence` / `apply_once` on it)."""
        with self._lock:
            return body(self._conn)

    def advance(self, token: FencingToken, *, strict: bool = False) -> FenceVerdict:
        with self._lock:
            try:
                guard = SQLFenceGuard(
                    self._conn,
                    token,
                    dialect="sqlite",
                    paramstyle="qmark",
                    strict=strict,
                    check_loss=False,
                )
                with guard:
                    pass
            except StaleToken as exc:
                return FenceVerdict(False, exc.highest_seen)
            return FenceVerdict(True, token.generation)

    def highest(self, job_id: str) -> int | None:
        with self._lock:
            return fence_generation(self._conn, job_id)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
