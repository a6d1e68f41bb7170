"""What the nemesis can do *inside* a chaos process: skew its client clock and stop it at a
chosen point (mid-handler, mid-renew, mid-complete).

The nemesis writes the process's control file (``ctl/<proc>.json``, replaced atomically)::

    {"clock": {"offset": 1800.0, "rate": 0.5},
     "arm": {"id": 7, "point": "complete", "duration": 4.2}}

A thread of the process reads it when it changes. The clock takes effect at once (the
monotonic reading stays continuous; only its rate changes). An armed point is consumed by
the first thread that reaches it: it records the hit, writes ``ctl/<proc>.hit`` (the arm's
id) and stops the whole process with SIGSTOP; the nemesis sees the stop and sends SIGCONT
after ``duration`` seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from ._history import Recorder

__all__ = ["POINTS", "TAKEOVERS", "Control", "SkewedClock", "Takeovers", "write_atomically"]

POINTS = ("handler", "renew", "complete")
POLL = 0.05  # seconds between looks at the control file


class SkewedClock:
    """A `tenure.Clock` whose wall time is offset and whose rate can change.

    The worker measures its local deadlines on ``monotonic()``: a slow rate makes it trust
    a lease for longer than the store grants it, which the store's and the destination's
    fences must make harmless ("client clocks must not matter")."""

    def __init__(self, offset: float = 0.0, rate: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._offset = offset
        self._rate = rate
        self._real0 = time.monotonic()
        self._skewed0 = self._real0

    def _mono(self, real: float) -> float:
        return self._skewed0 + (real - self._real0) * self._rate

    def monotonic(self) -> float:
        with self._lock:
            return self._mono(time.monotonic())

    def time(self) -> float:
        with self._lock:
            real = time.monotonic()
            return time.time() + self._offset + (self._mono(real) - real)

    def set(self, offset: float, rate: float) -> None:
        with self._lock:
            real = time.monotonic()
            self._skewed0 = self._mono(real)
            self._real0 = real
            self._offset = offset
            self._rate = rate

    @property
    def setting(self) -> tuple[float, float]:
        with self._lock:
            return self._offset, self._rate

    def __repr__(self) -> str:
        return f"SkewedClock(offset={self._offset!r}, rate={self._rate!r})"


class Control:
    """The nemesis's handle inside one process (see the module docstring)."""

    def __init__(self, directory: Path, proc: str, recorder: Recorder) -> None:
        self.clock = SkewedClock()
        self._path = directory / f"{proc}.json"
        self._hit_path = directory / f"{proc}.hit"
        self._recorder = recorder
        self._lock = threading.Lock()
        self._arm: dict[str, Any] | None = None
        self._consumed: set[int] = set()
        self._stamp: int | None = None
        self._stopped = threading.Event()
        self.read()
        self._thread = threading.Thread(
            target=self._watch, name="tenure-chaos-control", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(POLL):
            self.read()

    def read(self) -> None:
        try:
            stamp = self._path.stat().st_mtime_ns
        except OSError:
            return
        if stamp == self._stamp:
            return
        try:
            data = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # being replaced: read it next time
        self._stamp = stamp
        clock = data.get("clock") or {}
        offset, rate = float(clock.get("offset", 0.0)), float(clock.get("rate", 1.0))
        if (offset, rate) != self.clock.setting:
            self.clock.set(offset, rate)
            self._recorder.event("skew-applied", offset=offset, rate=rate)
        arm = data.get("arm")
        with self._lock:
            if arm and arm.get("id") not in self._consumed:
                self._arm = arm
            else:
                self._arm = None

    def reach(self, point: str, **info: Any) -> None:
        """A thread reached ``point``: stop the process here if the nemesis armed it."""
        with self._lock:
            arm = self._arm
            if arm is None or arm.get("point") != point:
                return
            self._arm = None
            self._consumed.add(int(arm["id"]))
        self._recorder.event(
            "fault",
            kind=f"pause-{point}",
            phase="hit",
            arm=arm["id"],
            duration=arm.get("duration"),
            **info,
        )
        with contextlib.suppress(OSError):
            write_atomically(self._hit_path, str(arm["id"]))
        # To this thread (tgkill): it stops before going on, then the whole process does.
        # (kill(getpid()) may hand the signal to another thread while this one runs on.)
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        self._recorder.event("fault", kind=f"pause-{point}", phase="resumed", arm=arm["id"], **info)


class Takeovers:
    """Unsafe ``client-clock`` mode: leases a worker took over without a claim, mapped to
    the credentials of the holder it acts for (shared by the worker's two stores)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._map: dict[tuple[str, int, str, str], tuple[str, str]] = {}

    def add(
        self,
        job_id: str,
        generation: int,
        owner: str,
        secret_hash: str,
        real_owner: str,
        real_hash: str,
    ) -> None:
        with self._lock:
            self._map[(job_id, generation, owner, secret_hash)] = (real_owner, real_hash)

    def taken(self, job_id: str, generation: int, owner: str) -> bool:
        with self._lock:
            return any(k[:3] == (job_id, generation, owner) for k in self._map)

    def credentials(
        self, job_id: str, generation: int, owner: str, secret_hash: str
    ) -> tuple[str, str]:
        with self._lock:
            return self._map.get((job_id, generation, owner, secret_hash), (owner, secret_hash))


TAKEOVERS = Takeovers()


def write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: a temporary file of this process and thread
    alone, then a rename. (A worker's ``w1.hit`` and the harness's ``w1.json`` once shared
    the temporary ``w1.tmp``, and one's rename took the other's file away.)"""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
