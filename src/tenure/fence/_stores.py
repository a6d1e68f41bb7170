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

import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from .._sqlite import enter_wal
from .._validate import validate_delay, validate_flag, validate_id
from ..errors import InvalidArgument, StaleToken
from ..models import FencingToken
from ._sql import SQLFenceGuard, create_fence_table, fence_generation
from ._token import plain_token

__all__ = [
    "FenceStore",
    "FenceVerdict",
    "MemoryFenceStore",
    "SQLiteFenceStore",
    "validate_fence_store",
]

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


def validate_fence_store(value: object, argument: str = "store") -> FenceStore:
    """``value`` if it has what a `FenceStore` needs: ``advance`` and ``highest`` methods."""
    lacking = [name for name in ("advance", "highest") if not callable(getattr(value, name, None))]
    if lacking:
        raise InvalidArgument(
            argument,
            "must be a fence store (MemoryFenceStore, SQLiteFenceStore, or an object with "
            f"advance(token, strict=) and highest(job_id)); a {type(value).__name__} has no "
            f"{' or '.join(lacking)} method",
        )
    return cast("FenceStore", value)


def _advance_arguments(token: object, strict: object) -> tuple[FencingToken, bool]:
    """The checked arguments of `FenceStore.advance` (before the store is touched)."""
    return plain_token(token), validate_flag(strict, "strict")


class MemoryFenceStore:
    """A fence store in this process's memory. Thread-safe."""

    blocking = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._highest: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<MemoryFenceStore {len(self._highest)} jobs>"

    def advance(self, token: FencingToken, *, strict: bool = False) -> FenceVerdict:
        token, strict = _advance_arguments(token, strict)
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

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        """``path``: the SQLite file (a str or a path object; created if missing).
        ``timeout``: seconds to wait for another writer's lock, from 0 to 366 days."""
        self.path = _file_path(path)
        timeout = validate_delay(timeout, "timeout")
        self._lock = threading.RLock()
        conn = None
        try:
            conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            enter_wal(conn, timeout)
            conn.execute("PRAGMA synchronous=FULL")  # an accepted generation survives a crash
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
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
        token, strict = _advance_arguments(token, strict)
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


def _file_path(path: object) -> str:
    """The file a `SQLiteFenceStore` opens: a str or path object naming a file, not one of
    SQLite's in-memory names (the fence would end with the store: use `MemoryFenceStore`)."""
    if isinstance(path, os.PathLike):
        try:
            path = os.fsdecode(path)
        except TypeError:  # __fspath__ answered neither str nor bytes
            raise InvalidArgument(
                "path", f"{type(path).__name__}.__fspath__() must answer a str or bytes"
            ) from None
    if not isinstance(path, str):
        raise InvalidArgument(
            "path", f"must be a str or a path object naming a file, not {type(path).__name__}"
        )
    if not path:
        raise InvalidArgument("path", "must name a file, not be empty")
    if "\x00" in path:
        raise InvalidArgument("path", "must not contain NUL characters")
    if path == ":memory:":
        raise InvalidArgument(
            "path",
            "must name a file: ':memory:' is SQLite's in-memory database, whose fence would "
            "not survive a restart; use MemoryFenceStore for a fence in memory",
        )
    if path.startswith("file:"):
        raise InvalidArgument(
            "path",
            f"must be a plain file path, not a SQLite URI ({path[:40]!r}): SQLite may read "
            "it as one, and file::memory: or mode=memory is an in-memory database",
        )
    return path
