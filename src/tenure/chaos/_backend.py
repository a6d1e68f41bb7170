"""``chaos+<url>`` stores: the wrapped store of a chaos process, with its history recorder.

A chaos process calls `install` once (its recorder, its control, the unsafe mode if any)
and then opens ``chaos+sqlite:///...``, ``chaos+postgresql://...`` or ``chaos+redis://...``
like any store URL: `tenure.Worker` and `tenure.connect` need no other hook. The driver of
the real URL is wrapped by the unsafe driver (only with ``--unsafe``) and then by the
recorder, so the history holds exactly what the worker saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._clock import Clock
from ..stores import open_driver, open_driver_async, register_backend
from ..stores.abc import AsyncDriver, Driver
from ._control import Control, SkewedClock
from ._drivers import RecordingDriver, UnsafeDriver
from ._drivers_async import AsyncRecordingDriver, AsyncUnsafeDriver
from ._history import Recorder

__all__ = [
    "PREFIX",
    "UNSAFE_MODES",
    "chaos_url",
    "install",
    "named_url",
    "open_async",
    "open_sync",
    "with_query",
]

PREFIX = "chaos+"
SCHEMES = ("sqlite", "postgresql", "postgres", "redis", "rediss")
UNSAFE_MODES = ("client-clock", "no-fence")


@dataclass(frozen=True)
class _Setup:
    recorder: Recorder
    control: Control | None
    unsafe: str | None


_setup: list[_Setup] = []


def register() -> None:
    """Make ``chaos+<scheme>://`` URLs known (idempotent)."""
    for scheme in SCHEMES:
        register_backend(PREFIX + scheme, __name__)


def install(recorder: Recorder, control: Control | None = None, unsafe: str | None = None) -> None:
    """Record this process's store calls in ``recorder`` (see the module docstring)."""
    if unsafe is not None and unsafe not in UNSAFE_MODES:
        raise ValueError(f"unknown unsafe mode {unsafe!r}")
    register()
    _setup[:] = [_Setup(recorder, control, unsafe)]


def chaos_url(url: str) -> str:
    return url if url.startswith(PREFIX) else PREFIX + url


def with_query(url: str, **params: str) -> str:
    """``url`` with query parameters set (replacing any of the same names)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    return urlunsplit(parts._replace(query=urlencode([*query, *params.items()])))


def named_url(url: str, name: str) -> str:
    """A PostgreSQL URL whose connections carry ``application_name=tenure-chaos-<name>``
    (so the nemesis can find their backends); other URLs unchanged."""
    if urlsplit(url).scheme in ("postgresql", "postgres"):
        return with_query(url, application_name=f"tenure-chaos-{name}")
    return url


def _current() -> _Setup:
    if not _setup:
        raise RuntimeError("tenure.chaos: install() a recorder before opening chaos+ URLs")
    return _setup[0]


def _clock(setup: _Setup) -> Clock:
    return setup.control.clock if setup.control is not None else SkewedClock()


def open_sync(url: str, clock: Clock | None) -> Driver:
    setup = _current()
    driver: Driver = open_driver(url.removeprefix(PREFIX), clock)
    if setup.unsafe is not None:
        driver = UnsafeDriver(driver, setup.unsafe, _clock(setup))
    return RecordingDriver(driver, setup.recorder, setup.control)


async def open_async(url: str, clock: Clock | None) -> AsyncDriver:
    setup = _current()
    driver: AsyncDriver = await open_driver_async(url.removeprefix(PREFIX), clock)
    if setup.unsafe is not None:
        driver = AsyncUnsafeDriver(driver, setup.unsafe, _clock(setup))
    return AsyncRecordingDriver(driver, setup.recorder, setup.control)
