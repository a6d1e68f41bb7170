"""Helpers of the Redis-specific tests: awkward job ids, the requests a store sends, the
script cache, completions made by hand."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tenure._protocol import Completion, hash_secret, settle_receipt
from tenure.stores.redis._common import SCRIPTS

AWKWARD_IDS = [
    "a:b",
    "{tag}",
    "}{",
    "{",
    "*",
    "job *?[]\\",
    "with space",
    "  leading and trailing  ",
    "%",
    "%3A",  # must not meet "a:b"-style encodings of other ids
    "a%3Ab",
    "ünïcødé ✓ 工作 🚀",
    "{tenure}:j:x",  # looks like one of our own keys
    "x" * 255,
    "é" * 255,
    "🚀" * 255,
]


def count_requests(store: tenure.Store, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Record every request the store's driver sends from now on."""
    driver: Any = store._driver
    sent: list[tuple[Any, ...]] = []
    send = driver._send

    def spy(operation: str, command: Any) -> Any:
        sent.append(tuple(command))
        return send(operation, command)

    monkeypatch.setattr(driver, "_send", spy)
    return sent


def cached(raw: Any, name: str) -> None:
    """Make sure the server knows script ``name``: an earlier test may have flushed the
    script cache, and the first call would then be EVALSHA and EVAL."""
    raw.script_load(SCRIPTS[name].text)


def completion(lease: tenure.Lease, result: str | None = None) -> Completion:
    return Completion(
        lease.job_id,
        lease.owner,
        lease.generation,
        hash_secret(lease.secret),
        settle_receipt(hash_secret(lease.secret), "complete"),
        result,
    )
