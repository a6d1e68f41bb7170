"""The nemesis: a seeded fault schedule, and the thread that carries it out.

`make_schedule` is a pure function of the seed and the run's shape (store kind, workers,
TTL, duration, interval): the same seed gives the same faults at the same offsets with the
same parameters. What the faults then hit depends on timing (which job a worker holds when
it is stopped), and the history records it.

Fault kinds (durations in TTLs; see docs/reliability.md):

==================  =====================================================================
pause               SIGSTOP a worker wherever it is, SIGCONT 1-3 TTL later
pause-handler       stop a worker between stamping a write and sending it (1-3 TTL)
pause-renew         stop a worker just before a renewal leaves (1-3 TTL)
pause-complete      stop a worker just before a completion leaves (1-3 TTL)
storm               release the storm processes together onto 1-3 jobs (those held by a
                    stopped worker when there is one)
skew                a worker's client clock: offset of 1 minute to 1 hour, rate 0.5-2
kill                SIGKILL a worker; it is restarted as a new process
proxy-delay         every byte between workers and the store server held 0.5-1.5 TTL
proxy-drop          the server's replies dropped, then the connections cut
store-pause         SQLite: a writer stopped while it holds the write lock; PostgreSQL: a
                    worker's backend stopped (SIGSTOP via pg_backend_pid); Redis: CLIENT PAUSE
store-restart       the run's own store server stopped (pg_ctl stop -m fast / SIGTERM) and
                    started again after an outage of 0.1-0.25 TTL; not on SQLite
store-kill          the same server killed with SIGKILL (PostgreSQL: the postmaster) and
                    started again; SQLite: the lock holder killed -9 mid-transaction
failover            PostgreSQL only: the run's own primary killed with SIGKILL and its
                    streaming replica promoted 0.1-0.25 TTL later, as a failover manager
                    would once it noticed (once a run: then there is no replica); the
                    workers reach the new primary through a multi-host URL
cancel              1-3 jobs cancelled through the store (leased ones first, then ready);
                    with odds of 2 in 3 they are requeued 0.5-2 TTL later; and a done job
                    requeued at once (run again: it must end done once more)
==================  =====================================================================

The store faults (store-restart, store-kill, failover) are not in the default mix: they need a store
server of the run's own (tenure.chaos._servers), so a run has them only when they are named
(``--faults``). Nor is ``cancel`` (it changes what a run must end with; and adding a kind
to the default mix would change every existing seed's schedule).
"""

from __future__ import annotations

import heapq
import itertools
import os
import random
import signal
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Protocol

from .._clock import Clock, SystemClock
from ._history import Recorder

__all__ = [
    "KINDS",
    "OPT_IN",
    "STORE_FAULTS",
    "Fault",
    "is_stopped",
    "make_schedule",
    "Nemesis",
]

