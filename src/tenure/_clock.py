"""Clocks and the client side of lease time (pure).

Two clocks matter and they are never compared with each other:

* the *store's* clock decides ownership: expiry is evaluated inside the store operation;
* the *client's monotonic* clock decides when a holder must stop trusting its lease: the
  local deadline is measured from the moment the claim or renew request was *sent*, so
  network delay and client clock skew can only make the client give up early, never late.

The local deadline is ``sent_at + ttl * (1 - max_drift) - safety_margin`` (Gray & Cheriton,
"Leases", 1989): ``max_drift`` bounds how much faster the store's clock may run than ours,
``safety_margin`` covers the time between deciding to act and the effect landing.

A clock may also offer ``boot() -> (boot id, seconds) | None``: the host's boot clock, which
every process of one boot shares and no wall-clock step moves. It is optional (not part of
`Clock`, so a user's clock without it keeps working); the SQLite store derives its time from
it where it is there (`boot_clock`).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, cast, runtime_checkable

from .errors import InvalidArgument

__all__ = [
    "BootReading",
    "Clock",
    "LeaseTiming",
    "ManualClock",
    "MAX_STORE_TIME",
    "SystemClock",
    "boot_clock",
    "checked_store_time",
]

# (boot id, seconds on that boot's clock): two readings with the same id are on one clock.
BootReading = tuple[str, float]

# The readings a store clock (`tenure.connect`'s ``store_clock``) may give: seconds since
# the epoch from 0 to this, what the Redis store's scripts take (lua/_lib.lua's store_now).
MAX_STORE_TIME = 1e12

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_TIME_NAMESPACE = "/proc/self/timens_offsets"


@runtime_checkable
class Clock(Protocol):
    """A source of wall time (seconds since the epoch) and monotonic time (seconds)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


def boot_clock(clock: Clock) -> Callable[[], BootReading | None] | None:
    """``clock.boot`` when the clock has one, else None (wall time is all it offers)."""
    boot = getattr(clock, "boot", None)
    return cast("Callable[[], BootReading | None]", boot) if callable(boot) else None


@cache
def _host_boot() -> tuple[str, float] | None:
    """(this boot's id, the offset of our boot clock from the host's), read once per
    process; None without a boot id or ``CLOCK_BOOTTIME`` (anything but Linux)."""
    if not hasattr(time, "CLOCK_BOOTTIME"):
        return None
    try:
        with open(_BOOT_ID, encoding="ascii") as file:
            boot_id = file.read().strip()
    except (OSError, ValueError):
        return None
    if not boot_id:
        return None
    # A Linux time namespace (`unshare --time`, a container restored by CRIU) may shift
    # CLOCK_BOOTTIME for the processes inside it: take the shift off, so that every
    # process of the host reads the host's one boot clock.
    offset = 0.0
    try:
        with open(_TIME_NAMESPACE, encoding="ascii") as file:
            for line in file:
                fields = line.split()
                if len(fields) == 3 and fields[0] == "boottime":
                    offset = int(fields[1]) + int(fields[2]) / 1e9
    except (OSError, ValueError):
        pass  # a kernel without time namespaces: nothing is shifted
    return boot_id, offset


_system_time, _system_monotonic = time.time, time.monotonic


class SystemClock:
    """The host's clocks: ``time.time()``, ``time.monotonic()`` and, on Linux, the boot
    clock (`boot`)."""

    # The functions themselves, not methods that call them: the worker reads the monotonic
    # clock several times a job, and a Python frame around each read cost more than it.
    time = staticmethod(_system_time)
    monotonic = staticmethod(_system_monotonic)

    def boot(self) -> BootReading | None:
        """(boot id, seconds on ``CLOCK_BOOTTIME``), or None where the platform has no boot
        id or boot clock (macOS, Windows).

        ``CLOCK_BOOTTIME`` is shared by every process of one boot, is never stepped (NTP
        only adjusts its rate) and, unlike ``CLOCK_MONOTONIC``, keeps counting while the
        host is suspended, so it measures the real time that passed.
        """
        host = _host_boot()
        if host is None:
            return None
        boot_id, offset = host
        return boot_id, time.clock_gettime(time.CLOCK_BOOTTIME) - offset

    def __repr__(self) -> str:
        return "SystemClock()"


