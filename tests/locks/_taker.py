"""A process that takes one lock repeatedly and writes through a fenced destination.

``python -m tests.locks._taker STORE_URL DEST_DB NAME TIMES``: each holding writes a row
``(generation, pid, 'start', t)`` and a row ``(generation, pid, 'end', t)`` (``t`` is
``time.monotonic()``, one clock for every process of the host) through
`tenure.fence.sql_fence`, with a short pause between.

``TIMES`` = ``stall``: take the lock (TTL 1 s), write the start row, stop this process
(SIGSTOP: every thread, the renewer too) until the test continues it, then try the end
row and print what happened (``refused: <error>`` or ``written``).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time

import tenure
from tenure import fence


def main(url: str, dest_path: str, name: str, times: int) -> None:
    store = tenure.connect(url)
    dest = sqlite3.connect(dest_path, timeout=30)
    for _ in range(times):
        with tenure.lock(store, name, ttl=5, timeout=60) as lock:
            for what in ("start", "end"):
                with fence.sql_fence(dest, lock.token) as cur:
                    cur.execute(
                        "INSERT INTO holdings VALUES (?, ?, ?, ?)",
                        (lock.token.generation, os.getpid(), what, time.monotonic()),
                    )
                if what == "start":
                    time.sleep(0.005)
    dest.close()
    store.close()


def stall(url: str, dest_path: str, name: str) -> None:
    store = tenure.connect(url)
    dest = sqlite3.connect(dest_path, timeout=30)
    lock = tenure.Lock(store, name, ttl=1)
    assert lock.acquire(timeout=30)
    with fence.sql_fence(dest, lock.token) as cur:
        cur.execute(
            "INSERT INTO holdings VALUES (?, ?, 'start', ?)",
            (lock.token.generation, os.getpid(), time.monotonic()),
        )
    os.kill(os.getpid(), signal.SIGSTOP)
    try:
        with fence.sql_fence(dest, lock.token) as cur:
            cur.execute(
                "INSERT INTO holdings VALUES (?, ?, 'end', ?)",
                (lock.token.generation, os.getpid(), time.monotonic()),
            )
    except tenure.TenureError as exc:
        print(f"refused: {type(exc).__name__}; lost={lock.lost}", flush=True)
    else:
        print("written", flush=True)
    lock.release()


if __name__ == "__main__":
    if sys.argv[4] == "stall":
        stall(sys.argv[1], sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
