"""Throwaway database servers that a test may restart, kill -9 or wipe.

The shared PostgreSQL and Redis of the machine must never be restarted by a test, so the
tests of outages start their own: a PostgreSQL cluster made with ``initdb`` in a temp dir
and run by ``pg_ctl`` on a spare loopback port, and a ``redis-server`` with an append-only
file fsynced on every write (so a restart keeps every acknowledged write, as a production
Redis configured for tenure would). The servers are `tenure.chaos`'s own (the ones
``tenure chaos`` restarts for its ``store-restart`` and ``store-kill`` faults); here, where
the binaries are missing the tests skip with a reason (fail under ``CI=true``, see
`tests.backends.unavailable`), and a PostgreSQL server can also be dumped and restored.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tenure.chaos import PostgresServer as _PostgresServer
from tenure.chaos import RedisServer as _RedisServer
from tenure.chaos import ServerMissing, free_port
from tests.backends import unavailable

__all__ = [
    "PostgresServer",
    "RedisServer",
    "free_port",
    "postgres_server",
    "redis_server",
    "stop_process",
]


def stop_process(process: subprocess.Popen[str]) -> None:
    """End a server process a test started: SIGTERM, then SIGKILL after 10 s; close its
    stderr pipe, if it has one."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stderr is not None:
        process.stderr.close()


# -- PostgreSQL ---------------------------------------------------------------------------


class PostgresServer(_PostgresServer):
    """One PostgreSQL cluster of its own, on 127.0.0.1:``port``, trust auth."""

    def __init__(self, port: int | None = None) -> None:
        try:
            super().__init__(port)
        except ServerMissing as exc:
            unavailable(str(exc))

    def dump(self, path: Path) -> None:
        subprocess.run(
            [str(self.bin / "pg_dump"), "-Fc", "-f", str(path), self.url],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def restore(self, path: Path) -> None:
        """Replace the database's contents with the dump (an operator's restore)."""
        subprocess.run(
            [str(self.bin / "pg_restore"), "--clean", "--if-exists", "-d", self.url, str(path)],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def restore_data(self, path: Path, schema: str) -> None:
        """Copy the dump's rows of ``schema`` back into its tables (a data-only restore:
        the tables stay, emptied by the caller first)."""
        subprocess.run(
            [
                str(self.bin / "pg_restore"),
                "--data-only",
                "-n",
                schema,
                "-d",
                self.url,
                str(path),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def pg_ctl_restart(self) -> None:
        """``pg_ctl restart -m fast``, what ``pg_ctlcluster … restart`` runs: one command,
        the server down only between its fast shutdown and its start (``-w``: it returns
        once the server accepts connections)."""
        self.run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "restart",
        )


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.init()
    server.start()
    try:
        yield server
    finally:
        server.destroy()


# -- Redis --------------------------------------------------------------------------------


class RedisServer(_RedisServer):
    """One redis-server of its own on 127.0.0.1:``port``: append-only, fsync always."""

    def __init__(self, root: Path, *, persistent: bool = True, port: int | None = None) -> None:
        try:
            super().__init__(root, persistent=persistent, port=port)
        except ServerMissing as exc:
            unavailable(str(exc))


@contextmanager
def redis_server(root: Path, *, persistent: bool = True) -> Iterator[RedisServer]:
    server = RedisServer(root, persistent=persistent)
    server.start()
    try:
        yield server
    finally:
        server.destroy()
