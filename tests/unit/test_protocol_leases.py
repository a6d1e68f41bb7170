"""`check_lease` against its rules one by one, and `LeaseMaker.lease` against `Lease(...)`
(pure).

`check_lease` accepts the leases a store makes in one expression of exact types and ranges
before it applies the rules one by one (issue #19: the rules' calls were a tenth of the
Store's cost per claim -> complete cycle). That shortcut must never accept what a rule
refuses nor hand back anything but the lease it was given: here every field takes values on
both sides of its rule, and the answer is compared with the rules applied one by one.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenure
from tenure import InvalidArgument, Lease
from tenure._clock import LeaseTiming
from tenure._protocol import JobRow, LeaseMaker, check_lease, new_secret
from tenure._validate import (
    MAX_ATTEMPTS,
    MAX_GENERATION,
    MAX_TTL,
    validate_attempts,
    validate_generation,
    validate_id,
    validate_real,
    validate_secret,
    validate_ttl,
)

STORE = "s" * 32
SECRET = new_secret()[0]


class Text(str):
    pass


class Number(float):
    pass


class Count(int):
    pass


IDS = [
    "j", "job-1", "a" * 255, "a" * 256, "", "a b", "é", "jöb", "a\x00", "a\n", "\u0378",
    "\ud800", Text("j"), 5, None, b"j",
]  # fmt: skip
GENERATIONS = [1, 7, MAX_GENERATION, MAX_GENERATION + 1, 0, -1, True, 1.0, Count(3), "1"]
TTLS = [
    60.0, 0.01, MAX_TTL, 0.009, MAX_TTL + 1, 60, math.nan, math.inf, -1.0, True,
    timedelta(seconds=5), "60", Number(60.0), 10**400,
]  # fmt: skip
SECRETS = [SECRET, SECRET.upper(), SECRET[:-1], SECRET + "0", "", Text(SECRET), 5, None]
ATTEMPTS = [1, 5, MAX_ATTEMPTS, MAX_ATTEMPTS + 1, 0, True, 1.0, Count(2)]
REALS = [
    1.0, -5.5, 0.0, 1e300, 1, math.nan, math.inf, -math.inf, True, "1", Number(1.0),
    10**400, None,
]  # fmt: skip
STORES = [STORE, Text(STORE), "t" * 32, 5, None]


def _by_the_rules(lease: object, store_id: str) -> object:
    """What `check_lease` answered before its shortcut: each rule in turn (the same order
    and the same argument names), the lease back (with a float ttl)."""
    if not isinstance(lease, Lease):
        raise InvalidArgument("lease", "not a lease")
    if not isinstance(lease.store_id, str) or lease.store_id != store_id:
        raise InvalidArgument("lease.store_id", "another store")
    validate_id("lease.job_id", lease.job_id)
    validate_id("lease.owner", lease.owner)
    validate_generation("lease.generation", lease.generation)
    ttl = validate_ttl(lease.ttl, "lease.ttl")
    validate_secret("lease.secret", lease.secret)
    validate_attempts(lease.attempt, "lease.attempt")
    validate_real("lease.lease_until", lease.lease_until)
    validate_real("lease.local_deadline", lease.local_deadline)
    return lease if type(lease.ttl) is float else dataclasses.replace(lease, ttl=ttl)


def _answer(check: Any, lease: object) -> tuple[str, object]:
    try:
        return "ok", check(lease, STORE)
    except InvalidArgument as exc:
        return "refused", exc.argument


def _lease(**fields: Any) -> Lease:
    base: dict[str, Any] = {
        "job_id": "job-1",
        "owner": "worker-1",
        "generation": 3,
        "lease_until": 1000.0,
        "ttl": 60.0,
        "attempt": 1,
        "local_deadline": 50.0,
        "secret": SECRET,
        "store_id": STORE,
    }
    return Lease(**{**base, **fields})


@given(
    st.tuples(
        st.sampled_from(IDS),
        st.sampled_from(IDS),
        st.sampled_from(GENERATIONS),
        st.sampled_from(REALS),
        st.sampled_from(TTLS),
        st.sampled_from(ATTEMPTS),
        st.sampled_from(REALS),
        st.sampled_from(SECRETS),
        st.sampled_from(STORES),
    )
)
@settings(max_examples=300)
def test_check_lease_answers_as_its_rules_one_by_one(fields: tuple[Any, ...]) -> None:
    lease = Lease(*fields)
    expected, actual = _answer(_by_the_rules, lease), _answer(check_lease, lease)
    assert actual[0] == expected[0]
    if expected[0] == "refused":
        assert actual[1] == expected[1]  # the same rule named
    else:
        assert actual[1] == expected[1]
        assert type(actual[1]) is Lease
        assert type(actual[1].ttl) is float  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("job_id", IDS),
        ("owner", IDS),
        ("generation", GENERATIONS),
        ("lease_until", REALS),
        ("ttl", TTLS),
        ("attempt", ATTEMPTS),
        ("local_deadline", REALS),
        ("secret", SECRETS),
        ("store_id", STORES),
    ],
)
def test_each_field_alone_on_both_sides_of_its_rule(field: str, values: list[Any]) -> None:
    for value in values:
        lease = _lease(**{field: value})
        expected, actual = _answer(_by_the_rules, lease), _answer(check_lease, lease)
        assert actual == expected, (field, value)
        if expected[0] == "ok" and type(lease.ttl) is float:
            assert actual[1] is lease  # handed back as it is, not a copy


def test_not_a_lease_nor_a_subclass_takes_the_shortcut() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Other(Lease):
        pass

    other = Other(**dataclasses.asdict(_lease()))
    assert check_lease(other, STORE) is other  # a Lease by isinstance, by the rules
    for thing in (None, "lease", dataclasses.asdict(_lease())):
        with pytest.raises(InvalidArgument) as caught:
            check_lease(thing, STORE)
        assert caught.value.argument == "lease"


def test_lease_maker_builds_the_lease_that_lease_init_builds() -> None:
    maker = LeaseMaker(STORE, LeaseTiming())
    row = JobRow(
        "J", "q", "leased", "A", 3, "hash", 105, 100.0, 2, 5, None, None, None, 1.0, 90.0,
    )  # fmt: skip
    built = maker.lease(row, "A", 30.0, SECRET, 10.0)
    expected = Lease(
        job_id="J", owner="A", generation=3, lease_until=105.0, ttl=30.0, attempt=2,
        local_deadline=LeaseTiming().local_deadline(10.0, 30.0), secret=SECRET, store_id=STORE,
    )  # fmt: skip
    assert type(built) is Lease
    assert type(built.lease_until) is float
    assert built == expected
    assert hash(built) == hash(expected)
    assert pickle.loads(pickle.dumps(built)) == expected
    assert dataclasses.astuple(built) == dataclasses.astuple(expected)
    assert repr(built) == repr(expected)
    assert SECRET not in repr(built)
    assert built.token == tenure.FencingToken("J", 3, STORE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.generation = 4  # type: ignore[misc]
    assert check_lease(built, STORE) is built
