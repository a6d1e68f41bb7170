"""The store keeps only the hash of each lease secret (docs/design.md §3, Authority).

The secret is what proves a holder's authority over its lease: anyone who can read the
store (a backup, a replica, a dashboard's database role, a ``redis-cli``) must not be able
to renew, complete or fail someone else's lease with it. So the client sends the store
the secret's SHA-256 only, and the store keeps only that (or, once the lease ended, the
receipt made from it).

After claims by every path (claim, claim_next, claim_many), renewals (renew, renew_many) and
a completion, every byte the store holds is read under the public API: every row of every
table (SQLite: and the raw bytes of its database file and write-ahead log; PostgreSQL:
every table of the store's schema), every key of the store's prefix (Redis: names, fields,
values, members of every type). No secret appears there, in any form (its text, upper
case, its raw bytes); each live lease's hash does, and the completed lease's receipt.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from typing import Any

import tenure
from tenure._protocol import settle_receipt
from tests.backends import Backend, postgres_admin, redis_client, sqlite_path
from tests.conformance._support import CountingCalls

TTL = 30


class RecordingArgs(CountingCalls):
    """Wraps a real driver and keeps the repr of every argument of every call."""

    def __init__(self, driver: Any) -> None:
        super().__init__(driver)
        self.args: list[tuple[str, str]] = []

    def _called(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args += [(name, repr(arg)) for arg in (*args, *kwargs.values())]


def secret_forms(secret: str) -> list[bytes]:
    """The ways a store could keep a secret: its text (either case) or its raw bytes."""
    return [secret.encode(), secret.upper().encode(), bytes.fromhex(secret)]


def hash_forms(text: str) -> list[bytes]:
    """A SHA-256 (the hash of a secret, a receipt) as a store may keep it: hex or bytes."""
    return [text.encode(), text.upper().encode(), bytes.fromhex(text)]


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def lease_traffic(store: tenure.Store, clock: tenure.ManualClock) -> dict[str, tenure.Lease]:
    """Leases by every path, renewed and completed: (name -> lease) of each, the completed
    one under ``done`` (each renewed lease is the one its renewal returned)."""
    for job_id in ("held", "done", "renewed", "batch-a", "batch-b"):
        store.submit(job_id)
    store.submit("next", queue="q-next")
    store.submit("many-a", queue="q-many")
    store.submit("many-b", queue="q-many")
    leases: dict[str, tenure.Lease] = {}
    for job_id in ("held", "done", "renewed", "batch-a", "batch-b"):
        lease = store.claim(job_id, "A", TTL)
        assert lease is not None
        leases[job_id] = lease
    claimed = store.claim_next("B", TTL, queues=["q-next"])
    assert claimed is not None
    leases["next"] = claimed
    for lease in store.claim_many("C", TTL, 5, queues=["q-many"]):
        leases[lease.job_id] = lease
    assert len(leases) == 8
    clock.advance(5)
    leases["renewed"] = store.renew(leases["renewed"])
    batch = store.renew_many([leases["batch-a"], leases["batch-b"]])
    for renewed in batch:
        assert isinstance(renewed, tenure.Lease)
        leases[renewed.job_id] = renewed
    store.complete(leases["done"], "result")
    return leases


# -- reading everything a store holds, per store --------------------------------------
# Each reader returns (where, bytes) items: where a value was found, and the value.

Items = list[tuple[str, bytes]]


def _as_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, memoryview):
        return value.tobytes()
    return str(value).encode()


def sqlite_items(url: str) -> Items:
    path = sqlite_path(url)
    items: Items = []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        assert "tenure_jobs" in tables, tables
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            for row in conn.execute(f"SELECT * FROM {quoted}"):
                items += [(f"table {table}", _as_bytes(value)) for value in row]
    finally:
        conn.close()
    # For good measure, the bytes on disk: the database, its write-ahead log, any journal
    # (old page images there would keep what a row no longer shows).
    for file in sorted(path.parent.glob(path.name + "*")):
        items.append((f"file {file.name}", file.read_bytes()))
    return items


def postgres_items(url: str) -> Items:
    from psycopg import sql

    from tenure.stores.postgres import parse_postgres_url

    schema = parse_postgres_url(url).schema
    items: Items = []
    with postgres_admin() as admin:
        tables = [
            row[0]
            for row in admin.execute(
                "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'm')",
                (schema,),
            )
        ]
        assert "tenure_jobs" in tables, tables
        for table in tables:
            # A row as text: every column, a bytea as its \x hex (the secret's own text).
            query = sql.SQL("SELECT t::text FROM {}.{} AS t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            items += [(f"table {table}", _as_bytes(row[0])) for row in admin.execute(query)]
    return items


def _redis_values(client: Any, key: bytes) -> list[bytes]:
    kind = client.type(key).decode()
    if kind == "string":
        return [client.get(key)]
    if kind == "hash":
        return [part for pair in client.hgetall(key).items() for part in pair]
    if kind == "list":
        return list(client.lrange(key, 0, -1))
    if kind == "set":
        return list(client.smembers(key))
    if kind == "zset":
        pairs = client.zrange(key, 0, -1, withscores=True)
        return [_as_bytes(part) for pair in pairs for part in pair]
    if kind == "stream":
        entries = client.xrange(key)
        return [_as_bytes(entry) for entry in entries]
    if kind == "none":  # expired since the scan (a wait's marker): nothing held
        return []
    raise AssertionError(f"key {key!r} of a type this test does not read: {kind}")


def redis_items(url: str) -> Items:
    from tenure.stores.redis import parse_redis_url

    prefix = parse_redis_url(url).prefix
    client = redis_client()  # bytes, not decoded: a value is read as it is stored
    items: Items = []
    try:
        keys = sorted(client.scan_iter(match="{" + prefix + "}*", count=1000))
        assert any(key.endswith(b":j:held") for key in keys), keys
        for key in keys:
            items.append(("key name", key))
            where = f"key {key.decode(errors='replace')}"
            items += [(where, value) for value in _redis_values(client, key)]
    finally:
        client.close()
    return items


READERS: dict[str, Callable[[str], Items]] = {
    "sqlite": sqlite_items,
    "postgres": postgres_items,
    "redis": redis_items,
}


def found_in(items: Items, forms: list[bytes]) -> list[str]:
    """Where any of ``forms`` appears among ``items``."""
    return [where for where, value in items if any(form in value for form in forms)]


# -- the tests ----------------------------------------------------------------------------


def test_the_store_keeps_the_hash_of_each_secret_never_the_secret(
    backend: Backend, url: str, store: tenure.Store, clock: tenure.ManualClock
) -> None:
    leases = lease_traffic(store, clock)
    items = READERS[backend.name](url)
    assert items
    for name, lease in leases.items():
        stored = found_in(items, secret_forms(lease.secret))
        assert not stored, f"the secret of lease {name!r} is stored, at: {stored}"
    for name, lease in leases.items():
        kept = sha256_hex(lease.secret)
        if name == "done":  # its hash gave way to the complete's receipt, made from it
            kept = settle_receipt(kept, "complete")
        where = found_in(items, hash_forms(kept))
        # The hash is in the store's rows or keys, and (SQLite) in the bytes of its files:
        # the reads above see the store's data, so a secret they do not find is not there.
        assert [w for w in where if not w.startswith("file ")], (name, where)
        if backend.name == "sqlite":
            assert [w for w in where if w.startswith("file ")], (name, where)


def test_no_secret_reaches_the_driver(store: tenure.Store, clock: tenure.ManualClock) -> None:
    """What the driver receives is what can end up stored (or in a server's log): the
    secret stays in the client, and only its hash goes down."""
    recording = RecordingArgs(store._driver)
    store._driver = recording
    leases = lease_traffic(store, clock)
    store.release(leases["held"])
    store.fail(leases["next"], "boom", retry_in=0)
    # The traffic went down to the driver: every path that takes or renews a lease.
    for operation in ("claim", "claim_next", "renew", "renew_many", "complete", "fail"):
        assert recording.calls[operation], operation
    for name, lease in leases.items():
        secret = lease.secret
        sent = [op for op, arg in recording.args if secret in arg or secret.upper() in arg]
        assert not sent, f"the secret of lease {name!r} was passed to the driver by: {sent}"
        assert any(sha256_hex(secret) in arg for _, arg in recording.args), name
