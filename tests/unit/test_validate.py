"""The argument rules of docs/design.md §6, on their own (pure)."""

from __future__ import annotations

import json
import math
import unicodedata
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure import InvalidArgument
from tenure._validate import (
    DEFAULT_PAYLOAD_LIMIT,
    MAX_GENERATION,
    decode_json,
    encode_json,
    error_text,
    validate_attempts,
    validate_delay,
    validate_generation,
    validate_id,
    validate_limit,
    validate_queues,
    validate_ttl,
)


def refused(argument: str, call: Any, *args: Any, **kwargs: Any) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        call(*args, **kwargs)
    assert caught.value.argument == argument
    assert str(caught.value).startswith(f"{argument}: ")
    return caught.value


# -- ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["a", "x" * 255, "with space", "é" * 255, "😀", "a:b/c%d", "\u2028"]
)
def test_valid_ids(value: str) -> None:
    assert validate_id("job_id", value) is value


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "empty"),
        ("x" * 256, "at most 255 characters, got 256"),
        ("a\x00b", "control characters ('\\x00' at 1)"),
        ("\n", "control characters"),
        ("ok\x7f", "control characters ('\\x7f' at 2)"),
        ("\x9f", "control characters"),
        ("ab\ud800", "lone surrogate at 2"),
        (42, "must be a str, not int"),
        (None, "must be a str, not NoneType"),
        (b"id", "must be a str, not bytes"),
    ],
)
def test_invalid_ids(value: Any, words: str) -> None:
    error = refused("owner", validate_id, "owner", value)
    assert words in error.rule


@given(st.text(max_size=300))
def test_ids_accepted_exactly_when_the_rule_says(value: str) -> None:
    allowed = 1 <= len(value) <= 255 and not any(
        unicodedata.category(char) in ("Cc", "Cs", "Cn") for char in value
    )
    if allowed:
        assert validate_id("queue", value) == value
    else:
        refused("queue", validate_id, "queue", value)


# -- seconds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(0.01, 0.01), (1, 1.0), (30.5, 30.5), (604800, 604800.0), (timedelta(minutes=1), 60.0)],
)
def test_valid_ttls(value: Any, seconds: float) -> None:
    result = validate_ttl(value)
    assert result == seconds
    assert type(result) is float


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        0.00999,
        604800.001,
        math.nan,
        math.inf,
        -math.inf,
        True,
        "1",
        None,
        10**400,
        timedelta(0),
        timedelta(days=8),
    ],
)
def test_invalid_ttls(value: Any) -> None:
    error = refused("ttl", validate_ttl, value)
    assert "seconds" in error.rule


def test_ttl_rule_states_the_range() -> None:
    error = refused("ttl", validate_ttl, 0)
    assert "0.01" in error.rule
    assert "7 days" in error.rule
    assert "got 0" in error.rule


def test_delays() -> None:
    assert validate_delay(0) == 0.0
    assert validate_delay(timedelta(days=366)) == 366 * 86400.0
    for bad in (-0.1, math.nan, math.inf, True, "0", 366 * 86400 + 1, -(10**400)):
        refused("retry_in", validate_delay, bad, "retry_in")


def test_attempts_limits_generations() -> None:
    assert validate_attempts(1) == 1
    assert validate_attempts(1_000_000) == 1_000_000
    for bad in (0, -1, 1_000_001, 1.0, True, "2", None):
        refused("max_attempts", validate_attempts, bad)
    assert validate_limit(1) == 1
    assert validate_limit(1000) == 1000
    for bad in (0, 1001, 2.0, False, None):
        refused("limit", validate_limit, bad)
    assert validate_generation("g", MAX_GENERATION) == 2**63 - 1
    for bad in (0, -1, MAX_GENERATION + 1, 1.0, True, "1"):
        refused("g", validate_generation, "g", bad)


def test_queues() -> None:
    assert validate_queues(["a", "b", "a"]) == ("a", "b")  # order kept, duplicates dropped
    assert validate_queues(("x",)) == ("x",)
    assert validate_queues(q for q in ["g"]) == ("g",)
    assert "bare string" in refused("queues", validate_queues, "default").rule
    refused("queues", validate_queues, b"default")
    refused("queues", validate_queues, [])
    refused("queues", validate_queues, None)
    refused("queues", validate_queues, [f"q{i}" for i in range(65)])
    assert len(validate_queues([f"q{i}" for i in range(64)])) == 64
    refused("queues item", validate_queues, ["ok", ""])


