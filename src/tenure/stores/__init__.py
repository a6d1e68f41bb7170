"""Store URLs and the drivers behind them.

``connect(url)`` picks a driver by the URL's scheme. Drivers of optional backends are
imported only when used, so ``tenure`` without extras never imports psycopg or redis.
"""

from __future__ import annotations

import importlib
import os
import re
import unicodedata
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

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
    "split_url",
    "url_host",
    "url_number",
    "url_query",
]

DEFAULT_URL = "sqlite:///tenure.db"
# Every store refuses a fragment rather than ignore it: a '#' in a password or a path that
# was not percent-encoded would otherwise silently cut the URL short.
FRAGMENT_RULE = "must not have a #fragment (write a '#' in a password or path as %23)"


def no_transaction(url: str, operation: str) -> InvalidArgument:
    """The error for a transaction asked of a store that has none to share (Redis, or a
    driver that wraps another one)."""
    scheme = url.partition("://")[0] or url
    return InvalidArgument(
        "store",
        f"is a {scheme} store, which has no SQL transaction to share: {operation} together "
        "with your writes needs the job and the effect in one SQL database (a SQLite or "
        "PostgreSQL store). Elsewhere, fence the effect (sql_fence/apply_once) and then "
        f"call store.{operation}",
    )


def refuse_fragment(url: str) -> None:
    """`InvalidArgument` for a store URL with a fragment (even an empty one: ``x.db#``)."""
    if split_url(url).fragment or url.endswith("#"):
        raise InvalidArgument("url", FRAGMENT_RULE)


def split_url(url: str) -> SplitResult:
    """``urlsplit(url)``, refusing with `InvalidArgument` (``url``) what it cannot split (a
    ``[`` without its ``]``) and what it would change silently or no store could use: a
    control character (urlsplit drops a tab or newline), a lone surrogate."""
    if not (url.isascii() and url.isprintable()):
        for position, char in enumerate(url):
            category = unicodedata.category(char)
            if category == "Cc":
                raise InvalidArgument(
                    "url", f"must not contain control characters ({char!r} at {position})"
                )
            if category == "Cs":
                raise InvalidArgument(
                    "url", f"must be valid Unicode text (lone surrogate at {position})"
                )
    try:
        return urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": a '[' without its ']', or the reverse
        hosts = _host_list(url)
        if hosts is None:
            raise InvalidArgument("url", f"is not a valid URL: {exc}") from None
        # Some Pythons (Debian's 3.11.2) refuse a bracketed IPv6 host that is not the first
        # of a host list ("h1,[::1]:5433"), which libpq takes: split the rest without it.
        netloc, rest = hosts
        return urlsplit(f"{url.partition('://')[0]}://host{rest}")._replace(netloc=netloc)


def _host_list(url: str) -> tuple[str, str] | None:
    """A URL's authority and what follows it, if the authority is a list of hosts whose
    brackets pair up (else None)."""
    _scheme, sep, rest = url.partition("://")
    ends = [at for at in (rest.find("/"), rest.find("?"), rest.find("#")) if at >= 0]
    netloc = rest[: min(ends, default=len(rest))]
    if not sep or "," not in netloc or netloc.count("[") != netloc.count("]"):
        return None
    return netloc, rest[len(netloc) :]


