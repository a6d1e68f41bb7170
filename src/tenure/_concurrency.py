"""The few primitives whose sync and async forms differ, in pairs named by the rule of
``tools/async_to_sync.py``: the sync twin drops "async". Async source calls
``await pause_async(s)``; its generated sync twin calls ``pause(s)``."""

from __future__ import annotations

import atexit
import contextlib
import select
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    nullcontext,
)
from typing import Any

import anyio

if sys.version_info >= (3, 11):
    from asyncio import timeout as _asyncio_bound
else:  # Python 3.10: the same bound through anyio, a little dearer

    @asynccontextmanager
    async def _asyncio_bound(seconds: float) -> AsyncIterator[None]:
        with anyio.fail_after(seconds):
            yield


__all__ = [
    "close_at_exit",
    "close_at_exit_async",
    "looks_closed",
    "looks_closed_async",
    "pause",
    "pause_async",
    "request_bound",
    "request_bound_async",
    "socket_timeout",
    "socket_timeout_async",
    "thread_lock",
    "thread_lock_async",
    "uncancellable",
    "uncancellable_async",
]


async def pause_async(seconds: float) -> None:
    await anyio.sleep(seconds)


def pause(seconds: float) -> None:
    time.sleep(seconds)


def request_bound_async(seconds: float | None) -> AbstractAsyncContextManager[Any]:
    """At most ``seconds`` (None: no bound) for one request and its answer on an asyncio
    connection; past it, ``TimeoutError``. One bound around both, where redis-py's own
    socket timeout makes a task of each send (``asyncio.wait_for``) and a second bound of
    each read: about 4 us of a batch call's 32 on Redis (docs/benchmarks.md). Connections
    used under it are opened without a socket timeout (`socket_timeout_async`)."""
    return nullcontext() if seconds is None else _asyncio_bound(seconds)


def request_bound(seconds: float | None) -> AbstractContextManager[Any]:
    """Sync sockets carry their own timeout (`socket_timeout`): nothing to add."""
    return nullcontext()


def socket_timeout_async(seconds: float | None) -> float | None:
    """The socket timeout of an asyncio connection's pool: none, as each request is bounded
    as a whole (`request_bound_async`)."""
    return None


def socket_timeout(seconds: float | None) -> float | None:
    """The socket timeout of a sync connection's pool: the bound of each request."""
    return seconds


def uncancellable_async() -> anyio.CancelScope:
    """Shield cleanup (disconnect, return to the pool) from cancellation."""
    return anyio.CancelScope(shield=True)


def uncancellable() -> AbstractContextManager[None]:
    """Sync code has no cancellation to shield from."""
    return nullcontext()


def thread_lock_async() -> AbstractContextManager[Any]:
    """A lock for counters shared by a driver's callers: none in async code, where a section
    with no ``await`` in it runs alone on its event loop."""
    return nullcontext()


def thread_lock() -> AbstractContextManager[Any]:
    """The sync twin runs in threads: a real lock."""
    return threading.Lock()


# A connection a driver kept since its last request is checked with these before it is
# used again, without a system call for asyncio and with one poll() for sockets. Either
# answers False when the client library's internals are not as expected: the request then
# goes out, and a connection that was in fact closed fails it as "outcome unknown".


def looks_closed_async(conn: Any) -> bool:
    """An asyncio connection whose server closed it (its reader has seen EOF)."""
    reader = getattr(conn, "_reader", None)
    at_eof = getattr(reader, "at_eof", None)
    return bool(at_eof()) if at_eof is not None else False


def looks_closed(conn: Any) -> bool:
    """A socket connection with something to read while idle: EOF (the server closed it),
    an error, or bytes nobody asked for. Not safe to send a request on."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


# Resources of sync drivers still open when the interpreter exits, closed then (see
# `close_at_exit`). Weak: one closed and dropped before then leaves.
_open_at_exit: weakref.WeakSet[Any] = weakref.WeakSet()


def close_at_exit_async(resource: Any) -> None:
    """An asyncio resource needs nothing at interpreter exit: it has no threads to stop,
    and its event loop is gone by then."""


def close_at_exit(resource: Any) -> None:
    """Close ``resource`` (its ``close()``) at interpreter exit if it is still open then.

    A psycopg_pool `ConnectionPool` left open (a script that never closes its store) is
    otherwise closed by its ``__del__`` during the interpreter's finalization, where on
    Python 3.13 its threads can no longer run: it waits 5 s for each of its four threads
    and prints a warning for each (psycopg issues #930, #954). At ``atexit`` time they
    still run, and closing takes a few milliseconds."""
    _open_at_exit.add(resource)


@atexit.register
def _close_left_open() -> None:
    for resource in list(_open_at_exit):
        # The program is exiting: its own exit status and output count, not this close.
        with contextlib.suppress(Exception):
            resource.close()
