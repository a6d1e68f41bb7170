"""Throwaway store servers that a chaos run (or a test) starts, restarts, kills and removes.

A store server given by a user must never be restarted by ``tenure chaos``, so the
``store-restart`` and ``store-kill`` faults run the store on a server of the run's own:

* PostgreSQL: a cluster made with ``initdb`` in a temp dir, run by ``pg_ctl`` on a spare
  loopback port (the binaries from ``/usr/lib/postgresql/*/bin``, else ``PATH``). PostgreSQL
  refuses to run as root: as root the cluster belongs to the ``postgres`` user and its
  commands run through ``runuser``.
* Redis: a ``redis-server`` with an append-only file fsynced on every write (``appendonly
  yes``, ``appendfsync always``), so that a restart or a ``kill -9`` keeps every
  acknowledged write, as a production Redis configured for tenure would.

`missing_binaries` names what is not installed; the servers raise `ServerMissing` then.
tests/servers.py builds the tests' throwaway servers on these classes.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "OwnedServer",
    "PostgresServer",
    "RedisServer",
    "ServerMissing",
    "free_port",
    "missing_binaries",
    "spare_port",
]

PG_MISSING = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin nor on PATH"
)
REDIS_MISSING = "redis-server not found on PATH"


class ServerMissing(RuntimeError):
    """A binary that a throwaway server needs is not installed (the message says which)."""


def free_port() -> int:
    """A port nothing listens on now (from the kernel's ephemeral range)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spare_port() -> int:
    """A free loopback port *below* the kernel's ephemeral range, for a server that will be
    stopped and started again on it: while it is down, no outgoing connection of the host
    can be given its port."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as ports:
            low = int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(max(1025, low - 12000), max(1026, low))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return free_port()


def wait_for_port(port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"{what} did not accept connections on port {port} in {timeout} s")


def pg_bin() -> Path | None:
    """The directory of PostgreSQL's server binaries (the newest installed version)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl and shutil.which("initdb"):
        return Path(pg_ctl).parent
    return None


def missing_binaries(kind: str) -> str | None:
    """What a throwaway server of store ``kind`` needs and is not installed (None: all is)."""
    if kind == "postgres" and pg_bin() is None:
        return PG_MISSING
    if kind == "postgres" and os.geteuid() == 0 and shutil.which("runuser") is None:
        # initdb and postgres refuse to run as root: the cluster runs as the postgres user.
        return "runuser not found on PATH (needed to run PostgreSQL as the postgres user when root)"
    if kind == "redis" and shutil.which("redis-server") is None:
        return REDIS_MISSING
    return None


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()
    except OSError:
        return None


def _dead(pid: int) -> bool:
    """Whether ``pid`` has exited (gone, or a zombie its parent has not reaped yet)."""
    fields = _proc_stat(pid)
    return fields is None or fields[0] in ("Z", "X")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _proc_stat(int(entry))
            if fields is not None and len(fields) > 1 and fields[1] == str(pid):
                found.append(int(entry))
    return found


def _wait(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


# -- PostgreSQL ---------------------------------------------------------------------------


class PostgresServer:
    """One PostgreSQL cluster of its own, on 127.0.0.1:``port``, trust auth."""

    def __init__(self, port: int | None = None) -> None:
        missing = missing_binaries("postgres")
        if missing is not None:
            raise ServerMissing(missing)
        bin_dir = pg_bin()
        assert bin_dir is not None
        self.bin = bin_dir
        self.port = port or spare_port()
        # Its own dir in /tmp: as root, the cluster's owner (postgres) could not enter a
        # private temp tree (pytest's, a user's home).
        self.root = Path(tempfile.mkdtemp(prefix="tenure-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run one of the cluster's binaries (as the postgres user when root)."""
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> PostgresServer:
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        # max_connections: after an outage each process's pool grows towards its pool_max
        # (every waiting operation asks for a connection) and keeps the connections idle
        # for psycopg_pool's max_idle. At 60, the workers' and storms' pools filled the
        # server after a store-kill ("too many clients" for a minute), and a worker's
        # renewer waited out its pool_timeout for a connection: a fault nobody scheduled.
        # (A replica copies this file.)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = on\nshared_buffers = 32MB\nmax_connections = 200\n"
            )
        return self

    def start(self) -> None:
        # Right after a kill -9 the old backends may still hold the shared memory for a
        # moment (they exit when they notice the postmaster died): try again for a while.
        deadline = time.monotonic() + 30
        while True:
            done = self.run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-w",
                "-t",
                "60",
                "start",
                check=False,
            )
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"PostgreSQL in {self.data} did not start: {done.stderr.strip()[-500:]} "
                    f"(see {self.log})"
                )
            time.sleep(0.2)
        wait_for_port(self.port, 30, "PostgreSQL")

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def pid(self) -> int | None:
        """The postmaster's process id (from its lock file), None when it is not running."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        """kill -9 the postmaster, as a crash would; returns once it and its backends have
        exited (they do when they notice it died), so that `start` can run crash recovery."""
        pid = self.pid()
        if pid is None or _dead(pid):
            return
        backends = _children(pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait(lambda: _dead(pid), 10)
        _wait(lambda: all(_dead(child) for child in backends), 10)
        if _proc_stat(pid) is not None:
            # A zombie: pg_ctl daemonized it, so its parent is the host's init, which reaps
            # when it gets to it (over a second on some hosts). PostgreSQL would take the
            # lock files naming it for a live server and refuse to start; the process is
            # dead, as a supervisor reaping it at once would show, so the files go.
            (self.data / "postmaster.pid").unlink(missing_ok=True)
            (self.root / f".s.PGSQL.{self.port}.lock").unlink(missing_ok=True)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def init_replica(self, primary: PostgresServer, *, name: str = "") -> PostgresServer:
        """Make this cluster a streaming replica of ``primary`` (running): ``pg_basebackup
        -R`` (a physical copy, standby.signal and primary_conninfo written), on this
        server's own port. ``name``: its application_name, for a primary's
        ``synchronous_standby_names``. Then `start` it; `promote` makes it a primary."""
        conninfo = f"host=127.0.0.1 port={primary.port} user=postgres"
        if name:
            conninfo += f" application_name={name}"
        self.run(
            "pg_basebackup", "-d", conninfo, "-D", str(self.data), "-R", "-X", "stream",
            "-c", "fast",
        )  # fmt: skip
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {self.port}\nunix_socket_directories = '{self.root}'\nhot_standby = on\n"
            )
        return self

    def promote(self) -> None:
        """``pg_ctl promote -w``: the standby ends recovery and takes writes (a new
        timeline); returns once it does."""
        self.run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")


# -- Redis --------------------------------------------------------------------------------


class RedisServer:
    """One redis-server of its own on 127.0.0.1:``port``: append-only, fsync always (or, not
    ``persistent``, no persistence at all: a restart comes back empty)."""

    def __init__(self, root: Path, *, persistent: bool = True, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServerMissing(REDIS_MISSING)
        self.binary = binary
        self.port = port or spare_port()
        self.root = root
        self.persistent = persistent
        self.process: subprocess.Popen[bytes] | None = None
        self.log = root / "redis.log"
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
                str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, 15, "redis-server")
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

    def pid(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None
        return self.process.pid

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

    def destroy(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


# -- a chaos run's own server --------------------------------------------------------------


class OwnedServer:
    """The store server of a chaos run with store faults: started by the run, stopped and
    killed by its nemesis, removed at its end. ``url`` is the run's store URL on it: the
    given URL's options (schema, key prefix, pool) on the server's address."""

    def __init__(self, kind: str, given_url: str, *, replica: bool = False) -> None:
        self.kind = kind
        self.server: PostgresServer | RedisServer
        # The ``failover`` fault's streaming replica (PostgreSQL only), promoted by
        # `failover`; then the primary, and the dead primary is kept for `close`.
        self.replica: PostgresServer | None = None
        self.dead: PostgresServer | None = None
        if kind == "postgres":
            self.server = PostgresServer()
            if replica:
                self.replica = PostgresServer()
        elif replica:
            raise ValueError(f"no replica for a {kind} store (failover is PostgreSQL only)")
        elif kind == "redis":
            self.server = RedisServer(Path(tempfile.mkdtemp(prefix="tenure-chaos-redis-")))
        else:
            raise ValueError(f"no throwaway server for a {kind} store")
        own = urlsplit(self.server.url)
        given = urlsplit(given_url)
        path = given.path if kind == "redis" and given.path not in ("", "/") else own.path
        scheme = given.scheme if kind == "postgres" else "redis"  # no TLS on the throwaway
        netloc = own.netloc
        query = given.query
        if self.replica is not None:
            # libpq's multi-host form: a new connection goes to whichever host takes writes.
            netloc += f",127.0.0.1:{self.replica.port}"
            query = "&".join(q for q in (query, "target_session_attrs=read-write") if q)
        self.url = urlunsplit((scheme, netloc, path, query, ""))

    @property
    def pid(self) -> int | None:
        """The server's process id (PostgreSQL: the postmaster's), None when it is down."""
        return self.server.pid()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    @property
    def addresses(self) -> str:
        """The server's address, and its replica's (or the dead primary's) if it has one."""
        other = self.replica or self.dead
        return self.address + (f",127.0.0.1:{other.port}" if other is not None else "")

    def start(self) -> None:
        if isinstance(self.server, PostgresServer):
            self.server.init()
        self.server.start()
        if self.replica is not None:
            assert isinstance(self.server, PostgresServer)
            self.replica.init_replica(self.server, name="tenure-chaos-replica")
            self.replica.start()

    def failover(self, seconds: float) -> dict[str, Any]:
        """kill -9 the primary (the postmaster), wait ``seconds`` (a failover manager's time
        to notice), then promote the replica (``pg_ctl promote -w``): it is the server from
        then on. Returns once it takes writes, with what was done and how long writes were
        refused. Only once: then there is no replica."""
        replica = self.replica
        if replica is None:
            raise RuntimeError("no replica to promote (the run's one failover already happened)")
        assert isinstance(self.server, PostgresServer)
        began = time.monotonic()
        before = self.server.pid()
        self.server.kill()
        killed = time.monotonic()
        time.sleep(seconds)
        replica.promote()
        back = time.monotonic()
        self.dead, self.server, self.replica = self.server, replica, None
        return {
            "how": f"killed primary 127.0.0.1:{self.dead.port}, promoted replica {self.address}",
            "server_pid": before,
            "new_pid": replica.pid(),
            "stop_s": round(killed - began, 3),
            "down_s": round(back - began, 3),
        }

    def outage(self, seconds: float, *, kill: bool) -> dict[str, Any]:
        """Stop the server (``kill``: kill -9 it), wait ``seconds``, start it again; returns
        once it accepts connections, with what was done and how long it was down."""
        began = time.monotonic()
        before = self.server.pid()
        if kill:
            self.server.kill()
        else:
            self.server.stop()
        stopped = time.monotonic()
        time.sleep(seconds)
        self.server.start()
        back = time.monotonic()
        return {
            "how": ("killed" if kill else "stopped") + f" {self.kind} server {self.address}",
            "server_pid": before,
            "new_pid": self.server.pid(),
            "stop_s": round(stopped - began, 3),
            "down_s": round(back - began, 3),
        }

    def close(self, logs: Path | None = None) -> None:
        """Copy the server's log into ``logs``, stop it and remove its files."""
        if logs is not None:
            with contextlib.suppress(OSError):
                shutil.copyfile(self.server.log, logs / f"{self.kind}-server.log")
            for other, name in ((self.replica, "replica"), (self.dead, "old-primary")):
                if other is not None:
                    with contextlib.suppress(OSError):
                        shutil.copyfile(other.log, logs / f"{self.kind}-{name}.log")
        self.server.destroy()
        for other in (self.replica, self.dead):
            if other is not None:
                other.destroy()
