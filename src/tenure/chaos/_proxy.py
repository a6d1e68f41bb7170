"""A loopback TCP proxy between chaos workers and a store server, for network faults.

It forwards bytes both ways (it does not parse the protocol) and, on the nemesis's order:

* `delay`: holds every chunk, both ways, for ``lag`` seconds during a window: requests
  (renewals) reach the server after their lease ended, replies arrive after the client's
  local deadline;
* `drop_replies`: discards what the server sends for a window, then cuts the connections
  that lost something: a request the server executed (a complete) whose reply never
  arrives;
* `cut`: closes every connection at once.

It runs its own asyncio loop on a daemon thread; the methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Proxy"]

CHUNK = 65536


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    lost_reply: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            with contextlib.suppress(Exception):
                writer.transport.abort()


class Proxy:
    """Listens on 127.0.0.1:`port` and forwards to ``host:port`` (see the module docstring)."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._lock = threading.Lock()
        self._lag = 0.0
        self._delay_until = 0.0
        self._drop_until = 0.0
        self._links: set[_Link] = set()
        self.stats = {"connections": 0, "chunks_delayed": 0, "replies_dropped": 0, "cuts": 0}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tenure-proxy")
        self._thread.daemon = True
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self.port: int = self._server.sockets[0].getsockname()[1]

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    def close(self) -> None:
        async def shut() -> None:
            self._server.close()
            for link in list(self._links):
                link.abort()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    # -- the nemesis's orders ------------------------------------------------------------

    def delay(self, lag: float, seconds: float) -> None:
        with self._lock:
            self._lag = lag
            self._delay_until = time.monotonic() + seconds

    def drop_replies(self, seconds: float) -> None:
        with self._lock:
            self._drop_until = time.monotonic() + seconds
        self._loop.call_soon_threadsafe(self._loop.call_later, seconds, self._cut_lossy)

    def cut(self) -> None:
        self._loop.call_soon_threadsafe(self._cut_all)

    def heal(self) -> None:
        with self._lock:
            self._delay_until = self._drop_until = 0.0

    # -- on the loop ---------------------------------------------------------------------

    def _cut_lossy(self) -> None:
        for link in list(self._links):
            if link.lost_reply:
                self.stats["cuts"] += 1
                link.abort()

    def _cut_all(self) -> None:
        for link in list(self._links):
            self.stats["cuts"] += 1
            link.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        self.stats["connections"] += 1
        link = _Link(writer, up_writer)
        self._links.add(link)
        link.tasks = [
            asyncio.ensure_future(self._pump(reader, up_writer, link, upward=True)),
            asyncio.ensure_future(self._pump(up_reader, writer, link, upward=False)),
        ]
        with contextlib.suppress(Exception):
            await asyncio.gather(*link.tasks)
        self._links.discard(link)
        link.abort()

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        upward: bool,
    ) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                now = time.monotonic()
                with self._lock:
                    lag = self._lag if now < self._delay_until else 0.0
                    dropping = (not upward) and now < self._drop_until
                if dropping:
                    link.lost_reply = True
                    self.stats["replies_dropped"] += 1
                    continue
                if lag > 0:
                    self.stats["chunks_delayed"] += 1
                    await asyncio.sleep(lag)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            link.abort()
