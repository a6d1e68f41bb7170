"""The chaos proxy in front of an echo server: a lost reply, a reply rule, closing."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from tenure.chaos._proxy import Proxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _ask(sock: socket.socket, data: bytes, expect: int | None = None) -> bytes:
    """What comes back for ``data``: ``expect`` bytes (as many as sent), or fewer if the
    connection is cut."""
    sock.sendall(data)
    got = b""
    try:
        while len(got) < (len(data) if expect is None else expect):
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    return got


def _connect(proxy: Proxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)


def test_the_reply_to_the_next_request_is_lost_and_its_connection_cut(echo: int) -> None:
    proxy = Proxy("127.0.0.1", echo)
    try:
        with _connect(proxy) as sock:
            assert _ask(sock, b"one") == b"one"
            proxy.lose_next_reply()
            assert _ask(sock, b"two") == b""
        assert proxy.replies_lost == 1
        with _connect(proxy) as sock:  # once only
            assert _ask(sock, b"three") == b"three"
        assert proxy.replies_lost == 1
    finally:
        proxy.close()


def _lines(held: bytes) -> tuple[int, bool] | None:
    """A reply is a line; only one that holds an X is lost."""
    end = held.find(b"\n")
    return None if end < 0 else (end + 1, b"X" in held[:end])


def test_a_reply_rule_passes_replies_until_the_one_to_lose(echo: int) -> None:
    proxy = Proxy("127.0.0.1", echo, reply=_lines)
    try:
        with _connect(proxy) as sock:
            proxy.lose_next_reply()
            sock.sendall(b"a li")  # half a reply: held back
            sock.settimeout(0.3)
            with pytest.raises(TimeoutError):
                sock.recv(65536)
            sock.settimeout(5)
            assert _ask(sock, b"ne\n", expect=7) == b"a line\n"  # whole, and no X: passed
            assert proxy.replies_lost == 0
            assert _ask(sock, b"an X\n") == b""
        assert proxy.replies_lost == 1
    finally:
        proxy.close()


def test_close_cuts_every_connection_and_twice_is_fine(echo: int) -> None:
    proxy = Proxy("127.0.0.1", echo)
    sock = _connect(proxy)
    assert _ask(sock, b"one") == b"one"
    proxy.close()
    proxy.close()
    assert _ask(sock, b"two") == b""
    sock.close()
    with pytest.raises(ConnectionRefusedError):
        _connect(proxy)


def test_a_url_through_the_proxy_keeps_all_but_host_and_port(echo: int) -> None:
    proxy = Proxy("127.0.0.1", echo)
    try:
        url = "postgresql://user:secret@db.example:5432/app?schema=s"
        assert proxy.through(url) == f"postgresql://user:secret@127.0.0.1:{proxy.port}/app?schema=s"
        assert proxy.through("redis://cache/0") == f"redis://127.0.0.1:{proxy.port}/0"
        assert proxy.through("sqlite:///tenure.db") is None
    finally:
        proxy.close()
