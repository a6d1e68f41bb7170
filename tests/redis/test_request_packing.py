"""tenure packs its Redis requests itself (`_common.pack_request`): one join, where redis-py's
pure-Python packer copies the request built so far at each argument. The bytes on the wire
must be exactly what redis-py would send, for every kind of argument tenure passes: text
(ASCII, UTF-8, empty, past redis-py's 6 kB chunking), integers, and floats as redis-py
writes them; anything else is refused before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio.connection
import redis.connection

from tenure.stores.redis._common import pack_request

REQUESTS: list[tuple[Any, ...]] = [
    ("EVALSHA", "a" * 40, 2, "{t}:clock", "{t}:job:é", "", "12.5", "owner"),
    # All text, as the drivers' scripts are called: framed without a Python step each.
    ("EVALSHA", "b" * 40, "2", "{t}:clock", "{t}:job:é", "", '{"r": "ü" }', "x" * 7000),
    ("BLPOP", "{t}:wake:q1", "{t}:wake:q2", "0.250"),
    ("EVAL", "return 1", 0),
    ("HSET", "{t}:k", "payload", '{"n": ' + "9" * 7000 + "}", "n", 3, "f", 0.1),
    ("CONFIG", "GET", "appendonly"),
    ("SET", "k", b"\x00raw bytes\xff"),
]


@pytest.mark.parametrize("command", REQUESTS, ids=lambda command: f"{command[0]}-{command[2]!r}")
def test_requests_are_the_bytes_redis_py_would_send(command: tuple[Any, ...]) -> None:
    for connection in (redis.connection.Connection(), redis.asyncio.connection.Connection()):
        assert pack_request(command) == b"".join(connection.pack_command(*command))


@pytest.mark.parametrize("bad", [True, None, object(), ["a list"]])
def test_an_argument_that_is_not_text_or_a_number_is_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match="text or a number"):
        pack_request(("SET", "k", bad))
