"""The SQLite store's URL: ``sqlite:///path.db`` and its query options."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ...errors import InvalidArgument
from .. import refuse_fragment, split_url, url_number, url_query

__all__ = ["parse_sqlite_url"]

_SYNCHRONOUS = ("full", "normal", "extra")


def parse_sqlite_url(url: str) -> dict[str, Any]:
    """``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:``;
    query options ``timeout`` (seconds to wait for the write lock, default 30) and
    ``synchronous`` (``full``, the default, or ``normal``/``extra``)."""
    parts = split_url(url)
    if parts.scheme != "sqlite":
        raise InvalidArgument("url", f"must start with sqlite://, got {url!r}")
    refuse_fragment(url)
    if parts.netloc:
        raise InvalidArgument(
            "url", "a sqlite URL has no host: use sqlite:///relative.db or sqlite:////abs.db"
        )
    options: dict[str, Any] = {"path": _path(parts.path)}
    for key, value in url_query(parts):  # a repeated option: the last one counts
        if key == "timeout":
            options["busy_timeout"] = url_number("timeout (seconds)", value, 0, 3600)
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


def _path(text: str) -> str:
    """The database file a sqlite URL's path names, %-escapes decoded: they must spell
    UTF-8 text (not be replaced by U+FFFD), and no NUL, which no file name holds."""
    try:
        path = unquote(text[1:] if text.startswith("/") else text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument("url", "the path's %-escapes must spell UTF-8 text") from None
    if not path:
        raise InvalidArgument("url", "must name a database file, e.g. sqlite:///tenure.db")
    if "\x00" in path:
        raise InvalidArgument("url", "the path must not contain NUL (%00): no file name holds it")
    return path
