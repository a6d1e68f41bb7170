"""A TCP proxy in front of PostgreSQL that can lose a reply after the server committed.

It reads the server's messages (type byte, length) and, when armed, holds back the whole
reply to the next statement run on any connection until the server's ReadyForQuery (sent
after COMMIT), then closes that connection without passing any of it on: exactly what a
client sees when the network drops at the worst moment. Use sslmode=disable so that the
stream is plain protocol messages.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class Proxy:
    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._armed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.replies_lost = 0
        self.lost = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_next_reply(self) -> None:
        self.lost.clear()
        self._armed.set()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            target = threading.Event()  # set: this connection's next reply is to be lost
            threading.Thread(
                target=self._upward, args=(client, server, target), daemon=True
            ).start()
            threading.Thread(
                target=self._downward, args=(server, client, target), daemon=True
            ).start()

    def _upward(
        self, client: socket.socket, server: socket.socket, target: threading.Event
    ) -> None:
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(client, server)
                return
            with self._lock:
                if self._armed.is_set():
                    self._armed.clear()
                    target.set()
            try:
                server.sendall(data)
            except OSError:
                _close(client, server)
                return

    def _downward(
        self, server: socket.socket, client: socket.socket, target: threading.Event
    ) -> None:
        pending = b""
        held = b""  # an armed connection's reply so far
        while True:
            try:
                data = server.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(client, server)
                return
            pending += data
            forward = b""
            while len(pending) >= 5:
                kind = pending[:1]
                (length,) = struct.unpack("!I", pending[1:5])
                if len(pending) < 1 + length:
                    break
                message, pending = pending[: 1 + length], pending[1 + length :]
                if target.is_set():
                    held += message
                    if kind != b"Z":
                        continue  # held back, then lost
                    # ReadyForQuery: the server is done (and committed). The reply to a
                    # statement's PREPARE alone (ParseComplete: tenure prepares at first
                    # use) goes through: the statement itself has not run yet.
                    if not _ran_a_statement(held):
                        forward, held = forward + held, b""
                        continue
                    with self._lock:
                        self.replies_lost += 1
                    _close(client, server)
                    self.lost.set()
                    return
                forward += message
            if forward:
                try:
                    client.sendall(forward)
                except OSError:
                    _close(client, server)
                    return


def _ran_a_statement(reply: bytes) -> bool:
    """Whether a reply (whole messages) holds a CommandComplete or an error."""
    while reply:
        (length,) = struct.unpack("!I", reply[1:5])
        if reply[:1] in (b"C", b"E"):
            return True
        reply = reply[1 + length :]
    return False


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
