"""The SQLite store's URL: ``sqlite:///path.db`` and its query options."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ...errors import InvalidArgument
from .. import refuse_fragment

__all__ = ["parse_sqlite_url"]

_SYNCHRONOUS = ("full", "normal", "extra")


def parse_sqlite_url(url: str) -> dict[str, Any]:
    """``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:``;
    query options ``timeout`` (seconds to wait for the write lock, default 30) and
    ``synchronous`` (``full``, the default, or ``normal``/``extra``)."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise InvalidArgument("url", f"must start with sqlite://, got {url!r}")
    refuse_fragment(url)
    if parts.netloc:
        raise InvalidArgument(
            "url", "a sqlite URL has no host: use sqlite:///relative.db or sqlite:////abs.db"
        )
    path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    if not path:
        raise InvalidArgument("url", "must name a database file, e.g. sqlite:///tenure.db")
    options: dict[str, Any] = {"path": path}
    for key, values in parse_qs(parts.query, keep_blank_values=True).items():
        value = values[-1]
        if key == "timeout":
            try:
                options["busy_timeout"] = float(value)
            except ValueError:
                raise InvalidArgument(
                    "url", f"timeout must be a number of seconds, got {value!r}"
                ) from None
            if not 0 <= options["busy_timeout"] <= 3600:
                raise InvalidArgument("url", "timeout must be from 0 to 3600 seconds")
        elif key == "synchronous":
            if value.lower() not in _SYNCHRONOUS:
                raise InvalidArgument(
                    "url", f"synchronous must be one of {', '.join(_SYNCHRONOUS)}"
                )
            options["synchronous"] = value.lower()
        else:
            raise InvalidArgument(
                "url", f"unknown sqlite option {key!r} (known: timeout, synchronous)"
            )
    return options
