"""Clocks and the client side of lease time (pure).

Two clocks matter and they are never compared with each other:

* the *store's* clock decides ownership: expiry is evaluated inside the store operation;
* the *client's monotonic* clock decides when a holder must stop trusting its lease: the
  local deadline is measured from the moment the claim or renew request was *sent*, so
  network delay and client clock skew can only make the client give up early, never late.

The local deadline is ``sent_at + ttl * (1 - max_drift) - safety_margin`` (Gray & Cheriton,
"Leases", 1989): ``max_drift`` bounds how much faster the store's clock may run than ours,
``safety_margin`` covers the time between deciding to act and the effect landing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import InvalidArgument

__all__ = ["Clock", "LeaseTiming", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of wall time (seconds since the epoch) and monotonic time (seconds)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The host's clocks: ``time.time()`` and ``time.monotonic()``."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to; for tests and simulations.

    ``advance`` moves both clocks forward; ``jump`` steps wall time alone (forwards or
    backwards), the way an NTP step or an operator's ``date -s`` does, while monotonic time
    keeps going as it does on a real host.
    """

    def __init__(self, start: float = 1_700_000_000.0, *, monotonic_start: float = 1000.0):
        self._lock = threading.Lock()
        self._wall = float(start)
        self._mono = float(monotonic_start)

    def time(self) -> float:
        with self._lock:
            return self._wall

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise InvalidArgument("seconds", "must be >= 0; use jump() to step wall time back")
        with self._lock:
            self._wall += seconds
            self._mono += seconds

    def jump(self, seconds: float) -> None:
        with self._lock:
            self._wall += seconds

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
