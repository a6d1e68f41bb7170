"""What the nemesis acts on (`tenure.chaos._nemesis.Target`): a run's processes, its
proxy and its store. Every fault here starts and returns; what must wait (a store pause, a
store restart) runs on a thread of the run's and ends by itself."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._store import Store
from ..errors import TenureError
from ..models import Job
from ._nemesis import is_stopped
from ._processes import Processes

__all__ = ["FaultTarget"]


class FaultTarget:
    """The nemesis's target on one run (see the `Target` protocol for each method)."""

    def __init__(self, processes: Processes, side: Store, control: Store | None = None) -> None:
        self.p = processes
        self.side = side  # the nemesis thread's own store client
        self.control = control  # a recorded client (chaos+ URL) for cancels and requeues
        self._locker_busy = threading.Lock()  # the SQLite lock holder is in a fault
        self._outage_busy = threading.Lock()  # the store server is being restarted
        self._requeues = threading.Semaphore(0)  # one release per requeue thread finished
        self._requeues_started = 0

    # -- workers -------------------------------------------------------------------------

    def worker(self, number: int) -> tuple[str, int] | None:
        with self.p.lock:
            slot = self.p.slots[number - 1]
            if slot.process is None or slot.process.poll() is not None:
                return None
            return slot.name, slot.process.pid

    def set_control(
        self, name: str, *, clock: dict[str, float] | None, arm: dict[str, Any] | None
    ) -> None:
        self.p.set_control(name, clock=clock, arm=arm)

    def hit(self, name: str) -> int | None:
        try:
            return int((self.p.out / "ctl" / f"{name}.hit").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def kill(self, number: int, restart_after: float) -> tuple[str, int] | None:
        with self.p.lock:
            slot = self.p.slots[number - 1]
            process = slot.process
            if process is None or process.poll() is not None:
                return None
            slot.restart_at = time.monotonic() + restart_after
            with contextlib.suppress(OSError):
                process.kill()
            return slot.name, process.pid

    def _stopped_pids(self) -> set[int]:
        with self.p.lock:
            return {
                s.process.pid
                for s in self.p.slots
                if s.process is not None and is_stopped(s.process.pid)
            }

    def storm(self, jobs: int, window: float, holder: int | None = None) -> dict[str, Any] | None:
        """Release the storm processes together onto ``jobs`` jobs: those held by stopped
        workers (only worker ``holder``'s when given) first, then ready and leased ones."""
        storms = self.p.storms
        if not storms:
            return None
        stopped = {holder} if holder is not None else self._stopped_pids()
        targets: list[str] = []
        held = 0
        if stopped:
            for job in self._jobs("leased", 1000):
                pid = (job.owner or "").split(":")[-2:-1]
                if pid and pid[0].isdigit() and int(pid[0]) in stopped and len(targets) < jobs:
                    targets.append(job.job_id)
                    held += 1
        for state in ("ready", "leased"):
            if len(targets) >= jobs or holder is not None:
                break
            found = [j.job_id for j in self._jobs(state, 50)]
            found = [j for j in found if j not in targets]
            self.p.rng.shuffle(found)
            targets += found[: jobs - len(targets)]
        if not targets:
            return None
        command = json.dumps({"jobs": targets, "at": time.monotonic() + 0.2, "window": window})
        for process in storms:
            if process.poll() is None and process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.write(command + "\n")
                    process.stdin.flush()
        return {"jobs": targets, "processes": len(storms), "held_by_stopped": held}

    def _jobs(self, state: str, limit: int) -> list[Job]:
        """Up to ``limit`` jobs in ``state`` of each of the run's queues."""
        side = self.side
        return [job for q in self.p.queues for job in side.jobs(queue=q, state=state, limit=limit)]

    # -- job control ---------------------------------------------------------------------

    def cancel_jobs(
        self,
        jobs: int,
        requeue_after: float | None,
        record: Callable[[str, dict[str, Any]], None],
    ) -> bool:
        control = self.control
        if control is None:
            raise RuntimeError("the run has no recorded store client for cancels")
        found: list[tuple[str, str]] = []
        for state in ("leased", "ready"):
            listed = [j.job_id for j in self._jobs(state, 50)]
            self.p.rng.shuffle(listed)
            found += [(job, state) for job in listed[: jobs - len(found)]]
        cancelled: list[str] = []
        for job_id, _state in found:
            try:
                control.cancel(job_id, reason="tenure chaos: cancel fault")
            except TenureError:
                continue  # finished meanwhile (refused) or the store away: in the history
            cancelled.append(job_id)
        if not cancelled:
            return False
        states = {job: state for job, state in found if job in cancelled}
        # A done job is run again too: its requeue starts a new life, which must end done
        # once more, at a generation above the one that completed it.
        rerun: list[str] = []
        for done in self._jobs("done", 1)[:1]:
            with contextlib.suppress(TenureError):  # refused or away: in the history
                control.requeue(done.job_id)
                rerun.append(done.job_id)
        record("start", {"cancelled": cancelled, "states": states, "requeued_done": rerun})
        if requeue_after is None:
            record("end", {"requeued": []})
            return True
        self._requeues_started += 1

        def requeue() -> None:
            try:
                time.sleep(requeue_after)
                requeued = []
                for job_id in cancelled:
                    with contextlib.suppress(TenureError):
                        control.requeue(job_id)
                        requeued.append(job_id)
                record("end", {"requeued": requeued})
            finally:
                self._requeues.release()

        self.p.in_thread(requeue, "tenure-chaos-requeue")
        return True

    # -- the network and the store -------------------------------------------------------

    def proxy_delay(self, lag: float, hold: float) -> bool:
        if self.p.proxy is None:
            return False
        self.p.proxy.delay(lag, hold)
        return True

    def proxy_drop(self, window: float) -> bool:
        if self.p.proxy is None:
            return False
        self.p.proxy.drop_replies(window)
        return True

    def store_pause(self, duration: float) -> dict[str, Any] | None:
        if self.p.kind == "sqlite":
            return self._pause_sqlite(duration)
        if self.p.kind == "postgres":
            return self._pause_postgres(duration)
        return self._pause_redis(duration)

    def _in_thread(self, target: Callable[[], None]) -> None:
        self.p.in_thread(target, "tenure-chaos-store-pause")

    def _pause_sqlite(self, duration: float) -> dict[str, Any] | None:
        locker = self.p.locker
        if locker is None or locker.stdin is None or locker.stdout is None:
            return None
        stdin, stdout = locker.stdin, locker.stdout
        if not self._locker_busy.acquire(blocking=False):
            return None  # the previous store pause is still on

        def hold() -> None:
            try:
                stdin.write("lock\n")
                stdin.flush()
                if stdout.readline().strip() != "locked":
                    return
                os.kill(locker.pid, signal.SIGSTOP)
                time.sleep(duration)
                os.kill(locker.pid, signal.SIGCONT)
                stdin.write("unlock\n")
                stdin.flush()
                stdout.readline()
            except OSError as exc:
                self.p.rec.event("fault-error", kind="store-pause", error=str(exc))
            finally:
                self._locker_busy.release()

        self._in_thread(hold)
        return {"how": "sqlite-writer-stopped", "target_pid": locker.pid}

    def _pause_postgres(self, duration: float) -> dict[str, Any] | None:
        import psycopg

        with psycopg.connect(_libpq_url(self.p.o.store_url), autocommit=True) as conn:
            pids = [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name LIKE "
                    "'tenure-chaos-%%' AND pid <> pg_backend_pid() ORDER BY pid"
                )
            ]
        if pids:
            pid = self.p.rng.choice(pids)
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass  # not ours to signal (another host or user): lock the table instead
            else:
                self.p.stopped_backends.add(pid)

                def resume() -> None:
                    time.sleep(duration)
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGCONT)
                    self.p.stopped_backends.discard(pid)

                self._in_thread(resume)
                return {"how": "backend-stopped", "backend_pid": pid}
        from ..stores.postgres import parse_postgres_url

        schema = parse_postgres_url(self.p.o.store_url).schema
        self._in_thread(lambda: self._lock_table(schema, duration))
        return {"how": "table-locked"}

    def _lock_table(self, schema: str, duration: float) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(_libpq_url(self.p.o.store_url)) as conn:
            conn.execute(
                sql.SQL("LOCK TABLE {}.tenure_jobs IN ACCESS EXCLUSIVE MODE").format(
                    sql.Identifier(schema)
                )
            )
            time.sleep(duration)
            conn.rollback()

    def _pause_redis(self, duration: float) -> dict[str, Any] | None:
        import redis

        client = redis.Redis.from_url(_redis_url(self.p.o.store_url))
        try:
            client.execute_command("CLIENT", "PAUSE", int(duration * 1000), "ALL")  # type: ignore[no-untyped-call]
        finally:
            client.close()
        return {"how": "client-pause"}

    def store_outage(
        self, outage: float, *, kill: bool, record: Callable[[str, dict[str, Any]], None]
    ) -> bool:
        server = self.p.server
        if self.p.kind == "sqlite":
            if not kill:
                raise RuntimeError("store-restart does not apply to SQLite (no server)")
            busy = self._locker_busy

            def run() -> None:
                self._kill_sqlite_writer(outage, record)

        else:
            if server is None:
                raise RuntimeError("the run has no store server of its own to restart")
            busy = self._outage_busy

            def run() -> None:
                assert server is not None
                record("start", {"how": "kill" if kill else "stop", "server_pid": server.pid})
                record("end", server.outage(outage, kill=kill))

        if not busy.acquire(blocking=False):
            return False

        def guarded() -> None:
            try:
                run()
            except Exception as exc:  # the history says; the start has no end then
                kind = "store-kill" if kill else "store-restart"
                error = f"{type(exc).__name__}: {exc}"[:300]
                self.p.rec.event("fault-error", kind=kind, error=error)
            finally:
                busy.release()

        self._in_thread(guarded)
        return True

    def failover(self, outage: float, record: Callable[[str, dict[str, Any]], None]) -> bool:
        server = self.p.server
        if server is None or server.replica is None:
            return False
        if not self._outage_busy.acquire(blocking=False):
            return False

        def run() -> None:
            try:
                assert server is not None
                record("start", {"how": "failover", "server_pid": server.pid})
                record("end", server.failover(outage))
            except Exception as exc:  # the history says; the start has no end then
                error = f"{type(exc).__name__}: {exc}"[:300]
                self.p.rec.event("fault-error", kind="failover", error=error)
            finally:
                self._outage_busy.release()

        self._in_thread(run)
        return True

    def _kill_sqlite_writer(
        self, outage: float, record: Callable[[str, dict[str, Any]], None]
    ) -> None:
        """The SQLite lock holder takes the write lock and changes rows of the run's queue
        without committing; ``outage`` seconds later it is killed -9 mid-transaction and a
        new one opens the file."""
        locker = self.p.locker
        if locker is None or locker.stdin is None or locker.stdout is None:
            raise RuntimeError("the SQLite lock holder is not running")
        locker.stdin.write(f"write {self.p.queue}\n")
        locker.stdin.flush()
        answer = locker.stdout.readline().strip()
        if answer != "locked":
            raise RuntimeError(f"the SQLite lock holder answered {answer!r} to write")
        began = time.monotonic()
        try:
            record("start", {"how": "sqlite-writer-killed", "target_pid": locker.pid})
            time.sleep(outage)
        finally:  # never left holding the lock
            os.kill(locker.pid, signal.SIGKILL)
            locker.wait(10)  # the lock is free: the next writer finds the transaction gone
        down = round(time.monotonic() - began, 3)
        record("end", {"how": "sqlite-writer-killed", "target_pid": locker.pid, "down_s": down})
        self.p.start_locker()

    # -- healing -------------------------------------------------------------------------

    def heal(self) -> None:
        """Undo what the faults left: the proxy, the clocks and arms, a Redis pause, the
        processes still stopped; a store restart going on is waited for."""
        if self._outage_busy.acquire(timeout=60):
            self._outage_busy.release()
        if self._locker_busy.acquire(timeout=60):
            self._locker_busy.release()
        while self._requeues_started:  # every requeue done before the queue is drained
            self._requeues_started -= 1
            self._requeues.acquire(timeout=60)
        if self.p.proxy is not None:
            self.p.proxy.heal()
        with self.p.lock:
            names = [s.name for s in self.p.slots]
        for name in names:
            self.set_control(name, clock=None, arm=None)
        if self.p.kind == "redis":
            with contextlib.suppress(Exception):
                import redis

                client = redis.Redis.from_url(_redis_url(self.p.o.store_url))
                client.execute_command("CLIENT", "UNPAUSE")  # type: ignore[no-untyped-call]
                client.close()
        self.p.resume_stopped()


def _libpq_url(url: str) -> str:
    """A PostgreSQL URL without tenure's own options (for a plain psycopg connection)."""
    own = {"schema", "pool_min", "pool_max", "pool_timeout", "auto_migrate", "listen"}
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in own]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _redis_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=""))
