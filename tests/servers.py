"""Throwaway database servers that a test may restart, kill -9 or wipe.

The shared PostgreSQL and Redis of the machine must never be restarted by a test, so the
tests of outages start their own: a PostgreSQL cluster made with ``initdb`` in a temp dir
and run by ``pg_ctl`` on a spare loopback port, and a ``redis-server`` with an append-only
file fsynced on every write (so a restart keeps every acknowledged write, as a production
Redis configured for tenure would). Where the binaries are missing the tests skip with a
reason (fail under ``CI=true``, see `tests.backends.unavailable`).

PostgreSQL refuses to run as root: as root, the cluster belongs to the ``postgres`` user
and its commands run through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.backends import unavailable

__all__ = ["PostgresServer", "RedisServer", "free_port", "postgres_server", "redis_server"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"{what} did not accept connections on port {port} in {timeout} s")


# -- PostgreSQL ---------------------------------------------------------------------------


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


class PostgresServer:
    """One PostgreSQL cluster of its own, on 127.0.0.1:``port``, trust auth."""

    def __init__(self, port: int | None = None) -> None:
        bin_dir = _pg_bin()
        if bin_dir is None:
            unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found")
        assert bin_dir is not None
        self.bin = bin_dir
        self.port = port or free_port()
        # Its own dir in /tmp, not the test's tmp_path: as root, the cluster's owner
        # (postgres) could not enter pytest's private temp tree.
        self.root = Path(tempfile.mkdtemp(prefix="tenure-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> PostgresServer:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = on\nshared_buffers = 32MB\nmax_connections = 60\n"
            )
        return self

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        _wait_for_port(self.port, 30, "PostgreSQL")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def pg_ctl_restart(self) -> None:
        """``pg_ctl restart -m fast``, what ``pg_ctlcluster … restart`` runs: one command,
        the server down only between its fast shutdown and its start."""
        self._run(
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
        _wait_for_port(self.port, 30, "PostgreSQL")

    def pid(self) -> int | None:
        pidfile = self.data / "postmaster.pid"
        try:
            return int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        """kill -9 the postmaster (its backends exit when they notice), as a crash would."""
        pid = self.pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.02)
        # Backends orphaned by the kill hold shared memory until they exit.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._backends_alive():
            time.sleep(0.05)

    def _backends_alive(self) -> bool:
        done = subprocess.run(
            ["pgrep", "-f", f"postgres.*{self.data}"], capture_output=True, check=False
        )
        return done.returncode == 0

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

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer().init()
    server.start()
    try:
        yield server
    finally:
        server.destroy()


# -- Redis --------------------------------------------------------------------------------


class RedisServer:
    """One redis-server of its own on 127.0.0.1:``port``: append-only, fsync always."""

    def __init__(self, root: Path, *, persistent: bool = True, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("redis-server not found")
        assert binary is not None
        self.binary = binary
        self.port = port or free_port()
        self.root = root
        self.persistent = persistent
        self.process: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
            if self.persistent
            else ["--appendonly", "no", "--save", ""]
        )
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.root),
                *persistence,
                "--logfile",
                str(self.root / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port, 15, "redis-server")
        self._wait_loaded()

    def _wait_loaded(self) -> None:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 15
        try:
            while time.monotonic() < deadline:
                try:
                    client.ping()
                    return
                except redis.BusyLoadingError:
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """A clean shutdown (SIGTERM: Redis fsyncs and exits)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=15)

    def restart(self) -> None:
        self.stop()
        self.start()

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

    def destroy(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def redis_server(root: Path, *, persistent: bool = True) -> Iterator[RedisServer]:
    server = RedisServer(root, persistent=persistent)
    server.start()
    try:
        yield server
    finally:
        server.destroy()
