"""Named-lock acquire -> release cycles per second: tenure's lock against the usual locks on
the same servers, in the same run.

    python benchmarks/locks.py [--redis redis://127.0.0.1:6379/0]
                               [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
                               [--cycles 500] [--repeat 5] [--chunk 50]

A *cycle* is one uncontended acquire then release of one lock name, by one client:

* Redis: **tenure** (`tenure.lock` on a ``redis://`` store: a claim and a release script,
  and the lease's renewal bookkeeping, which sends nothing in a cycle this short) against
  **redis-py** ``Redis.lock`` (SET NX PX + a release script) and **python-redis-lock**
  (``redis_lock.Lock``: SET NX EX + a release script with its signal list), each on its
  own keys of the same server;
* PostgreSQL: **tenure** (`tenure.lock` on a ``postgresql://`` store, its own schema)
  against a raw psycopg loop of ``SELECT pg_advisory_lock(k)`` / ``pg_advisory_unlock(k)``
  on one autocommit connection (no token, no expiry: the least a lock can do there).

The sides of one server take turns of ``--chunk`` cycles (A B C, C B A, ...) until each
ran ``--cycles``; that is one repetition; the rate of a side is its cycles over its own time.
Ratios are to tenure on the same server (see benchmarks/_common.py on the method). Before
timing, each side is checked to really exclude (a second client is refused while held).
Exits 0.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import redis
from _common import Result, machine_line, print_report

import tenure

Cycle = Callable[[], None]


def run(sides: dict[str, Cycle], cycles: int, repeat: int, chunk: int) -> list[Result]:
    results = {name: Result(name) for name in sides}
    for _ in range(repeat):
        spent = dict.fromkeys(sides, 0.0)
        order = list(sides)
        for _turn in range(cycles // chunk):
            for name in order:
                cycle = sides[name]
                start = time.perf_counter()
                for _ in range(chunk):
                    cycle()
                spent[name] += time.perf_counter() - start
            order.reverse()
        for name, seconds in spent.items():
            results[name].rates.append((cycles // chunk) * chunk / seconds)
    return list(results.values())


def tenure_side(url: str) -> tuple[Cycle, Callable[[], None]]:
    store = tenure.connect(url)
    other = tenure.connect(url)
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with tenure.lock(store, name, ttl=30):
        assert not tenure.Lock(other, name, 30).acquire(blocking=False)
    other.close()

    def cycle() -> None:
        with tenure.lock(store, name, ttl=30):
            pass

    return cycle, store.close


def redis_sides(base: str) -> dict[str, Cycle]:
    import redis_lock  # python-redis-lock

    client = redis.Redis.from_url(base)
    prefix = f"bench-locks-{uuid.uuid4().hex[:8]}"
    redis_py = client.lock(f"{prefix}:redis-py", timeout=30)
    assert redis_py.acquire(blocking=False)
    assert not client.lock(f"{prefix}:redis-py", timeout=30).acquire(blocking=False)
    redis_py.release()
    prl = redis_lock.Lock(client, f"{prefix}:prl", expire=30)
    assert prl.acquire(blocking=False)
    assert not redis_lock.Lock(client, f"{prefix}:prl", expire=30).acquire(blocking=False)
    prl.release()

    def redis_py_cycle() -> None:
        assert redis_py.acquire(blocking=False)
        redis_py.release()

    def prl_cycle() -> None:
        assert prl.acquire(blocking=False)
        prl.release()

    return {"redis-py": redis_py_cycle, "redis-lock": prl_cycle}


def postgres_side(base: str) -> tuple[Cycle, Any]:
    conn = psycopg.connect(base, autocommit=True)
    other = psycopg.connect(base, autocommit=True)
    key = int(uuid.uuid4().int % 2**62)
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    row = other.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    assert row is not None
    assert row[0] is False
    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    other.close()

    def cycle() -> None:
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    return cycle, conn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=50)
    args = parser.parse_args()
    print(f"locks: {args.cycles} cycles x {args.repeat} repetitions; {machine_line()}")

    prefix = f"bench-locks-{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in args.redis else "?"
    tenure_cycle, close = tenure_side(f"{args.redis}{sep}prefix={prefix}")
    sides = {"tenure": tenure_cycle, **redis_sides(args.redis)}
    results = run(sides, args.cycles, args.repeat, args.chunk)
    close()
    print_report("Redis: acquire -> release cycles", results, "tenure", unit="cycles/s")

    schema = f"bench_locks_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in args.postgres else "?"
    tenure_cycle, close = tenure_side(f"{args.postgres}{sep}schema={schema}")
    advisory, conn = postgres_side(args.postgres)
    results = run(
        {"tenure": tenure_cycle, "advisory": advisory}, args.cycles, args.repeat, args.chunk
    )
    close()
    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    conn.close()
    print_report("PostgreSQL: acquire -> release cycles", results, "tenure", unit="cycles/s")


if __name__ == "__main__":
    main()
