"""Store URLs and the drivers behind them.

``connect(url)`` picks a driver by the URL's scheme. Drivers of optional backends are
imported only when used, so ``tenure`` without extras never imports psycopg or redis.
"""

from __future__ import annotations

import importlib
import os
from urllib.parse import urlsplit

from .._clock import Clock
from ..errors import InvalidArgument
from ._driver import Driver
from ._driver_async import AsyncDriver
from .abc import Backend

__all__ = [
    "DEFAULT_URL",
    "no_transaction",
    "open_driver",
    "open_driver_async",
    "refuse_fragment",
    "register_backend",
    "resolve_url",
]

DEFAULT_URL = "sqlite:///tenure.db"
# Every store refuses a fragment rather than ignore it: a '#' in a password or a path that
# was not percent-encoded would otherwise silently cut the URL short.
FRAGMENT_RULE = "must not have a #fragment (write a '#' in a password or path as %23)"


def no_transaction(url: str, operation: str) -> InvalidArgument:
    """The error for a transaction asked of a store that has none to share (Redis, or a
    driver that wraps another one)."""
    scheme = urlsplit(url).scheme or url
    return InvalidArgument(
        "store",
        f"is a {scheme} store, which has no SQL transaction to share: {operation} together "
        "with your writes needs the job and the effect in one SQL database (a SQLite or "
        "PostgreSQL store). Elsewhere, fence the effect (sql_fence/apply_once) and then "
        f"call store.{operation}",
    )


def refuse_fragment(url: str) -> None:
    """`InvalidArgument` for a store URL with a fragment (even an empty one: ``x.db#``)."""
    if urlsplit(url).fragment or url.endswith("#"):
        raise InvalidArgument("url", FRAGMENT_RULE)


# scheme -> (module, the extra that installs its client library)
_BACKENDS: dict[str, tuple[str, str | None]] = {
    "sqlite": ("tenure.stores.sqlite", None),
    "postgresql": ("tenure.stores.postgres", "postgres"),
    "postgres": ("tenure.stores.postgres", "postgres"),
    "redis": ("tenure.stores.redis", "redis"),
    "rediss": ("tenure.stores.redis", "redis"),
}


def register_backend(scheme: str, module: str, extra: str | None = None) -> None:
    """Serve ``scheme://`` URLs with ``module``, a `tenure.stores.abc.Backend`: it exposes
    ``open_sync(url, clock)`` and ``async open_async(url, clock)`` returning the drivers of
    `tenure.stores.abc`, like the built-in backends (imported on first use).

    For stores that wrap another one, such as the chaos harness's history recorder
    (``chaos+sqlite://...``, see `tenure.chaos`). ``extra`` names the pip extra that installs
    the module's client library, for the error message when it is missing."""
    if not scheme or scheme != scheme.lower() or not all(c.isalnum() or c in "+-." for c in scheme):
        raise InvalidArgument("scheme", f"must be a lower-case URL scheme, got {scheme!r}")
    _BACKENDS[scheme] = (module, extra)


def resolve_url(url: str | None) -> str:
    """The URL to use: the argument, else ``TENURE_STORE_URL``, else ``./tenure.db``."""
    if url is None:
        url = os.environ.get("TENURE_STORE_URL") or DEFAULT_URL
    if not isinstance(url, str):
        raise InvalidArgument("url", f"must be a str, not {type(url).__name__}")
    refuse_fragment(url)
    scheme = urlsplit(url).scheme
    if scheme not in _BACKENDS:
        known = ", ".join(f"{s}://" for s in _BACKENDS)
        raise InvalidArgument(
            "url", f"unknown store scheme {scheme + '://' if scheme else url!r} (known: {known})"
        )
    return url


# Modules found to be backends, checked once: `isinstance` against the `Backend` protocol
# inspects the module's members each time (tens of microseconds a store's open).
_CHECKED: set[str] = set()


def _backend(url: str) -> Backend:
    module_name, extra = _BACKENDS[urlsplit(url).scheme]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if extra is None or (exc.name or "").startswith("tenure"):
            raise
        raise ImportError(
            f"the {urlsplit(url).scheme}:// store needs the {exc.name} package: "
            f"pip install 'tenure[{extra}]'"
        ) from exc
    if module_name in _CHECKED:
        return module
    if not isinstance(module, Backend):
        raise TypeError(
            f"{module_name} serves {urlsplit(url).scheme}:// URLs but is not a store backend: "
            "it must define open_sync(url, clock) and async open_async(url, clock) "
            "(see tenure.stores.abc)"
        )
    _CHECKED.add(module_name)
    return module


def open_driver(url: str, clock: Clock | None = None) -> Driver:
    """The driver of the store at ``url`` (its backend's ``open_sync``)."""
    driver: Driver = _backend(url).open_sync(url, clock)
    return driver


async def open_driver_async(url: str, clock: Clock | None = None) -> AsyncDriver:
    """The async driver of the store at ``url`` (its backend's ``open_async``)."""
    driver: AsyncDriver = await _backend(url).open_async(url, clock)
    return driver
