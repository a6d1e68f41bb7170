"""The bad values of the conformance suite's bad-input tests: for each kind of argument,
the values every store must refuse (each with the same error, before any I/O)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction
from typing import Any

WEEK = 7 * 24 * 3600
MIB = 1024 * 1024


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _circular() -> Any:
    loop: list[Any] = []
    loop.append(loop)
    return loop


BAD_IDS: list[Any] = [
    "",
    "x" * 256,
    "é" * 256,
    "a\x00b",
    "\x00",
    "line\nbreak",
    "carriage\rreturn",
    "tab\there",
    "bell\x07",
    "escape\x1b[31m",
    "delete\x7f",
    "c1 control\x85",
    "\ud800",
    "lone \udfff surrogate",
    "pair\ud83d\ude00as surrogates",
    42,
    4.2,
    True,
    None,
    b"bytes",
    ["J"],
]
BAD_OPTIONAL_IDS = [value for value in BAD_IDS if value is not None]

BAD_TTLS: list[Any] = [
    0,
    0.0,
    -0.0,
    -1,
    -0.5,
    0.0099,
    WEEK + 0.001,
    WEEK * 2,
    1e300,
    10**400,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
    "10",
    "",
    None,
    b"10",
    [10],
    Decimal("10"),
    Fraction(10),
    complex(10, 0),
    dt.timedelta(0),
    dt.timedelta(milliseconds=9),
    dt.timedelta(days=7, microseconds=1),
    dt.timedelta(seconds=-10),
    dt.timedelta.max,
]
BAD_RENEW_TTLS = [value for value in BAD_TTLS if value is not None]

BAD_DELAYS: list[Any] = [
    -1,
    -0.001,
    -(10**400),
    10**400,
    1e300,
    366 * 24 * 3600 + 1,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    "5",
    None,
    Decimal("5"),
    dt.timedelta(days=367),
    dt.timedelta(seconds=-1),
]
BAD_RETRY_IN = [value for value in BAD_DELAYS if value is not None]

BAD_ATTEMPTS: list[Any] = [0, -1, 1_000_001, 10**30, 1.0, 2.5, True, "3", None, Decimal(3)]
BAD_LIMITS: list[Any] = [0, -1, 1001, 10**30, 1.0, True, False, "5", None, Decimal(5)]
BAD_QUEUES: list[Any] = [
    "default",
    "",
    b"default",
    [],
    (),
    None,
    5,
    ["ok", ""],
    ["x" * 256],
    ["nul\x00"],
    ["\ud800"],
    [None],
    [1],
    [b"q"],
    [f"q{i}" for i in range(65)],
]
BAD_JSON: list[Any] = [
    {1, 2},
    frozenset({1}),
    object(),
    float("nan"),
    float("inf"),
    float("-inf"),
    {"x": float("nan")},
    [1, [2, float("inf")]],
    {1: "int key"},
    {(1, 2): "tuple key"},
    {None: "None key"},
    {True: "bool key"},
    b"bytes",
    bytearray(b"bytes"),
    "\ud800",
    {"k": "lone \udfff"},
    {"\ud800": 1},
    _nested(100),
    _circular(),
    "a" * (MIB - 1),  # 1 MiB + 1 byte of JSON with the quotes
    ["é" * (MIB // 2)],
    10**5000,
    Decimal("1.5"),
    Fraction(1, 3),
    dt.datetime(2026, 1, 1),
    complex(1, 2),
    lambda: None,
    Ellipsis,
]
BAD_ERRORS: list[Any] = [None, 42, 1.5, object(), b"bytes", ["x"], {"e": 1}]
BAD_STATES: list[Any] = ["running", "", "READY", "leased ", 1, ["ready"]]
BAD_LEASE_VALUES: list[Any] = [None, "lease", 42, {"job_id": "L", "generation": 1}]
BAD_LEASE_LISTS: list[Any] = [None, "L", b"L", 42, {"L"}, iter([]), [None] * 1001]
BAD_RESULT_LISTS: list[Any] = ["r", b"r", 42, {"r"}, [], ["r", "s"]]
# Every field of a Lease handed back to a store, with values no claim could have produced:
# each is refused by the rule that made the field, naming it (issue #12: before, ttl=inf
# stranded the job, ttl=NaN broke each store differently, NUL reached PostgreSQL).
BAD_LEASE_FIELDS: dict[str, list[Any]] = {
    "job_id": [*BAD_IDS, "unassigned \U000e0080 code point"],
    "owner": [*BAD_IDS, "unassigned \u0378"],
    "generation": [0, -1, 2**63, 2**64, True, 1.0, "7", None],
    "ttl": BAD_RENEW_TTLS,
    "secret": [
        None,
        42,
        b"0" * 48,
        "",
        "0" * 47,
        "0" * 49,
        "A" * 48,  # hex, but not as a claim draws it
        "g" * 48,
        "\ud800" * 48,
        "0" * 47 + "\x00",
    ],
    "attempt": [0, -1, 1_000_001, True, 1.5, "1", None],
    "lease_until": [float("nan"), float("inf"), "100", None, True, 10**400],
    "local_deadline": [float("nan"), float("-inf"), "0", None, False],
    "store_id": [None, 42, "another-store", b"store"],
}

# issue #17: submit_many, wait, paged jobs()
BAD_JOB_LISTS: list[Any] = [
    None,
    "J",
    b"J",
    42,
    {"job_id": "n"},
    {"n"},
    iter([]),
    [{"job_id": "n"}] * 1001,
]
BAD_JOB_ITEMS: list[Any] = [None, "n", 42, ["n"], ("n", 1)]
BAD_CURSORS: list[Any] = ["", "abc", "-1", "1.5", " 1", "1 ", 12, b"12", "9" * 20, "²"]
# older_than (jobs, purge): 0 to 100 years, so 366 days and a bit are fine here.
BAD_OLDER_THAN = [
    v
    for v in BAD_DELAYS
    if v is not None and v not in (366 * 24 * 3600 + 1, dt.timedelta(days=367))
] + [100 * 366 * 24 * 3600 + 1]
BAD_CONNS: list[Any] = [42, "conn", b"x", object()]