def _finite(argument: str, value: object) -> float:
    """A `ManualClock` time or step: a finite number (a NaN time would be stored by a
    store that takes this clock as its own, and a lease ending at NaN never expires)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(argument, f"must be a number, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidArgument(argument, f"must be a finite number, got {str(value)[:40]}")
    return number


def checked_store_time(reading: Any) -> float:
    """A store clock's reading, if it is a number of seconds from 0 to `MAX_STORE_TIME`;
    else `InvalidArgument` (``store_clock``), before the store call is sent, since the
    store would write it (a lease ending at NaN or at infinity never expires). One
    comparison (False for NaN too) on the stores' path; only a clock other than the
    system's is read through it."""
    try:
        if 0.0 <= reading <= MAX_STORE_TIME:
            return float(reading)
    except TypeError:  # not a number at all
        pass
    raise InvalidArgument(
        "store_clock",
        f"must return a finite number of seconds from 0 to {MAX_STORE_TIME:g}, "
        f"got {str(reading)[:40]}",
    )


class ManualClock:
    """A clock that moves only when told to; for tests and simulations.

    It models the clocks of one host, which all its processes share: wall time, monotonic
    time and the boot clock (`boot`), which starts equal to monotonic time. ``advance``
    moves all three forward; ``jump`` steps wall time alone (forwards or backwards), the way
    an NTP step or an operator's ``date -s`` does; ``suspend`` is the host sleeping (wall
    and boot clock go on, monotonic time does not); ``reboot`` starts a new boot.

    Each clock is its own boot (a fresh boot id) unless ``boot_id`` is given.
    """

    def __init__(
        self,
        start: float = 1_700_000_000.0,
        *,
        monotonic_start: float = 1000.0,
        boot_id: str | None = None,
    ):
        self._lock = threading.Lock()
        self._wall = _finite("start", start)
        self._mono = _finite("monotonic_start", monotonic_start)
        self._boot = self._mono
        self._boot_id = uuid.uuid4().hex if boot_id is None else boot_id

    def time(self) -> float:
        with self._lock:
            return self._wall

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def boot(self) -> BootReading:
        with self._lock:
            return self._boot_id, self._boot

    def advance(self, seconds: float) -> None:
        if _finite("seconds", seconds) < 0:
            raise InvalidArgument("seconds", "must be >= 0; use jump() to step wall time back")
        with self._lock:
            self._wall += seconds
            self._mono += seconds
            self._boot += seconds

    def jump(self, seconds: float) -> None:
        seconds = _finite("seconds", seconds)
        with self._lock:
            self._wall += seconds

    def suspend(self, seconds: float) -> None:
        """The host sleeps for ``seconds``: wall time and the boot clock move on, monotonic
        time (``CLOCK_MONOTONIC``, which a process's local lease deadlines use) does not."""
        if _finite("seconds", seconds) < 0:
            raise InvalidArgument("seconds", "must be >= 0")
        with self._lock:
            self._wall += seconds
            self._boot += seconds

    def reboot(self, *, boot_id: str | None = None) -> None:
        """A new boot (a fresh boot id unless given): the boot and monotonic clocks start
        again from zero; wall time stays where it is."""
        with self._lock:
            self._boot_id = uuid.uuid4().hex if boot_id is None else boot_id
            self._mono = self._boot = 0.0

    def __repr__(self) -> str:
        return f"ManualClock(time={self._wall!r}, monotonic={self._mono!r})"


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """How a client turns a TTL into a local deadline.

    ``max_drift`` is the fraction by which the store's clock may outrun the client's
    (0.01 = 1 %); ``safety_margin`` is subtracted on top, capped at a tenth of the TTL so
    that short leases stay usable.
    """

    max_drift: float = 0.01
    safety_margin: float = 0.05

    def __post_init__(self) -> None:
        for name, value in (("max_drift", self.max_drift), ("safety_margin", self.safety_margin)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidArgument(name, f"must be a number, not {type(value).__name__}")
        if not 0.0 <= self.max_drift < 0.5:
            raise InvalidArgument(
                "max_drift", "must be a fraction from 0 up to (not including) 0.5"
            )
        if not 0.0 <= self.safety_margin <= 60.0:
            raise InvalidArgument("safety_margin", "must be from 0 to 60 seconds")

    def local_deadline(self, sent_at: float, ttl: float) -> float:
        """Monotonic time after which a holder must assume its lease is gone."""
        margin = min(self.safety_margin, ttl * 0.1)
        return sent_at + max(0.0, ttl * (1.0 - self.max_drift) - margin)