# -- JSON ------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=5), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@given(JSON)
def test_json_round_trip(value: Any) -> None:
    text = encode_json("payload", value)
    if value is None:
        assert text is None
        return
    assert text is not None
    assert decode_json(text) == value
    assert json.loads(text) == value


def test_json_is_compact_utf8() -> None:
    assert encode_json("payload", {"a": [1, "é"]}) == '{"a":[1,"é"]}'
    assert decode_json(None) is None


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({1, 2}, "got an instance of set: convert it first"),
        (object(), "got an instance of object:"),
        (datetime(2026, 1, 1), "got an instance of datetime.datetime"),  # module named
        (math.nan, "no JSON form"),
        ([math.inf], "no JSON form"),
        ({1: "x"}, "keys must be str"),
        ("\ud800", "lone surrogate"),
        ({"k": ["\udfff"]}, "lone surrogate"),
        pytest.param(10**5000, "JSON", id="5001-digit-int"),
        (b"x", "bytes"),
    ],
)
def test_json_refusals(value: Any, words: str) -> None:
    assert words in refused("result", encode_json, "result", value).rule


def test_json_depth_and_cycles() -> None:
    deep: Any = 1
    for _ in range(64):
        deep = [deep]
    assert encode_json("payload", deep) is not None
    assert "deeper" in refused("payload", encode_json, "payload", [deep]).rule
    loop: list[Any] = []
    loop.append(loop)
    refused("payload", encode_json, "payload", loop)


def test_json_size_limit() -> None:
    limit = DEFAULT_PAYLOAD_LIMIT
    assert limit == 1024 * 1024
    assert encode_json("payload", "a" * (limit - 2)) is not None
    error = refused("payload", encode_json, "payload", "a" * (limit - 1))
    assert f"at most {limit} bytes" in error.rule
    assert f"got {limit + 1}" in error.rule
    refused("payload", encode_json, "payload", "é" * (limit // 2))  # counted in UTF-8 bytes
    assert encode_json("payload", "abc", limit=5) == '"abc"'
    refused("payload", encode_json, "payload", "abcd", limit=5)


# -- error texts -----------------------------------------------------------------------------


def test_error_text() -> None:
    assert error_text("plain") == "plain"
    assert error_text(ValueError("bad value")) == "ValueError: bad value"
    assert error_text("nul\x00 and \ud800") == "nul\ufffd and ?"
    long = error_text("x" * 100_000)
    assert 16_000 < len(long) <= 16_384
    assert long.endswith("…[truncated]")
    for bad in (None, 42, b"x", ["e"]):
        assert "str or an exception" in refused("error", error_text, bad).rule


@pytest.mark.parametrize(
    ("option", "value"),
    [("timing", 0.5), ("clock", "x"), ("store_clock", "x"), ("retry_policy", 1), ("rng", 1)],
)
def test_connect_refuses_an_option_of_the_wrong_kind_before_opening_the_store(
    tmp_path: Any, option: str, value: object
) -> None:
    # `timing=0.5` was taken: the first claim leased a job and then failed, leaving it
    # leased under a secret nobody held until its lease ran out.
    import anyio

    import tenure
    import tenure.aio

    path = tmp_path / "never.db"
    url = f"sqlite:///{path}"
    with pytest.raises(InvalidArgument) as caught:
        tenure.connect(url, **{option: value})
    assert caught.value.argument == option
    with pytest.raises(InvalidArgument) as caught:
        anyio.run(lambda: tenure.aio.connect(url, **{option: value}))
    assert caught.value.argument == option
    assert not path.exists()
    if option != "store_clock":  # (a store built on a driver has none)
        with tenure.connect(f"sqlite:///{tmp_path / 'other.db'}") as store:
            with pytest.raises(InvalidArgument) as caught:
                tenure.Store(store._driver, **{option: value})
            assert caught.value.argument == option
