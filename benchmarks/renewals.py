"""Keeping leases alive: leases renewed per second, one `renew` call per lease (what a
worker's keeper sent until `renew_many`) against `renew_many` batches (what it sends now),
each beside a raw driver loop sending the very same statement or script, in the same run.

    python benchmarks/renewals.py [--stores sqlite,postgres,redis] [--leases 200]
        [--batch 10] [--rounds 10] [--repeat 5] [--dir /dev/shm]

Per store, four sides, each on a fresh store (a new SQLite file, PostgreSQL schema or
Redis key prefix) holding ``--leases`` jobs claimed untimed with a one-hour ttl; a side
renews every lease ``--rounds`` times, the leases in turn:

* **renew**: ``tenure.connect(url).renew(lease)``, one call per lease;
* **raw renew**: the driver's ``renew`` statement (SQLite: in its own write transaction,
  with the store clock's statement; PostgreSQL: ``renew.sql`` on a plain psycopg
  connection; Redis: ``renew.lua`` by EVALSHA on one redis-py connection);
* **renew_many**: ``renew_many(leases)``, ``--batch`` leases a call;
* **raw renew_many**: the same batches as the driver sends them (SQLite: the ``renew``
  statements of a batch in one write transaction; PostgreSQL: ``renew_many.sql``; Redis:
  ``renew_many.lua``).

The sides take turns of ``--batch`` x 5 renewals (`_common.interleave_chunks`). The ratios
are to *raw renew*. After every repetition each side's jobs must all be leased at
generation 1 and renewed since the side opened, so a loop that renews nothing cannot pass
for a fast one. The raw sides mirror the drivers (``tenure/stores/*/_driver*.py``): if a
driver's statement or arguments change, change them with it. Exits 0.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from collections.abc import Callable
from importlib.resources import files
from typing import Any

from _common import (
    Side,
    fresh_store,
    interleave_chunks,
    machine_line,
    print_report,
    sqlite_clock_params,
)

import tenure
from tenure._protocol import hash_secret

TTL = 3600.0
OWNER = "bench-renewer"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS = "redis://127.0.0.1:6379/7"


def hold(url: str, leases: int) -> tuple[list[tenure.Lease], float]:
    """Submit and claim ``leases`` jobs at ``url``; their leases and the store time after."""
    with tenure.connect(url) as store:
        store.submit_many([{"job_id": f"r{n:05}"} for n in range(leases)])
        held = store.claim_many(OWNER, TTL, leases)
        assert len(held) == leases
        return held, store.now()


class Rounds:
    """Round-robin over ``leases``: the next ``count`` of them, ``total`` renewals in all."""

    def __init__(self, leases: list[tenure.Lease], rounds: int) -> None:
        self.leases = leases
        self.left = len(leases) * rounds
        self.at = 0

    def take(self, count: int) -> list[tenure.Lease]:
        count = min(count, self.left)
        taken = [self.leases[(self.at + n) % len(self.leases)] for n in range(count)]
        self.at = (self.at + count) % len(self.leases)
        self.left -= count
        return taken


# -- tenure --------------------------------------------------------------------------------


class TenureRenew:
    def __init__(self, url: str, rounds: Rounds, batch: int) -> None:
        self.store = tenure.connect(url)
        self.rounds = rounds
        self.batch = batch
        # The newest lease of each job (a renewal answers a new Lease; the old one would do
        # as well, but a keeper keeps the new one).
        self.current = {lease.job_id: lease for lease in rounds.leases}

    def step(self, limit: int) -> int:
        done = 0
        while done < limit:
            taken = self.rounds.take(min(self.batch, limit - done))
            if not taken:
                break
            current = self.current
            if self.batch == 1:
                (lease,) = taken
                current[lease.job_id] = self.store.renew(current[lease.job_id])
            else:
                for answer in self.store.renew_many([current[lease.job_id] for lease in taken]):
                    assert isinstance(answer, tenure.Lease), answer
                    current[answer.job_id] = answer
            done += len(taken)
        return done

    def close(self) -> None:
        self.store.close()


# -- raw drivers -----------------------------------------------------------------------------


class RawSQLite:
    """sqlite3 as the driver opens it; each batch one write transaction at one store time
    (clock.sql, as the driver reads it), each lease the driver's renew statement."""

    def __init__(self, path: str, rounds: Rounds, batch: int) -> None:
        sql = files("tenure.stores.sqlite").joinpath("sql")
        self.clock = sql.joinpath("clock.sql").read_text(encoding="utf-8")
        self.renew = sql.joinpath("renew.sql").read_text(encoding="utf-8")
        self.conn = sqlite3.connect(
            path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.cur = self.conn.cursor()
        self.rounds, self.batch = rounds, batch
        self.hashes = {lease.job_id: hash_secret(lease.secret) for lease in rounds.leases}

    def step(self, limit: int) -> int:
        cur, done = self.cur, 0
        while done < limit:
            taken = self.rounds.take(min(self.batch, limit - done))
            if not taken:
                break
            cur.execute("BEGIN IMMEDIATE")
            now = cur.execute(self.clock, sqlite_clock_params()).fetchone()[0]
            for lease in taken:
                row = cur.execute(
                    self.renew,
                    {
                        "job_id": lease.job_id,
                        "owner": OWNER,
                        "generation": 1,
                        "secret_hash": self.hashes[lease.job_id],
                        "ttl": TTL,
                        "now": now,
                    },
                ).fetchone()
                assert row is not None
            cur.execute("COMMIT")
            done += len(taken)
        return done

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    """The driver's ``renew`` or ``renew_many`` statement on a plain psycopg connection,
    as the driver runs it (a raw cursor, arrays in binary, its session settings)."""

    def __init__(self, base: str, schema: str, rounds: Rounds, batch: int) -> None:
        import psycopg

        from tenure.stores.postgres._common import SqlSet, binary_lists, sql_text

        self.conn = psycopg.connect(base, autocommit=True)
        self.conn.execute(sql_text("configure").encode())
        self.cursor = psycopg.RawCursor(self.conn)
        binary_lists(self.cursor)
        sql = SqlSet(schema)
        self.statement = sql["renew" if batch == 1 else "renew_many"]
        self.rounds, self.batch = rounds, batch
        self.hashes = {lease.job_id: hash_secret(lease.secret) for lease in rounds.leases}

    def step(self, limit: int) -> int:
        statement, done = self.statement, 0
        while done < limit:
            taken = self.rounds.take(min(self.batch, limit - done))
            if not taken:
                break
            if self.batch == 1:
                params: dict[str, Any] = {
                    "job_id": taken[0].job_id,
                    "owner": OWNER,
                    "generation": 1,
                    "secret_hash": self.hashes[taken[0].job_id],
                    "ttl": TTL,
                    "now": None,
                }
            else:
                params = {
                    "job_ids": [lease.job_id for lease in taken],
                    "owners": [OWNER] * len(taken),
                    "generations": [1] * len(taken),
                    "held_hashes": [self.hashes[lease.job_id] for lease in taken],
                    "ttls": [TTL] * len(taken),
                    "now": None,
                }
            rows = self.cursor.execute(statement.text, statement.args(params)).fetchall()
            assert len(rows) == len(taken)
            done += len(taken)
        return done

    def close(self) -> None:
        self.conn.close()


class RawRedis:
    """The driver's ``renew`` or ``renew_many`` script by EVALSHA on one redis-py
    connection used directly, with the driver's KEYS and ARGV."""

    def __init__(self, url: str, rounds: Rounds, batch: int) -> None:
        import redis

        from tenure.stores.redis import Keys, parse_redis_url
        from tenure.stores.redis._common import SCRIPTS

        options = parse_redis_url(url)
        self.pool = redis.ConnectionPool.from_url(
            options.redis_url, decode_responses=True, protocol=2
        )
        self.conn = self.pool.make_connection()
        self.conn.connect()
        self.conn.send_command("HGET", Keys(options.prefix).meta, "store_id")
        self.keys = Keys(options.prefix, self.conn.read_response())
        self.script = SCRIPTS["renew" if batch == 1 else "renew_many"]
        self.conn.send_command("SCRIPT", "LOAD", self.script.text)
        self.conn.read_response()
        self.rounds, self.batch = rounds, batch
        self.hashes = {lease.job_id: hash_secret(lease.secret) for lease in rounds.leases}
        self.ttl = repr(TTL)

    def step(self, limit: int) -> int:
        keys, done = self.keys, 0
        while done < limit:
            taken = self.rounds.take(min(self.batch, limit - done))
            if not taken:
                break
            if self.batch == 1:
                job_id = taken[0].job_id
                call: tuple[Any, ...] = (2, keys.job(job_id), keys.clock, "", OWNER, "1")
                call += (self.hashes[job_id], self.ttl)
            else:
                job_keys = [keys.job(lease.job_id) for lease in taken]
                args: list[str] = [""]
                for lease in taken:
                    args += (OWNER, "1", self.hashes[lease.job_id], self.ttl)
                call = (len(taken) + 1, keys.clock, *job_keys, *args)
            self.conn.send_command("EVALSHA", self.script.sha, *call)
            reply = self.conn.read_response()
            assert reply, reply
            done += len(taken)
        return done

    def close(self) -> None:
        self.conn.disconnect()
        self.pool.disconnect()


# -- the run -------------------------------------------------------------------------------


def side(
    name: str, store: str, args: argparse.Namespace, batch: int, raw: bool, folder: str
) -> Side:
    def open_side() -> tuple[Any, Callable[[int], None]]:
        url, analyze, drop = fresh_store(
            store, folder=folder, pg=args.postgres, redis_url=args.redis
        )
        leases, opened_at = hold(url, args.leases)
        analyze()
        rounds = Rounds(leases, args.rounds)
        runner: Any
        if not raw:
            runner = TenureRenew(url, rounds, batch)
        elif store == "sqlite":
            runner = RawSQLite(url.removeprefix("sqlite:///"), rounds, batch)
        elif store == "postgres":
            base, _, schema = url.partition("?schema=")
            runner = RawPostgres(base, schema, rounds, batch)
        else:
            runner = RawRedis(url, rounds, batch)

        def verify(done: int) -> None:
            assert done == args.leases * args.rounds, (name, done)
            with tenure.connect(url) as check:
                jobs = check.jobs(limit=args.leases + 1)
                assert len(jobs) == args.leases, (name, len(jobs))
                for job in jobs:
                    assert (job.state, job.generation) == ("leased", 1), (name, job)
                    assert job.updated_at > opened_at, (name, job)  # renewed in the run
            drop()

        return runner, verify

    return Side(name, open_side)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres,redis")
    parser.add_argument("--leases", type=int, default=200)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None, help="folder of the SQLite files")
    parser.add_argument("--postgres", default=POSTGRES)
    parser.add_argument("--redis", default=REDIS)
    args = parser.parse_args(argv)
    print(machine_line())
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for store in args.stores.split(","):
            sides = [
                side("renew", store, args, 1, False, folder),
                side("raw renew", store, args, 1, True, folder),
                side(f"renew_many({args.batch})", store, args, args.batch, False, folder),
                side(f"raw renew_many({args.batch})", store, args, args.batch, True, folder),
            ]
            results = interleave_chunks(sides, args.repeat, chunk=args.batch * 5)
            print_report(
                f"{store}: leases renewed per second, {args.leases} leases x {args.rounds} "
                f"rounds, median of {args.repeat}",
                results,
                "raw renew",
                unit="renewals/s",
            )
            many, raw_many = results[2], results[3]
            single = results[0]
            print(
                f"  renew_many / renew: {many.median / single.median:.2f}x; "
                f"renew_many / raw renew_many: {many.median / raw_many.median:.1%}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