def url_query(parts: SplitResult) -> list[tuple[str, str]]:
    """The query of a split URL as (name, value) pairs, in order; `InvalidArgument` for
    %-escapes that do not spell UTF-8 text (rather than turn them into U+FFFD)."""
    try:
        return parse_qsl(parts.query, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument("url", "the query's %-escapes must spell UTF-8 text") from None


_INT = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def url_host(host: str) -> None:
    """Refuse a host name no resolver could look up (an empty label, as in ``...`` or
    ``a..b``, or a label over 63 characters), which the connection would otherwise meet
    as a bare ``UnicodeError`` from the IDNA codec. An IP address passes, as does what is
    not a name at all (empty, a bracketed IPv6 literal, a percent-encoded socket path)."""
    if not host or host.startswith("[") or unquote(host).startswith("/"):
        return
    try:
        host.encode("idna")
    except UnicodeError as exc:
        reason = str(exc).rpartition("UnicodeError: ")[2].rstrip(")") or str(exc)
        raise InvalidArgument(
            "url", f"the host {host[:100]!r} is not a valid host name: {reason}"
        ) from None


def url_number(name: str, text: str, low: float, high: float, kind: type[Any] = float) -> Any:
    """The number a URL writes for ``name`` (a query option, the port...), from ``low`` to
    ``high``: ASCII digits only (``int(text)`` and ``float(text)`` also take other scripts'
    digits, spaces and ``_``), with a decimal point and exponent for a ``float``."""
    what = "an int" if kind is int else "a number"
    if (_INT if kind is int else _DECIMAL).fullmatch(text) is None:
        raise InvalidArgument("url", f"{name} must be {what} in ASCII digits, got {text!r}")
    bounds = f"{low:g} to {high:g}" if kind is float else f"{low} to {high}"
    try:
        value = kind(text)
    except ValueError:  # an int of more digits than int() takes
        raise InvalidArgument(
            "url", f"{name} must be from {bounds}, got {text[:20]!r}..."
        ) from None
    if not low <= value <= high:
        raise InvalidArgument("url", f"{name} must be from {bounds}, got {text!r}")
    return value


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
    if not isinstance(scheme, str) or _SCHEME.fullmatch(scheme) is None:
        raise InvalidArgument(
            "scheme",
            f"must be a lower-case URL scheme (a str, e.g. 'chaos+sqlite'), got {scheme!r}",
        )
    if not isinstance(module, str) or _MODULE.fullmatch(module) is None:
        raise InvalidArgument(
            "module", f"must name a module (a str, e.g. 'mypackage.store'), got {module!r}"
        )
    if extra is not None and not (isinstance(extra, str) and extra and extra.isprintable()):
        raise InvalidArgument(
            "extra", f"must be None or the name of a pip extra (a str), got {extra!r}"
        )
    _BACKENDS[scheme] = (module, extra)


# What register_backend takes: a scheme as RFC 3986 writes one (lower-case), a module name.
_SCHEME = re.compile(r"[a-z][a-z0-9+.\-]*")
_MODULE = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")


def resolve_url(url: str | None) -> str:
    """The URL to use: the argument, else ``TENURE_STORE_URL``, else ``./tenure.db``."""
    if url is None:
        url = os.environ.get("TENURE_STORE_URL") or DEFAULT_URL
    if not isinstance(url, str):
        raise InvalidArgument("url", f"must be a str, not {type(url).__name__}")
    refuse_fragment(url)
    module_name = _served(url)[1]
    parser = _PARSERS.get(module_name)
    if parser is not None:
        # The whole URL is checked here, before anything is opened (`tenure.Worker` checks
        # its url= this way when it is made, long before it connects).
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("tenure"):
                raise
            return url  # a missing extra: opening the store says which one to install
        getattr(module, parser)(url)
    return url


# The URL parser of each built-in backend, which resolve_url calls. A backend registered
# for another scheme (such as the chaos recorder) checks its URLs when it opens them.
_PARSERS = {
    "tenure.stores.sqlite": "parse_sqlite_url",
    "tenure.stores.postgres": "parse_postgres_url",
    "tenure.stores.redis": "parse_redis_url",
}


def _served(url: str) -> tuple[str, str, str | None]:
    """``url``'s scheme, the module serving it and the extra that installs that module's
    client library; `InvalidArgument` for an unknown scheme."""
    scheme = split_url(url).scheme
    if scheme not in _BACKENDS:
        known = ", ".join(f"{s}://" for s in _BACKENDS)
        raise InvalidArgument(
            "url", f"unknown store scheme {scheme + '://' if scheme else url!r} (known: {known})"
        )
    return (scheme, *_BACKENDS[scheme])


# Modules found to be backends, checked once: `isinstance` against the `Backend` protocol
# inspects the module's members each time (tens of microseconds a store's open).
_CHECKED: set[str] = set()


def _backend(url: str) -> Backend:
    scheme, module_name, extra = _served(url)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if extra is None or (exc.name or "").startswith("tenure"):
            raise
        raise ImportError(
            f"the {scheme}:// store needs the {exc.name} package: pip install 'tenure[{extra}]'"
        ) from exc
    if module_name in _CHECKED:
        return module
    if not isinstance(module, Backend):
        raise TypeError(
            f"{module_name} serves {scheme}:// URLs but is not a store backend: "
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