# kind -> weight; the proxy kinds only where there is a server to put a proxy in front of
KINDS: dict[str, int] = {
    "pause": 2,
    "pause-handler": 3,
    "pause-renew": 2,
    "pause-complete": 3,
    "storm": 2,
    "skew": 2,
    "kill": 2,
    "proxy-delay": 2,
    "proxy-drop": 2,
    "store-pause": 1,
    "store-restart": 2,
    "store-kill": 2,
    "cancel": 2,
    "failover": 1,
}
SERVER_ONLY = ("proxy-delay", "proxy-drop", "store-restart", "failover")
# only when named: a server of the run's own (failover: a primary and its replica)
STORE_FAULTS = ("store-restart", "store-kill", "failover")
OPT_IN = (*STORE_FAULTS, "cancel")  # not in the default mix: each run has them when named
WORKER_KINDS = ("pause", "pause-handler", "pause-renew", "pause-complete", "skew", "kill")
RATES = (0.5, 0.67, 1.5, 2.0)


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: ``at`` seconds after the nemesis starts."""

    at: float
    kind: str
    target: int | None = None  # worker number (1-based) for worker faults
    params: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def make_schedule(
    seed: int,
    *,
    store: str,
    workers: int,
    ttl: float,
    duration: float,
    interval: float = 2.0,
    kinds: tuple[str, ...] | None = None,
) -> list[Fault]:
    """The faults of a run, a pure function of its arguments (see the module docstring)."""
    rng = random.Random(f"tenure-chaos:{seed}")
    allowed = {
        kind: weight
        for kind, weight in KINDS.items()
        if (kind in kinds if kinds is not None else kind not in OPT_IN)
        and (store != "sqlite" or kind not in SERVER_ONLY)
    }
    names = sorted(allowed)
    weights = [allowed[name] for name in names]
    faults: list[Fault] = []
    t = interval * rng.uniform(0.25, 0.75)
    while t < duration and names:
        kind = rng.choices(names, weights)[0]
        target = rng.randint(1, workers) if kind in WORKER_KINDS else None
        faults.append(Fault(round(t, 3), kind, target, _params(rng, kind, ttl)))
        t += interval * rng.uniform(0.5, 1.5)
    return faults


def _params(rng: random.Random, kind: str, ttl: float) -> dict[str, float]:
    def r(x: float) -> float:
        return round(x, 3)

    if kind.startswith("pause"):
        return {
            "duration": r(rng.uniform(1.0, 3.0) * ttl),
            "window": r(3.0 * ttl),
            "storm": float(rng.random() < 0.5),  # storm the stopped worker's jobs
        }
    if kind == "storm":
        return {"jobs": float(rng.randint(1, 3)), "window": r(rng.uniform(1.0, 2.0) * ttl)}
    if kind == "skew":
        return {
            "offset": r(rng.choice((-1, 1)) * rng.uniform(60.0, 3600.0)),
            "rate": rng.choice(RATES),
            "hold": r(rng.uniform(3.0, 6.0) * ttl),
        }
    if kind == "kill":
        return {"restart_after": r(rng.uniform(0.1, 1.0) * ttl)}
    if kind == "proxy-delay":
        return {"lag": r(rng.uniform(0.5, 1.5) * ttl), "hold": r(rng.uniform(1.0, 2.0) * ttl)}
    if kind == "proxy-drop":
        return {"window": r(rng.uniform(0.1, 0.5) * ttl)}
    if kind == "store-pause":
        return {"duration": r(rng.uniform(1.0, 2.0) * ttl)}
    if kind == "cancel":
        return {
            "jobs": float(rng.randint(1, 3)),
            "requeue_after": r(rng.uniform(0.5, 2.0) * ttl),
            "requeue": float(rng.random() < 2 / 3),
        }
    if kind in STORE_FAULTS:
        # Down this long between the stop and the start, or between the primary's kill and
        # the replica's promotion (either adds its own time): well within the lease, which
        # a renewal made at most a third of a TTL ago still holds. A failover promoted at
        # once was down for about 0.1 s, in which a run could have no call in flight.
        return {"outage": r(rng.uniform(0.1, 0.25) * ttl)}
    return {}


class Target(Protocol):
    """What the nemesis acts on (the harness)."""

    def worker(self, number: int) -> tuple[str, int] | None:
        """The current process of worker ``number``: (name, pid), or None if it is down."""

    def set_control(
        self, name: str, *, clock: dict[str, float] | None, arm: dict[str, Any] | None
    ) -> None: ...

    def hit(self, name: str) -> int | None:
        """The id of the last armed point the process reached."""

    def kill(self, number: int, restart_after: float) -> tuple[str, int] | None:
        """SIGKILL worker ``number`` (restarted later); its (name, pid), None if down."""

    def storm(self, jobs: int, window: float, holder: int | None = None) -> dict[str, Any] | None:
        """Release the storm processes onto ``jobs`` jobs (those held by process
        ``holder`` if given); returns what was done."""

    def proxy_delay(self, lag: float, hold: float) -> bool: ...

    def proxy_drop(self, window: float) -> bool: ...

    def store_pause(self, duration: float) -> dict[str, Any] | None:
        """Start a store pause; returns what was done (it ends by itself)."""

    def store_outage(
        self, outage: float, *, kill: bool, record: Callable[[str, dict[str, Any]], None]
    ) -> bool:
        """Stop the store's server (``kill``: SIGKILL it) and start it again ``outage``
        seconds later, on a thread; ``record("start" | "end", what)`` as it goes. False
        when the previous one is still going on."""

    def failover(self, outage: float, record: Callable[[str, dict[str, Any]], None]) -> bool:
        """kill -9 the store's primary and promote its replica ``outage`` seconds later, on
        a thread;
        ``record("start" | "end", what)`` as it goes. False when there is no replica
        (already promoted) or another store fault is going on."""

    def cancel_jobs(
        self,
        jobs: int,
        requeue_after: float | None,
        record: Callable[[str, dict[str, Any]], None],
    ) -> bool:
        """Cancel up to ``jobs`` jobs of the run (leased first, then ready) and requeue
        them ``requeue_after`` seconds later on a thread (None: they stay cancelled);
        ``record("start" | "end", what)`` as it goes. False when none could be cancelled."""


def is_stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (state T in /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


class Nemesis:
    """Carries out a schedule on a thread: one heap of timed actions, none of them blocking
    for long (store pauses that must wait run on threads of their own). ``clock``: whose
    ``monotonic`` time the schedule follows (the host's; a test's `ManualClock` moves it by
    hand, and the thread looks at it at least every 50 ms of real time)."""

    def __init__(
        self,
        schedule: list[Fault],
        target: Target,
        recorder: Recorder,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._schedule = schedule
        # The schedule's time (``monotonic``): the host's, or a test's `ManualClock`.
        self._clock: Clock = clock or SystemClock()
        self._target = target
        self._rec = recorder
        # (when, tie-break, action, the scheduled fault it injects: its outcome on an error)
        self._heap: list[tuple[float, int, Callable[[], None], Fault | None]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tenure-nemesis", daemon=True)
        self._arm_ids = itertools.count(1)
        self._stopped_pids: dict[int, tuple[str, str]] = {}  # pid -> (proc, fault kind)
        self._clocks: dict[str, dict[str, float]] = {}
        self.start_time = 0.0
        self.injected: dict[str, int] = {}  # kind -> starts, follow-up claim storms included
        # What became of each scheduled fault, by its place in the schedule: "injected", or
        # why not (see `not_injected`). Until the nemesis acts on it: not reached.
        self._outcomes: list[str] = [_NOT_REACHED] * len(schedule)
        self._place = {id(fault): number for number, fault in enumerate(schedule)}
        self.followups = 0  # claim storms started after a pause (not in the schedule)

    # -- running -------------------------------------------------------------------------

    def start(self) -> None:
        self.start_time = self._clock.monotonic()
        # The zero of the schedule in host time: the report draws its time axis from it.
        self._rec.event("nemesis-start", faults=len(self._schedule))
        for fault in self._schedule:
            self._at(self.start_time + fault.at, partial(self._inject, fault), fault)
        self._thread.start()

    def stop(self) -> None:
        """Stop injecting; what is still pending is dropped (`heal` undoes what is on)."""
        self._stopping.set()
        if self._thread.ident is not None:  # started (a stop before `start` has none to join)
            self._thread.join(10)
        with self._lock:
            for number, outcome in enumerate(self._outcomes):
                if outcome == _ARMED:
                    self._outcomes[number] = "armed, but not hit before the faults stopped"
                elif outcome == _NOT_REACHED:
                    self._outcomes[number] = "not reached: the faults stopped first"

    def _outcome(self, fault: Fault, outcome: str) -> None:
        with self._lock:
            self._outcomes[self._place[id(fault)]] = outcome

    def injected_count(self) -> int:
        """Scheduled faults injected so far (follow-up claim storms not counted)."""
        with self._lock:
            return self._outcomes.count(_INJECTED)

    def not_injected(self) -> list[tuple[Fault, str]]:
        """The scheduled faults that were not injected, with the reason."""
        with self._lock:
            outcomes = list(self._outcomes)
        return [
            (fault, outcome)
            for fault, outcome in zip(self._schedule, outcomes, strict=True)
            if outcome != _INJECTED
        ]

    def _at(self, when: float, action: Callable[[], None], fault: Fault | None = None) -> None:
        with self._lock:
            heapq.heappush(self._heap, (when, next(self._seq), action, fault))

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                due = self._heap[0][0] if self._heap else None
            now = self._clock.monotonic()
            if due is None or due > now:
                self._stopping.wait(min(0.05, due - now) if due is not None else 0.05)
                continue
            with self._lock:
                _, _, action, fault = heapq.heappop(self._heap)
            try:
                action()
            except Exception as exc:  # a fault that could not be injected is recorded
                error = f"{type(exc).__name__}: {exc}"[:300]
                self._rec.event("fault-error", error=error)
                if fault is not None:
                    self._outcome(fault, f"failed: {error}")

    def _record(self, kind: str, phase: str, **fields: Any) -> None:
        if phase == "start":  # (store outages record from a thread of their own)
            with self._lock:
                self.injected[kind] = self.injected.get(kind, 0) + 1
        self._rec.event("fault", kind=kind, phase=phase, **fields)

    # -- faults --------------------------------------------------------------------------

    def _inject(self, fault: Fault) -> None:
        kind, p = fault.kind, fault.params
        outcome = _INJECTED
        if kind == "pause":
            outcome = self._pause(fault)
        elif kind.startswith("pause-"):
            outcome = self._arm(fault)
        elif kind == "skew":
            outcome = self._skew(fault)
        elif kind == "kill":
            assert fault.target is not None
            killed = self._target.kill(fault.target, p["restart_after"])
            if killed is not None:
                self._record(kind, "start", target=killed[0], target_pid=killed[1], **p)
            else:
                outcome = _gone(fault)
        elif kind == "storm":
            done = self._target.storm(int(p["jobs"]), p["window"])
            if done is not None:
                self._record(kind, "start", **done, window=p["window"])
                self._at(self._clock.monotonic() + p["window"], lambda: self._record(kind, "end"))
            else:
                outcome = "no storm processes (--storm 0) or no job to storm"
        elif kind == "proxy-delay":
            if self._target.proxy_delay(p["lag"], p["hold"]):
                self._record(kind, "start", **p)
                self._at(self._clock.monotonic() + p["hold"], lambda: self._record(kind, "end"))
            else:
                outcome = _NO_PROXY
        elif kind == "proxy-drop":
            if self._target.proxy_drop(p["window"]):
                self._record(kind, "start", **p)
                self._at(self._clock.monotonic() + p["window"], lambda: self._record(kind, "end"))
            else:
                outcome = _NO_PROXY
        elif kind == "store-pause":
            done = self._target.store_pause(p["duration"])
            if done is not None:
                self._record(kind, "start", **done, **p)
                self._at(self._clock.monotonic() + p["duration"], lambda: self._record(kind, "end"))
            else:
                outcome = "the store could not be paused (nothing held it at that moment)"
        elif kind == "failover":
            outcome = self._failover(fault)
        elif kind in STORE_FAULTS:
            outcome = self._store_outage(fault)
        elif kind == "cancel":
            outcome = self._cancel(fault)
        self._outcome(fault, outcome)

    def _phases(self, fault: Fault) -> Callable[[str, dict[str, Any]], None]:
        """``record(phase, what)`` for a fault the target carries out on a thread of its own:
        each phase recorded with what was done, the start with the scheduled parameters."""

        def record(phase: str, what: dict[str, Any]) -> None:
            self._record(fault.kind, phase, **what, **(fault.params if phase == "start" else {}))

        return record

    def _cancel(self, fault: Fault) -> str:
        p = fault.params
        after = p["requeue_after"] if p["requeue"] else None
        if self._target.cancel_jobs(int(p["jobs"]), after, self._phases(fault)):
            return _INJECTED
        return "no ready or leased job to cancel at that moment"

    def _store_outage(self, fault: Fault) -> str:
        if self._target.store_outage(
            fault.params["outage"], kill=fault.kind == "store-kill", record=self._phases(fault)
        ):
            return _INJECTED
        return "the store was still in the previous store fault (restart, kill, SQLite pause)"

    def _failover(self, fault: Fault) -> str:
        if self._target.failover(fault.params["outage"], self._phases(fault)):
            return _INJECTED
        return (
            "no replica left to promote (the run's one failover already happened), or the "
            "store was in another store fault"
        )

    def _pause(self, fault: Fault) -> str:
        assert fault.target is not None
        found = self._target.worker(fault.target)
        if found is None:
            return _gone(fault)
        name, pid = found
        if not _signal(pid, "SIGSTOP"):
            return _gone(fault)
        self._stopped_pids[pid] = (name, "pause")
        self._record("pause", "start", target=name, target_pid=pid, **fault.params)
        self._at(self._clock.monotonic() + fault.params["duration"], lambda: self._resume(pid))
        self._storm_holder(fault, pid)
        return _INJECTED

    def _resume(self, pid: int) -> None:
        stopped = self._stopped_pids.pop(pid, None)
        if stopped is not None and _signal(pid, "SIGCONT"):
            name, kind = stopped
            self._record(kind, "end", target=name, target_pid=pid)

    def _arm(self, fault: Fault) -> str:
        assert fault.target is not None
        found = self._target.worker(fault.target)
        if found is None:
            return _gone(fault)
        name, pid = found
        point = fault.kind.removeprefix("pause-")
        arm = {"id": next(self._arm_ids), "point": point, "duration": fault.params["duration"]}
        self._target.set_control(name, clock=self._clocks.get(name), arm=arm)
        self._rec.event(
            "fault", kind=fault.kind, phase="armed", target=name, target_pid=pid, arm=arm["id"]
        )
        deadline = self._clock.monotonic() + fault.params["window"]
        self._outcome(fault, _ARMED)  # before the watch, which may decide its outcome at once
        self._watch_arm(fault, name, pid, arm, deadline)
        with self._lock:
            return self._outcomes[self._place[id(fault)]]

    def _watch_arm(
        self, fault: Fault, name: str, pid: int, arm: dict[str, Any], deadline: float
    ) -> None:
        now = self._clock.monotonic()
        if self._target.hit(name) == arm["id"]:
            if not is_stopped(pid):
                if now < deadline + 5.0:  # it is about to stop itself: look again soon
                    self._at(now + 0.01, lambda: self._watch_arm(fault, name, pid, arm, deadline))
                return
            self._stopped_pids[pid] = (name, fault.kind)
            self._record(
                fault.kind, "start", target=name, target_pid=pid, arm=arm["id"], **fault.params
            )
            self._outcome(fault, _INJECTED)
            self._at(now + arm["duration"], lambda: self._resume(pid))
            self._storm_holder(fault, pid)
            return
        if now < deadline:
            self._at(now + 0.02, lambda: self._watch_arm(fault, name, pid, arm, deadline))
            return
        if now < deadline + 0.5:
            if now - deadline < 0.03:  # withdraw the arm, then look once more for a late hit
                self._target.set_control(name, clock=self._clocks.get(name), arm=None)
            self._at(now + 0.05, lambda: self._watch_arm(fault, name, pid, arm, deadline))
            return
        self._rec.event("fault", kind=fault.kind, phase="missed", target=name, arm=arm["id"])
        self._outcome(
            fault,
            f"armed, but {name} did not reach the {arm['point']} point within "
            f"{fault.params['window']:g} s",
        )

    def _storm_holder(self, fault: Fault, pid: int) -> None:
        """A claim storm on the jobs of the worker just stopped, through their expiry."""
        if not fault.params.get("storm"):
            return
        window = fault.params["duration"]
        done = self._target.storm(3, window, holder=pid)
        if done is not None:
            self.followups += 1
            self._record("storm", "start", **done, window=window, after=fault.kind)
            self._at(self._clock.monotonic() + window, lambda: self._record("storm", "end"))

    def _skew(self, fault: Fault) -> str:
        assert fault.target is not None
        found = self._target.worker(fault.target)
        if found is None:
            return _gone(fault)
        name, pid = found
        clock = {"offset": fault.params["offset"], "rate": fault.params["rate"]}
        self._clocks[name] = clock
        self._target.set_control(name, clock=clock, arm=None)
        self._record("skew", "start", target=name, target_pid=pid, **fault.params)

        def restore() -> None:
            if self._clocks.get(name) is clock:
                del self._clocks[name]
                self._target.set_control(name, clock=None, arm=None)
                self._record("skew", "end", target=name, target_pid=pid)

        self._at(self._clock.monotonic() + fault.params["hold"], restore)
        return _INJECTED

    # -- healing -------------------------------------------------------------------------

    def heal(self) -> None:
        """Undo what is still in effect: resume stopped processes, restore clocks."""
        for pid in list(self._stopped_pids):
            self._resume(pid)
        for name in list(self._clocks):
            del self._clocks[name]
            self._target.set_control(name, clock=None, arm=None)
            self._record("skew", "end", target=name)


_INJECTED = "injected"
_ARMED = "armed"
_NOT_REACHED = "not reached"
_NO_PROXY = "no proxy in front of the store (a store without a host)"


def _gone(fault: Fault) -> str:
    return f"target gone: worker {fault.target} was not running (killed, not yet restarted)"


def _signal(pid: int, name: str) -> bool:
    try:
        os.kill(pid, getattr(signal, name))
    except OSError:
        return False
    return True
