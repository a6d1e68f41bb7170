"""redis:// URLs (pure: no server needed)."""

from __future__ import annotations

import pytest

import tenure
from tenure.stores.redis import parse_redis_url


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
    ],
)
def test_bad_urls(url: str, words: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match="url") as caught:
        parse_redis_url(url)
    assert words in str(caught.value)
