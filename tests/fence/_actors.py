"""Workers of the worked example, as separate OS processes (``python -m tests.fence._actors``).

Each actor prints JSON lines on stdout (one per event) and exits 0; the test reads them.

* ``stale``: claims the job (it must get the generation it is told), prepares its effect
  (an HTTP request with the token headers, or an open destination connection), reports
  ``prepared`` and stops itself with SIGSTOP: the stall. When continued (SIGCONT), it
  sends the prepared effect, reports the outcome, then tries to complete the job.
* ``fresh``: waits until the job is claimable (the stalled lease expires by the store's
  clock), claims it, makes its effect and completes the job.

Destinations: ``http`` (the sink's URL), ``sqlite`` (a file path), ``postgresql`` (a conninfo
and a schema, ``conninfo#schema``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
import time
from typing import Any

import tenure
from tenure import fence

KEY_SPEC = "k1=worked-example-secret-0123456789"
OWNERS = {"stale": "worker-A", "fresh": "worker-B"}


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class Destination:
    """One effect of a worker at one destination, prepared before it is made."""

    def __init__(self, kind: str, where: str, lease: tenure.Lease) -> None:
        self.kind, self.where, self.lease = kind, where, lease
        self._request: Any = None
        self._client: Any = None
        self._conn: Any = None

    def prepare(self) -> None:
        value = {"by": self.lease.owner, "generation": self.lease.generation}
        if self.kind == "http":
            import httpx

            from tenure.fence.http import TenureAuth

            self._client = httpx.Client(base_url=self.where, timeout=10)
            auth = TenureAuth(self.lease, keyring=fence.Keyring.parse(KEY_SPEC))
            request = self._client.build_request("POST", "/records", json=value)
            self._request = auth.stamp(request)  # signed and stamped now, sent later
        elif self.kind == "sqlite":
            self._conn = sqlite3.connect(self.where, timeout=30)
        else:
            import psycopg

            conninfo, _, schema = self.where.partition("#")
            self._conn = psycopg.connect(conninfo, options=f"-c search_path={schema}")

    def make(self) -> dict[str, Any]:
        if self.kind == "http":
            response = self._client.send(self._request)
            self._client.close()
            return {"status": response.status_code, "body": response.json()}
        insert = (
            "INSERT INTO effects (writer, generation) VALUES (?, ?)"
            if self.kind == "sqlite"
            else "INSERT INTO effects (writer, generation) VALUES (%s, %s)"
        )
        try:
            with fence.sql_fence(self._conn, self.lease) as cur:
                cur.execute(insert, (self.lease.owner, self.lease.generation))
        except tenure.StaleToken as exc:
            return {"error": "StaleToken", "highest_seen": exc.highest_seen, "message": str(exc)}
        finally:
            self._conn.close()
        return {"written": True}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=sorted(OWNERS))
    parser.add_argument("--store", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--kind", choices=("http", "sqlite", "postgresql"), required=True)
    parser.add_argument("--where", required=True)
    parser.add_argument("--ttl", type=float, default=1.0)
    parser.add_argument("--generation", type=int, required=True)
    args = parser.parse_args()
    owner = OWNERS[args.role]
    with tenure.connect(args.store) as store:
        deadline = time.monotonic() + 20
        lease = store.claim(args.job, owner, args.ttl)
        while lease is None and time.monotonic() < deadline:
            time.sleep(0.02)  # waiting for the other lease to expire by the store's clock
            lease = store.claim(args.job, owner, args.ttl)
        if lease is None:
            emit("error", message="never claimed")
            sys.exit(1)
        emit("claimed", owner=owner, generation=lease.generation)
        if lease.generation != args.generation:
            emit("error", message=f"expected generation {args.generation}")
            sys.exit(1)
        destination = Destination(args.kind, args.where, lease)
        destination.prepare()
        if args.role == "stale":
            emit("prepared")
            os.kill(os.getpid(), signal.SIGSTOP)  # the stall: until the test sends SIGCONT
            emit("woke")
        emit("effect", **destination.make())
        try:
            store.complete(lease, {"by": owner})
        except tenure.LeaseLost as exc:
            emit("complete", error="LeaseLost", current_generation=exc.current_generation)
        else:
            emit("complete", ok=True)


if __name__ == "__main__":
    main()
