"""Whether a store exists, found without creating it: the CLI's read-only commands
(``jobs list``, ``jobs show``, ``now``) ask before they open a store, because opening one
creates it (the SQLite file and its directory, the PostgreSQL schema and tables, the Redis
store id). Only ``jobs submit``, ``worker`` and ``migrate`` create a store.

Each probe looks the way the store itself would, read-only:

* SQLite: the file exists and has the ``tenure_jobs`` table (opened with ``mode=ro``);
* PostgreSQL: the URL's schema has the ``tenure_jobs`` table;
* Redis: the store's ``{prefix}:meta`` hash gives a key layout (written by the first
  connection; `redis_layout`, which ``tenure migrate --dry-run`` reads too).

A probe that cannot reach the server answers "unknown", and the command goes on to open
the store, whose own error then says what is wrong with the connection.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

__all__ = ["Probe", "probe_store", "redis_layout"]

HOW_TO_CREATE = (
    "create it by submitting a job (tenure jobs submit), running a worker (tenure worker) or "
    "with tenure migrate"
)


@dataclass(frozen=True)
class Probe:
    exists: bool | None  # None: could not tell (server unreachable, unknown scheme)
    url: str  # the store's URL without a password, for messages
    detail: str = ""  # why it does not exist

    def message(self) -> str:
        return f"no tenure store at {self.url} ({self.detail}); {HOW_TO_CREATE}"


def probe_store(url: str) -> Probe:
    """Whether the store at ``url`` exists; creates nothing."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme in ("postgresql", "postgres"):
        return _postgres(url)
    if scheme in ("redis", "rediss"):
        return _redis(url)
    return Probe(None, url)


def _sqlite(url: str) -> Probe:
    from ..stores.sqlite import parse_sqlite_url

    path = parse_sqlite_url(url)["path"]
    if path == ":memory:":
        return Probe(True, url)
    if not Path(path).is_file():
        missing = "the file does not exist"
        if not Path(path).parent.exists():
            missing = f"the directory {str(Path(path).parent)!r} does not exist"
        return Probe(False, url, missing)
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tenure_jobs'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return Probe(False, url, f"the file is not a tenure store: {exc}")
    if found is None:
        return Probe(False, url, "the file has no tenure tables")
    return Probe(True, url)


def _postgres(url: str) -> Probe:
    try:
        import psycopg

        from ..stores.postgres import parse_postgres_url, redact
    except ImportError:
        return Probe(None, url)  # opening it says which package is missing
    options = parse_postgres_url(url)
    shown = redact(url)
    try:
        with psycopg.connect(options.conninfo, autocommit=True, **options.kwargs) as conn:
            row = conn.execute(
                "SELECT to_regclass(format('%%I.tenure_jobs', %s::text)) IS NOT NULL",
                (options.schema,),
            ).fetchone()
    except psycopg.Error:
        return Probe(None, shown)
    if row is None or not row[0]:
        return Probe(False, shown, f"schema {options.schema!r} has no tenure tables")
    return Probe(True, shown)


def _redis(url: str) -> Probe:
    try:
        import redis

        from ..stores.redis import parse_redis_url
    except ImportError:
        return Probe(None, url)
    options = parse_redis_url(url)
    try:
        layout = redis_layout(url)
    except redis.RedisError:
        return Probe(None, options.public_url)
    if not layout:
        return Probe(False, options.public_url, f"nothing stored under prefix {options.prefix!r}")
    return Probe(True, options.public_url)


def redis_layout(url: str) -> int:
    """The key layout version of the Redis store at ``url``, as its ``{prefix}:meta`` says
    (0: no store there); reads that one key and writes nothing. Raises redis-py's
    ``RedisError`` when the server cannot be reached or read."""
    import redis

    from ..stores.redis import LAYOUT_VERSION, Keys, parse_redis_url

    options = parse_redis_url(url)
    client = redis.Redis.from_url(
        options.redis_url,
        socket_timeout=options.timeout,
        socket_connect_timeout=options.connect_timeout,
    )
    meta = Keys(options.prefix).meta
    try:
        layout = client.hget(meta, "layout")
        # A meta hash without the field is a store all the same: opening it gives it
        # this tenure's layout (open.lua's HSETNX).
        if layout is None and client.exists(meta):
            return LAYOUT_VERSION
    finally:
        client.close()
    return int(layout or 0)
