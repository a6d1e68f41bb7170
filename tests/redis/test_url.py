"""redis:// URLs (pure, but for the test of a bad one on the server: nothing is written)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import tenure
from tenure.stores.redis import parse_redis_url
from tests.url_refusals import refused_on_open


def test_defaults() -> None:
    options = parse_redis_url("redis://localhost")
    assert options.prefix == "tenure"
    assert options.timeout == options.connect_timeout == 5.0
    assert options.address == "localhost:6379/0"
    assert options.public_url == "redis://localhost?prefix=tenure"


def test_password_is_kept_out_of_the_public_url() -> None:
    options = parse_redis_url("rediss://user:s3cret@example.com:6380/2?prefix=jobs&timeout=1.5")
    assert "s3cret" not in options.public_url
    assert options.public_url == "rediss://user@example.com:6380/2?prefix=jobs"
    assert "s3cret" in options.redis_url
    assert "prefix" not in options.redis_url
    assert options.timeout == 1.5
    assert options.address == "example.com:6380/2"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("redis://h?prefix=a{b}", "prefix"),
        ("redis://h?prefix=", "prefix"),
        ("redis://h?prefix=" + "x" * 65, "prefix"),
        ("redis://h?timeout=soon", "timeout"),
        ("redis://h?timeout=-1", "timeout"),
        ("redis://h?max_connections=0", "max_connections"),
        ("redis://h?colour=blue", "unknown redis option 'colour'"),
        ("redis://h/db1", "database number"),
        ("redis:///0", "host"),
        # Numbers only in ASCII digits: isdigit() and int() take others.
        ("redis://h/\u00b2", "database number"),  # '²': redis-py would use db 0
        ("redis://h/\u0663", "database number"),  # Arabic-Indic 3
        ("redis://h/2147483648", "database number"),
        ("redis://h/-1", "database number"),
        ("redis://h?max_connections=\u00b2", "max_connections"),
        ("redis://h?max_connections=%C2%B2", "max_connections"),
        ("redis://h?max_connections=1_0", "max_connections"),
        ("redis://h?max_connections=%205", "max_connections"),
        ("redis://h?timeout=\u0663", "timeout"),
        ("redis://h?connect_timeout=1_0", "connect_timeout"),
        ("redis://h:\u0663", "port"),
        ("redis://h:0", "port"),  # was taken as 6379
        ("redis://h:65536", "port"),
        # Malformed URLs, and redis-py's options checked before it sees them.
        ("redis://[::1", "not a valid URL"),
        ("redis://...:6379/0", "'...' is not a valid host name"),
        ("redis://" + "x" * 64 + "/0", "not a valid host name"),
        ("redis://h\n/0", "control characters"),
        ("redis://h?prefix=%FF", "UTF-8"),
        ("redis://h?ssl_cert_reqs=none", "rediss://"),
        ("redis://h?ssl_ca_certs=/ca.pem", "rediss://"),
        ("rediss://h?ssl_cert_reqs=bogus", "ssl_cert_reqs"),
        ("rediss://h?ssl_certfile=", "ssl_certfile"),
        ("redis://h?client_name=a%20b", "client_name"),
    ],
)
def test_bad_urls(url: str, words: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match="url") as caught:
        parse_redis_url(url)
    assert words in str(caught.value)


def test_options_redis_takes_are_kept() -> None:
    options = parse_redis_url(
        "rediss://h:6380/7?ssl_cert_reqs=required&ssl_ca_certs=/ca.pem&client_name=w-1"
        "&max_connections=20&timeout=.5"
    )
    assert options.address == "h:6380/7"
    assert options.max_connections == 20
    assert options.timeout == 0.5
    assert urlsplit(options.redis_url).query == (
        "ssl_cert_reqs=required&ssl_ca_certs=%2Fca.pem&client_name=w-1"
    )


@pytest.fixture
def db_zero(url: str, prefix: str) -> Iterator[Any]:
    """A client of database 0 of the test server, where redis-py puts a store whose database
    number it cannot read; the test prefix's keys there are deleted afterwards."""
    import redis

    parts = urlsplit(url)
    client = redis.Redis.from_url(urlunsplit((parts.scheme, parts.netloc, "/0", "", "")))
    yield client
    leftover = list(client.scan_iter(match="{" + prefix + "}*"))
    if leftover:
        client.delete(*leftover)
    client.close()


@pytest.mark.parametrize(
    ("path", "query"),
    [("/\u00b2", ""), ("/\u2460", ""), ("/\u0663", ""), ("/0", "&max_connections=\u00b2")],
    ids=["superscript-2", "circled-1", "arabic-indic-3", "max_connections"],
)
def test_a_bad_number_is_refused_and_nothing_is_written(
    url: str, prefix: str, db_zero: Any, path: str, query: str
) -> None:
    parts = urlsplit(url)
    bad = urlunsplit((parts.scheme, parts.netloc, path, parts.query + query, ""))
    words = "max_connections" if query else "database number"

    def no_keys() -> None:
        assert db_zero.keys("{" + prefix + "}*") == []

    refused_on_open(bad, words, parse_redis_url, no_keys)
