"""Every Lua script checks its arguments before its first write (issue #12).

A Redis script's writes are not rolled back when it fails: renew with ``ttl=NaN`` used to
write ``nan`` into the job hash, then fail at ZADD, and the client reported a lost lease
that "changed nothing". The client refuses such values first (see the conformance suite);
these tests go under it, to the driver, as a client without those checks would, and
require that the store is left exactly as it was, store clock floor included.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import tenure
from tenure._protocol import Completion, Renewal, Submission, hash_secret, settle_receipt

BAD_SECONDS = [float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 1e300]


def everything(raw: Any, prefix: str) -> dict[str, Any]:
    """Every key of the store with its whole value."""
    dump: dict[str, Any] = {}
    for key in sorted(raw.scan_iter(match="{" + prefix + "}:*", count=1000)):
        kind = raw.type(key).decode()
        if kind == "hash":
            dump[key] = raw.hgetall(key)
        elif kind == "zset":
            dump[key] = raw.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            dump[key] = raw.lrange(key, 0, -1)
        else:
            dump[key] = raw.get(key)
    return dump


@pytest.fixture
def held(real_store: tenure.Store) -> tenure.Lease:
    real_store.submit("J", max_attempts=3)
    real_store.submit("K")
    lease = real_store.claim("J", "A", 30)
    assert lease is not None
    return lease


def _driver_calls(lease: tenure.Lease, value: float) -> dict[str, Any]:
    secret_hash = hash_secret(lease.secret)
    job, owner, gen = lease.job_id, lease.owner, lease.generation
    return {
        "renew": lambda d: d.renew(job, owner, gen, secret_hash, value),
        # The refused ttl second: the first renewal, valid, must not be written either.
        "renew_many": lambda d: d.renew_many(
            [Renewal(job, owner, gen, secret_hash, 30.0), Renewal("K", "B", 1, "1" * 64, value)]
        ),
        "fail": lambda d: d.fail(
            job, owner, gen, secret_hash, settle_receipt(secret_hash, "fail"), "e", value
        ),
        "claim": lambda d: d.claim("K", "B", value, "1" * 64),
        "claim_next": lambda d: d.claim_next("B", value, ["default"], ["1" * 64]),
        "complete_and_claim": lambda d: d.complete_and_claim(
            [
                Completion(
                    job, owner, gen, secret_hash, settle_receipt(secret_hash, "complete"), None
                )
            ],
            "B",
            value,
            ["default"],
            ["1" * 64],
        ),
        "submit": lambda d: d.submit("new", "default", None, value, 5),
        "requeue": lambda d: d.requeue("K", value, False, ["done", "dead", "cancelled"]),
        "purge": lambda d: d.purge(["done", "dead", "cancelled"], value, 500, None),
    }


@pytest.mark.parametrize(
    "operation",
    [
        "renew",
        "renew_many",
        "fail",
        "claim",
        "claim_next",
        "complete_and_claim",
        "submit",
        "requeue",
        "purge",
    ],
)
def test_a_refused_argument_writes_nothing(
    real_store: tenure.Store, raw: Any, prefix: str, held: tenure.Lease, operation: str
) -> None:
    driver = real_store._driver
    before = everything(raw, prefix)
    assert driver.keys.clock.encode() in before  # the floor exists: a write would move it
    for value in BAD_SECONDS:
        if operation in ("submit", "fail", "requeue", "purge") and value == 0.0:
            continue  # a delay of 0 is valid
        # The driver sends what it is given, as float text (repr): 'nan', 'inf', '1e+300'.
        with pytest.raises(tenure.InvalidArgument) as caught:
            _driver_calls(held, value)[operation](driver)
        assert "must be a number from" in caught.value.rule, caught.value
        assert everything(raw, prefix) == before, (operation, value)
    real_store.complete(held, "fine")  # the lease was not touched


def test_the_scripts_limits_are_the_clients() -> None:
    """_lib.lua restates tenure._validate's limits (a script cannot import them)."""
    from tenure import _validate
    from tenure._resources import load_text

    lib = load_text("tenure.stores.redis", "lua/_lib.lua")
    limits = r"^local (MIN_TTL|MAX_TTL|MAX_DELAY|MAX_ATTEMPTS|MIN_PRIORITY|MAX_PRIORITY) = (\S+)$"
    stated = dict(re.findall(limits, lib, re.M))
    assert {name: float(value) for name, value in stated.items()} == {
        "MIN_TTL": _validate.MIN_TTL,
        "MAX_TTL": _validate.MAX_TTL,
        "MAX_DELAY": _validate.MAX_DELAY,
        "MAX_ATTEMPTS": float(_validate.MAX_ATTEMPTS),
        "MIN_PRIORITY": float(_validate.MIN_PRIORITY),
        "MAX_PRIORITY": float(_validate.MAX_PRIORITY),
    }


@pytest.mark.parametrize(
    ("priority", "timeout"),
    [(2**31, None), (-(2**31) - 1, None), (1.5, None), (0, 0.0), (0, float("nan")), (0, 1e300)],
)
def test_a_refused_priority_or_timeout_writes_nothing(
    real_store: tenure.Store, raw: Any, prefix: str, priority: Any, timeout: Any
) -> None:
    # Issue #18: submit and submit_many check both before their first write.
    real_store.submit("K")
    driver = real_store._driver
    before = everything(raw, prefix)
    batch = [Submission("new", "default", None, 0.0, 5, priority, timeout)]
    for call in (
        lambda: driver.submit("new", "default", None, 0.0, 5, priority, timeout),
        lambda: driver.submit_many(batch),
    ):
        with pytest.raises(tenure.InvalidArgument) as caught:
            call()
        assert caught.value.argument in ("priority", "timeout"), caught.value
        assert everything(raw, prefix) == before, (priority, timeout)
