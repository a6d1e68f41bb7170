"""The TCP proxy of the store tests: the chaos harness's own (tenure.chaos._proxy), in
front of the test server, to lose the reply to a request the server executed.

PostgreSQL's replies are read as protocol messages (`postgres_reply`); the URL must then
say sslmode=disable (and gssencmode=disable) so that the stream is plain messages."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from tenure.chaos._proxy import Proxy, ReplyRule, lose_first_bytes

__all__ = ["Proxy", "postgres_reply", "proxy_for"]


@contextmanager
def proxy_for(
    url: str, default_port: int, reply: ReplyRule = lose_first_bytes
) -> Iterator[tuple[Proxy, str]]:
    """A proxy in front of the server of ``url``, and ``url`` through it."""
    parts = urlsplit(url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or default_port, reply=reply)
    try:
        through = proxy.through(url)
        assert through is not None, url
        yield proxy, through
    finally:
        proxy.close()


def postgres_reply(held: bytes) -> tuple[int, bool] | None:
    """A reply ends with the server's ReadyForQuery (after COMMIT); it is lost if a
    statement ran (a CommandComplete or an error in it). The reply to a statement's
    PREPARE alone (ParseComplete: tenure prepares at first use) passes: the statement
    itself has not run yet."""
    end = 0
    ran = False
    while len(held) - end >= 5:
        kind = held[end : end + 1]
        (length,) = struct.unpack("!I", held[end + 1 : end + 5])
        if len(held) < end + 1 + length:
            return None
        end += 1 + length
        ran = ran or kind in (b"C", b"E")
        if kind == b"Z":
            return end, ran
    return None
