"""An ASGI middleware that fences HTTP requests (Starlette, FastAPI, any ASGI app).

::

    from starlette.applications import Starlette
    from tenure.fence.asgi import FenceMiddleware, SQLiteFenceStore

    app = Starlette(routes=...)
    app.add_middleware(FenceMiddleware, store=SQLiteFenceStore("fence.db"), keyring=keyring)
    # FastAPI: the same add_middleware call. Or wrap any ASGI app: FenceMiddleware(app, ...)

For each HTTP request that carries a fencing token (`tenure.fence._headers`): verify its
signature when a keyring is configured (before anything else: a forged token changes
nothing), then advance the job's fence in the store; a token older than the newest accepted
for the job is answered ``409 Conflict`` with an ``application/problem+json`` body naming the
job, the presented and the current generation, and the app is not called. An accepted
token is handed to the app as ``request.state.tenure_token`` (``scope["state"]``).

Requests without a token pass through, except unsafe methods (POST, PUT, PATCH, DELETE)
when ``require=True`` (the default), which are answered ``428``.

Ordering: with ``serialize=True`` (the default) requests of one job are handled one at a
time in this process, from the fence check to the end of the response, so an effect the
app applies can never land after a newer generation's. Across several processes that share
one store, fence the app's own writes too, in the same transaction as the write
(`sql_fence` on the same database, as `tenure.fence.sink` does): the middleware is then a
first, cheap line of refusal.

This middleware is pure ASGI and needs only ``anyio`` (a tenure dependency).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import anyio.to_thread

from ..errors import InvalidArgument
from ..models import FencingToken
from ._headers import PROBLEM_CONTENT_TYPE, Rejection, collect_headers, missing, read_token
from ._signed import Keyring, validate_keyring
from ._stores import (
    FenceStore,
    FenceVerdict,
    MemoryFenceStore,
    SQLiteFenceStore,
    validate_fence_store,
)

__all__ = [
    "STATE_KEY",
    "FenceMiddleware",
    "FenceStore",
    "FenceVerdict",
    "MemoryFenceStore",
    "SQLiteFenceStore",
    "send_problem",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
OnRejected = Callable[[Rejection, Scope], "Awaitable[None] | None"]

STATE_KEY = "tenure_token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def send_problem(send: Send, rejection: Rejection, instance: str | None = None) -> None:
    """Answer with ``rejection`` as an ``application/problem+json`` response."""
    body = rejection.body(instance)
    await send(
        {
            "type": "http.response.start",
            "status": rejection.status,
            "headers": [
                (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _JobLocks:
    """One lock per job with requests in flight (dropped when the last one leaves)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    def acquire_slot(self, job_id: str) -> anyio.Lock:
        lock, users = self._locks.get(job_id, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._locks[job_id] = (lock, users + 1)
        return lock

    def release_slot(self, job_id: str) -> None:
        lock, users = self._locks[job_id]
        if users <= 1:
            del self._locks[job_id]
        else:
            self._locks[job_id] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


class FenceMiddleware:
    """Reject stale and forged fencing tokens before the app sees the request.

    ``store``: the service's own fence store (`MemoryFenceStore` by default, `SQLiteFenceStore`
    to keep it across restarts, or your own `FenceStore`). ``keyring``: verify signed tokens
    and refuse unsigned ones. ``strict``: one request per generation. ``require``: unsafe
    methods must carry a token. ``on_rejected(rejection, scope)``: called (awaited if it
    returns an awaitable) before each refusal is sent, e.g. to log it.

    Each argument is checked here (`InvalidArgument`), not at the first request: ``app``
    must be callable, ``store`` have ``advance`` and ``highest``, ``on_rejected`` be
    callable or None.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        store: FenceStore | None = None,
        keyring: Keyring | None = None,
        strict: bool = False,
        require: bool = True,
        serialize: bool = True,
        on_rejected: OnRejected | None = None,
    ) -> None:
        if not callable(app):
            raise InvalidArgument(
                "app",
                f"must be an ASGI app (called with scope, receive, send), not {type(app).__name__}",
            )
        self.store: FenceStore = (
            MemoryFenceStore() if store is None else validate_fence_store(store)
        )
        self.keyring = validate_keyring(keyring)
        for name, value in (("strict", strict), ("require", require), ("serialize", serialize)):
            if not isinstance(value, bool):
                raise InvalidArgument(name, f"must be True or False, not {type(value).__name__}")
        if on_rejected is not None and not callable(on_rejected):
            raise InvalidArgument(
                "on_rejected",
                "must be a callable taking (rejection, scope), or None, "
                f"not {type(on_rejected).__name__}",
            )
        self.app = app
        self.strict = strict
        self.require = require
        self.serialize = serialize
        self.on_rejected = on_rejected
        self._locks = _JobLocks()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = read_token(collect_headers(scope.get("headers", ())), self.keyring)
        if found is None:
            if self.require and scope.get("method", "GET").upper() in UNSAFE_METHODS:
                await self._refuse(missing(f"a {scope['method']} request"), scope, send)
                return
            await self.app(scope, receive, send)
            return
        if isinstance(found, Rejection):
            await self._refuse(found, scope, send)
            return
        if not self.serialize:
            await self._fenced(found, scope, receive, send)
            return
        lock = self._locks.acquire_slot(found.job_id)
        try:
            async with lock:
                await self._fenced(found, scope, receive, send)
        finally:
            self._locks.release_slot(found.job_id)

    async def _fenced(
        self, token: FencingToken, scope: Scope, receive: Receive, send: Send
    ) -> None:
        verdict = await self._advance(token)
        if not verdict.accepted:
            await self._refuse(
                Rejection.stale(token, verdict.current, strict=self.strict), scope, send
            )
            return
        scope.setdefault("state", {})[STATE_KEY] = token
        await self.app(scope, receive, send)

    async def _advance(self, token: FencingToken) -> FenceVerdict:
        store, strict = self.store, self.strict
        if getattr(store, "blocking", True):
            return await anyio.to_thread.run_sync(lambda: store.advance(token, strict=strict))
        return store.advance(token, strict=strict)

    async def _refuse(self, rejection: Rejection, scope: Scope, send: Send) -> None:
        if self.on_rejected is not None:
            outcome = self.on_rejected(rejection, scope)
            if inspect.isawaitable(outcome):
                await outcome
        await send_problem(send, rejection, scope.get("path"))
