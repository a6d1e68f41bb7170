"""The Redis driver, async. Source of truth for the sync driver (``_sync.py``), which
``tools/async_to_sync.py`` generates from this file.

Each operation is one Lua script (``lua/*.lua``) run with ``EVALSHA``. When the server does
not know a script (restart, ``SCRIPT FLUSH``, failover), its ``NOSCRIPT`` answer means the
call did not run: the call is sent again as ``EVAL`` with the script's text, which also
caches the script for the next ``EVALSHA``.

Requests go out on connections taken from redis-py's pool rather than through redis-py's
client: the driver then knows whether a request had left when a connection failed (which
decides `StoreUnavailable.outcome_unknown`), and nothing is retried behind the caller's back
(a ``claim_next`` repeated after a lost reply would take a second job).
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from redis.asyncio.connection import ConnectionPool
from redis.exceptions import BusyLoadingError, NoScriptError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..._clock import Clock
from ..._concurrency import (
    looks_closed_async,
    request_bound_async,
    socket_timeout_async,
    uncancellable_async,
)
from ..._protocol import Completion, Outcome, Renewal
from ...errors import StoreUnavailable
from ._common import (
    CHECKED_CONFIG,
    LAYOUT_VERSION,
    SCRIPTS,
    Keys,
    config_noted,
    connection_options,
    decode_batch,
    decode_float,
    decode_item,
    decode_outcome,
    encode,
    handshake_refused,
    note_server_config,
    pack_request,
    parse_redis_url,
    refused,
    unreachable,
)
from ._control_async import AsyncRedisControl
from ._jobs_async import AsyncJobsMixin
from ._schedules_async import AsyncRedisSchedules

__all__ = ["AsyncRedisDriver"]

# Seconds a connection may sit unused and still be taken again without the pool's probe.
_RECENT = 0.5


class AsyncRedisDriver(AsyncRedisControl, AsyncJobsMixin, AsyncRedisSchedules):
    """The store operations of `tenure.stores.abc.AsyncDriver` over one Redis server.

    Create it with ``AsyncRedisDriver(url, store_clock)`` and ``await driver.open()``.
    """

    def __init__(self, url: str, store_clock: Clock | None = None) -> None:
        options = parse_redis_url(url)
        self.url = options.public_url
        self.keys = Keys(options.prefix)
        self.store_id = ""
        self._address = options.address
        self._store_clock = store_clock
        self._closed = False
        # BLPOP blocks at most this long per request, well inside a request's bound.
        self._block = (options.timeout or 10.0) / 2
        # Each request and its answer at most this long (the URL's timeout), and taking a
        # new connection from the pool (connect, then its handshake) the two together.
        self._timeout = options.timeout
        self._open_timeout = (
            None
            if options.timeout is None or options.connect_timeout is None
            else options.timeout + options.connect_timeout
        )
        pool_options: dict[str, Any] = {
            "socket_timeout": socket_timeout_async(options.timeout),
            "socket_connect_timeout": options.connect_timeout,
            "decode_responses": True,
            "protocol": 2,
            **connection_options(),
        }
        if options.max_connections is not None:
            pool_options["max_connections"] = options.max_connections
        # redis-py's pool and connections are not fully typed.
        self._pool: Any = ConnectionPool.from_url(options.redis_url, **pool_options)
        # Connections this driver used last, kept out of the pool between requests, with
        # when they were last used: taking one back is a list pop, where the pool takes a
        # lock, probes the socket and keeps counters (tens of microseconds per request).
        # One idle for longer than _RECENT goes back through the pool, whose probe replaces
        # it if the server closed it meanwhile.
        self._recent: list[tuple[Any, float]] = []
        self._pid = os.getpid()

    async def open(self) -> None:
        """Register this store in the server (or find it) and check its persistence."""
        try:
            # One script run: the store's id and layout, and its clock key made sure of.
            keys = [self.keys.meta, self.keys.layout1_clock]
            store_id, layout = await self._eval(
                "connect", "open", keys, [uuid.uuid4().hex, str(LAYOUT_VERSION)]
            )
            if int(layout) > LAYOUT_VERSION:
                raise StoreUnavailable(
                    f"the Redis store {self.url} has key layout version {layout}, newer than "
                    f"this tenure understands ({LAYOUT_VERSION}); upgrade tenure",
                    operation="connect",
                    outcome_unknown=False,
                )
            self.store_id = str(store_id)
            self.keys = self.keys.for_store(self.store_id)
            # An older store is marked layout 3 only once its leases are indexed (issue
            # #20): until then every client that opens it builds the index first.
            if int(layout) < LAYOUT_VERSION:
                await self.index_leases()
                await self._identity(LAYOUT_VERSION)
            await self._check_persistence()
        except BaseException:
            await self.close()
            raise

    async def _identity(self, layout: int) -> None:
        keys = [self.keys.meta, self.keys.clock, self.keys.layout1_clock]
        await self._eval("connect", "identity", keys, [str(layout)])

    async def _check_persistence(self) -> None:
        if config_noted(self._address):
            return
        first, *rest = [("CONFIG", "GET", name) for name in CHECKED_CONFIG]
        try:
            # In one round trip: a new process's first connect to a distant server pays
            # three fewer of them (a CLI command, a worker's start).
            replies = await self._send("connect", first, pipelined=rest)
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, ResponseError):
                raise
            # Managed services often refuse CONFIG: say that persistence is unchecked.
            note_server_config(self._address, [], unchecked=str(exc.__cause__))
            return
        note_server_config(self._address, replies)

    # -- plumbing ----------------------------------------------------------------------

    def _now_arg(self) -> str:
        # '' tells a script to use the server's TIME; the test hook passes its own now.
        return "" if self._store_clock is None else repr(float(self._store_clock.time()))

    async def _send(
        self, operation: str, command: Sequence[Any], *, pipelined: Sequence[Sequence[Any]] = ()
    ) -> Any:
        """One request and its answer on a pooled connection; errors as StoreUnavailable
        (NoScriptError is passed through: the call did not run). With ``pipelined``, those
        requests go in the same write, and the answer is the list of every reply, in order
        (all of them read, then the first error reply raised)."""
        if self._closed:
            raise StoreUnavailable(
                f"{operation}: this store was closed", operation=operation, outcome_unknown=False
            )
        try:
            conn = await self._connection()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise unreachable(operation, self._address, exc, sent=False) from exc
        except ResponseError as exc:  # the handshake refused (SELECT, CLIENT SETNAME...)
            raise handshake_refused(operation, self._address, exc) from exc
        sent = broken = False
        try:
            # One buffer, one write (`pack_request`): redis-py's packer keeps each argument
            # above 6 kB (a batch's JSON) as a chunk of its own, which a sync connection
            # sends with a sendall each (as many wake-ups of the server).
            packed = pack_request(command)
            if pipelined:
                packed += b"".join(map(pack_request, pipelined))
            # Past the URL's timeout: TimeoutError, an OSError (a sync socket times out itself).
            async with request_bound_async(self._timeout):
                await conn.send_packed_command([packed])  # a list: sync redis-py iterates it
                sent = True
                if pipelined:
                    return await _read_replies(conn, 1 + len(pipelined))
                return await conn.read_response()
        except NoScriptError:
            raise
        except BusyLoadingError as exc:  # an answer: the server is loading its data
            raise refused(operation, self._address, exc) from exc
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            broken = True
            raise unreachable(operation, self._address, exc, sent) from exc
        except ResponseError as exc:
            raise refused(operation, self._address, exc) from exc
        except Exception as exc:
            broken = True
            if self._closed:  # closed by another thread or task while the request was out
                raise StoreUnavailable(
                    f"{operation}: this store was closed", operation=operation, outcome_unknown=sent
                ) from exc
            raise
        except BaseException:
            broken = True  # cancelled between request and answer: the connection is unusable
            raise
        finally:
            if broken:
                with uncancellable_async():
                    await conn.disconnect()
                    await self._pool.release(conn)
            else:
                self._recent.append((conn, time.monotonic()))

    async def _connection(self) -> Any:
        """A connection to send on: one used within _RECENT seconds, else the pool's."""
        if self._pid != os.getpid():  # forked: the parent's sockets are not ours to use
            self._recent = []
            self._pid = os.getpid()
        while self._recent:
            try:
                conn, used_at = self._recent.pop()
            except IndexError:  # another thread took the last one
                break
            if time.monotonic() - used_at < _RECENT and not looks_closed_async(conn):
                return conn
            with uncancellable_async():
                await self._pool.release(conn)  # the pool probes it, reconnects if need be
        async with request_bound_async(self._open_timeout):
            return await self._pool.get_connection()

    async def _eval(
        self, operation: str, script_name: str, keys: Sequence[str], args: Sequence[str]
    ) -> Any:
        script = SCRIPTS[script_name]
        call = ("EVALSHA", script.sha, str(len(keys)), *keys, *args)
        try:
            return await self._send(operation, call)
        except NoScriptError:
            # The server's script cache was emptied (restart, SCRIPT FLUSH, failover) and the
            # call did not run: send it again with the script's text, which also caches it.
            # One round trip, and no window for another flush between loading and calling.
            return await self._send(operation, ("EVAL", script.text, *call[2:]))

    # -- operations --------------------------------------------------------------------

    async def now(self) -> float:
        return float(await self._eval("now", "now", [self.keys.clock], [self._now_arg()]))

    async def submit(
        self,
        job_id: str,
        queue: str,
        payload: str | None,
        delay: float,
        max_attempts: int,
        priority: int = 0,
        timeout: float | None = None,
        *,
        unique_key: str | None = None,
        unique_for: float | None = None,
        headers: str | None = None,
    ) -> Outcome:
        k = self.keys
        keys = [
            k.job(job_id),
            k.candidates(queue),
            k.listing(queue),
            k.jobs,
            k.seq,
            k.clock,
            k.wake(queue),
        ]
        args = [
            self._now_arg(),
            job_id,
            queue,
            encode(job_id),
            payload or "",
            "0" if payload is None else "1",
            repr(float(delay)),
            str(max_attempts),
            str(priority),
            "" if timeout is None else repr(float(timeout)),
            headers or "",
        ]
        if unique_key is not None:  # issue #18: the key's pointer, the key, its window
            keys.append(k.unique(unique_key))
            args += (unique_key, "" if unique_for is None else repr(float(unique_for)))
        return decode_outcome(await self._eval("submit", "submit", keys, args))

    async def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> Outcome:
        keys = [self.keys.job(job_id), self.keys.clock, self.keys.limits, self.keys.rates]
        args = [self._now_arg(), owner, repr(float(ttl)), secret_hash]
        return decode_outcome(await self._eval("claim", "claim", keys, args))

    async def claim_next(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        if not secret_hashes:
            return []
        k = self.keys
        keys = [k.clock, k.paused, k.limits, k.rates, *(k.candidates(queue) for queue in queues)]
        args = [self._now_arg(), owner, repr(float(ttl)), k.job_prefix, *secret_hashes]
        now, items = decode_batch(await self._eval("claim_next", "claim_next", keys, args))
        return [decode_item(item, now) for item in items]

    async def _holder(
        self,
        operation: str,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        *extra: str,
    ) -> Outcome:
        keys = [self.keys.job(job_id), self.keys.clock]
        args = [self._now_arg(), owner, str(generation), secret_hash, *extra]
        return decode_outcome(await self._eval(operation, operation, keys, args))

    async def renew(
        self, job_id: str, owner: str, generation: int, secret_hash: str, ttl: float
    ) -> Outcome:
        return await self._holder("renew", job_id, owner, generation, secret_hash, repr(float(ttl)))

    async def renew_many(self, renewals: Sequence[Renewal]) -> list[Outcome]:
        if not renewals:
            return []
        k = self.keys
        keys = [k.clock]
        args = [self._now_arg()]
        for job_id, owner, generation, secret_hash, ttl in renewals:
            keys.append(k.job(job_id))
            args += (owner, str(generation), secret_hash, repr(float(ttl)))
        now, items = decode_batch(await self._eval("renew_many", "renew_many", keys, args))
        return [decode_item(item, now) for item in items]

    async def complete(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        result: str | None,
    ) -> Outcome:
        return await self._holder(
            "complete", job_id, owner, generation, secret_hash, receipt, *_result_args(result)
        )

    def _add_completions(
        self, keys: list[str], args: list[str], completions: Sequence[Completion]
    ) -> None:
        """The job key of each completion onto ``keys``; its six script arguments (owner,
        generation, secret hash, receipt, result, has result) onto ``args``."""
        for job_id, owner, generation, secret_hash, receipt, result in completions:
            keys.append(self.keys.job(job_id))
            args += (owner, str(generation), secret_hash, receipt, *_result_args(result))

    async def complete_many(self, completions: Sequence[Completion]) -> list[Outcome]:
        if not completions:
            return []
        k = self.keys
        keys = [k.clock]
        args = [self._now_arg()]
        self._add_completions(keys, args, completions)
        now, items = decode_batch(await self._eval("complete_many", "complete_many", keys, args))
        return [decode_item(item, now) for item in items]

    async def complete_and_claim(
        self,
        completions: Sequence[Completion],
        owner: str,
        ttl: float,
        queues: Sequence[str],
        secret_hashes: Sequence[str],
    ) -> tuple[list[Outcome], list[Outcome]]:
        if not completions and not secret_hashes:
            return [], []
        k = self.keys
        keys = [k.clock, k.paused, k.limits, k.rates]
        args = [self._now_arg(), owner, repr(float(ttl)), k.job_prefix, str(len(completions))]
        self._add_completions(keys, args, completions)
        keys += (k.candidates(queue) for queue in queues)
        args += secret_hashes
        reply = await self._eval("complete_and_claim", "complete_and_claim", keys, args)
        now, items = decode_batch(reply)
        count = len(completions)
        return [decode_item(item, now) for item in items[:count]], [
            decode_item(item, now) for item in items[count:]
        ]

    async def release(
        self, job_id: str, owner: str, generation: int, secret_hash: str, receipt: str
    ) -> Outcome:
        return await self._holder("release", job_id, owner, generation, secret_hash, receipt)

    async def fail(
        self,
        job_id: str,
        owner: str,
        generation: int,
        secret_hash: str,
        receipt: str,
        error: str,
        retry_in: float,
    ) -> Outcome:
        return await self._holder(
            "fail", job_id, owner, generation, secret_hash, receipt, error, repr(float(retry_in))
        )

    async def find_leases(
        self, owner: str, ttl: float, queues: Sequence[str], secret_hashes: Sequence[str]
    ) -> list[Outcome]:
        k = self.keys
        keys = [k.clock, *(k.candidates(queue) for queue in queues)]
        args = [self._now_arg(), owner, repr(float(ttl)), k.job_prefix, *secret_hashes]
        now, items = decode_batch(await self._eval("find_leases", "find_leases", keys, args))
        return [decode_item(item, now) for item in items]

    async def get(self, job_id: str) -> Outcome:
        keys = [self.keys.job(job_id), self.keys.clock]
        return decode_outcome(await self._eval("get", "get", keys, [self._now_arg()]))

    async def attempts(self, job_id: str) -> list[tuple[Any, ...]]:
        """The job's attempts, oldest first (attempts.lua): each entry as _lib.lua's
        attempt_start and attempt_end wrote it."""
        found = await self._eval("attempts", "attempts", [self.keys.job(job_id)], [])
        rows = []
        for entry in found:
            a = json.loads(entry)
            rows.append((a["g"], a["o"], a["st"], a.get("en"), a.get("x"), a.get("e")))
        return rows

    async def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> None:
        # Writers that make a job claimable at once (submit, release, fail without delay)
        # push a wake-up onto their queue's list; idle clients block on the lists with
        # BLPOP, at most until the next delayed job or lease expiry falls due.
        deadline = time.monotonic() + timeout
        k = self.keys
        wake_keys = [k.wake(queue) for queue in queues]
        keys = [
            k.clock,
            *(k.candidates(queue) for queue in queues),
            *wake_keys,
            k.paused,
            k.limits,
            k.rates,
        ]
        try:
            reply = await self._eval(
                "wait_for_jobs", "wait", keys, [self._now_arg(), str(len(queues))]
            )
            now, due = decode_float(reply[0]), decode_float(reply[1])
            if now is not None and due is not None:
                deadline = min(deadline, time.monotonic() + max(0.0, due - now))
            while (remaining := deadline - time.monotonic()) >= 0.001:
                block = math.ceil(min(remaining, self._block) * 1000) / 1000
                if await self._send("wait_for_jobs", ("BLPOP", *wake_keys, f"{block:.3f}")):
                    return
        except StoreUnavailable:
            if self._closed:
                return
            raise

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._recent = []
            with uncancellable_async():
                await self._pool.disconnect()  # in-use ones too, so the recent ones


def _result_args(result: str | None) -> tuple[str, str]:
    """A result as the scripts take it: its JSON text and whether there is one (a Lua
    string cannot be nil, so "no result" travels as a flag)."""
    return ("", "0") if result is None else (result, "1")


async def _read_replies(conn: Any, count: int) -> list[Any]:
    """``count`` replies from ``conn``, every one read (the connection stays in step with
    its requests) before the first error reply among them is raised."""
    replies: list[Any] = []
    error: ResponseError | None = None
    for _ in range(count):
        try:
            replies.append(await conn.read_response())
        except ResponseError as exc:
            error = error or exc
            replies.append(None)
    if error is not None:
        raise error
    return replies
