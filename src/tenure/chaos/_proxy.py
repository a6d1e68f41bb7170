"""A loopback TCP proxy between chaos workers and a store server, for network faults.

It forwards bytes both ways (it does not parse the protocol) and, on the nemesis's order:

* `delay`: holds every chunk, both ways, for ``lag`` seconds during a window: requests
  (renewals) reach the server after their lease ended, replies arrive after the client's
  local deadline;
* `drop_replies`: discards what the server sends for a window, then cuts the connections
  that lost something: a request the server executed (a complete) whose reply never
  arrives;
* `cut`: closes every connection at once;
* `lose_next_reply`: the reply to the next request (on any connection) is held back, then
  thrown away and that connection cut: a request the server executed whose outcome the
  client cannot know. The proxy's `ReplyRule` says where a reply ends and which replies
  pass (by default the first bytes the server sends are the reply, and lost).

It runs its own asyncio loop on a daemon thread; the methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

__all__ = ["Proxy", "ReplyRule", "lose_first_bytes"]

CHUNK = 65536

# What `lose_next_reply` holds back, judged as it arrives: None while the reply is not
# whole yet; else (n, lose): its first n bytes are a whole reply, to be thrown away (and
# the connection cut) or, if not ``lose``, passed on while the rest is judged again.
ReplyRule = Callable[[bytes], tuple[int, bool] | None]


def lose_first_bytes(held: bytes) -> tuple[int, bool]:
    """The default rule: whatever the server sends first is the reply, and it is lost."""
    return len(held), True


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    lost_reply: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    losing: bool = False  # the reply to this link's request is to be lost
    held: bytes = b""

    def abort(self) -> None:
        for writer in (self.client, self.server):
            with contextlib.suppress(Exception):
                writer.transport.abort()


class Proxy:
    """Listens on 127.0.0.1:`port` and forwards to ``host:port`` (see the module docstring)."""

    def __init__(self, host: str, port: int, *, reply: ReplyRule = lose_first_bytes) -> None:
        self._upstream = (host, port)
        self._reply = reply
        self._closed = False
        self._lock = threading.Lock()
        self._lag = 0.0
        self._delay_until = 0.0
        self._drop_until = 0.0
        self._lose_next = False
        self._links: set[_Link] = set()
        self.stats = {
            "connections": 0,
            "chunks_delayed": 0,
            "replies_dropped": 0,
            "cuts": 0,
            "replies_lost": 0,
        }
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tenure-proxy")
        self._thread.daemon = True
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self.port: int = self._server.sockets[0].getsockname()[1]

    def through(self, url: str) -> str | None:
        """``url`` with its host and port replaced by the proxy's; None if it has no host."""
        parts = urlsplit(url)
        if not parts.hostname:
            return None
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    def close(self) -> None:
        """Stop listening and cut every connection (closing twice is fine)."""
        if self._closed:
            return
        self._closed = True

        async def shut() -> None:
            self._server.close()
            for link in list(self._links):
                link.abort()
            # The sockets close on the loop's next turn: by the time close() returns, every
            # client has seen its connection end.
            await asyncio.sleep(0)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

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

    def lose_next_reply(self) -> None:
        with self._lock:
            self._lose_next = True

    @property
    def replies_lost(self) -> int:
        """How many replies `lose_next_reply` threw away."""
        return self.stats["replies_lost"]

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
                    if upward and self._lose_next:
                        link.losing, self._lose_next = True, False
                if not upward and link.losing:
                    passed = self._judge(link, data)
                    if passed is None:
                        return
                    if not passed:
                        continue  # not a whole reply yet
                    data = passed
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

    def _judge(self, link: _Link, data: bytes) -> bytes | None:
        """What of the reply held so far passes on; None once it is lost. It is counted
        before the link is cut, so a client that sees the cut sees the count."""
        link.held += data
        passed = b""
        while link.held:
            verdict = self._reply(link.held)
            if verdict is None:
                break
            end, lose = verdict
            if lose:
                self.stats["replies_lost"] += 1
                link.losing, link.held = False, b""
                link.abort()
                return None
            passed, link.held = passed + link.held[:end], link.held[end:]
        return passed
