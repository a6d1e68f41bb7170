"""Frozen values: FencingToken, Lease, Job (pure)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenure
from tenure import FencingToken, InvalidArgument

VALID_IDS = st.text(st.characters(exclude_categories=("Cc", "Cs", "Cn")), min_size=1, max_size=255)
GENERATIONS = st.integers(1, 2**63 - 1)


@given(VALID_IDS, GENERATIONS)
def test_token_round_trip(job_id: str, generation: int) -> None:
    token = FencingToken(job_id, generation)
    text = str(token)
    assert text.isascii()
    assert " " not in text
    assert FencingToken.parse(text) == token


@pytest.mark.parametrize(
    ("token", "text"),
    [
        (FencingToken("J", 7), "7:J"),
        (FencingToken("report 42", 8), "8:report%2042"),
        (FencingToken("a:b/c", 1), "1:a%3Ab%2Fc"),
        (FencingToken("é", 2**63 - 1), "9223372036854775807:%C3%A9"),
    ],
)
def test_token_text_form(token: FencingToken, text: str) -> None:
    assert str(token) == text
    assert FencingToken.parse(text) == token


@pytest.mark.parametrize(
    "text",
    [
        "",
        "7",
        ":J",
        "J:7",
        "x:J",
        "-1:J",
        "+1:J",
        "0:J",
        "7:",
        "7:%00",
        "7:a%0Ab",
        "9223372036854775808:J",
        " 7:J",
    ],
)
def test_token_parse_refuses(text: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        FencingToken.parse(text)
    assert caught.value.argument.startswith("token")


@pytest.mark.parametrize("text", ["7:%FF", "\u00b2:J", "\u0663:J"])
def test_token_parse_refuses_non_ascii_digits_and_bad_utf8(text: str) -> None:
    with pytest.raises(InvalidArgument):
        FencingToken.parse(text)


def test_token_is_hashable_and_frozen() -> None:
    token = FencingToken("J", 1)
    assert {token: 1}[FencingToken("J", 1)] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        token.generation = 2  # type: ignore[misc]


def lease(**changes: Any) -> tenure.Lease:
    base = tenure.Lease(
        job_id="J",
        owner="A",
        generation=3,
        lease_until=100.0,
        ttl=10.0,
        attempt=1,
        local_deadline=50.0,
        secret="s3cret-value",
        store_id="store",
    )
    return dataclasses.replace(base, **changes)


def test_lease_hides_its_secret() -> None:
    value = lease()
    assert "s3cret-value" not in repr(value)
    assert "s3cret-value" not in str(value.token)
    assert value.token == FencingToken("J", 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.generation = 4  # type: ignore[misc]


def job(**changes: Any) -> tenure.Job:
    base = tenure.Job(
        job_id="J",
        queue="default",
        state="leased",
        owner="A",
        generation=1,
        lease_until=100.0,
        attempts=1,
        max_attempts=5,
        payload={"p": 1},
        result=None,
        error=None,
        available_at=100.0,
        created_at=0.0,
        updated_at=90.0,
        as_of=99.0,
    )
    return dataclasses.replace(base, **changes)


def test_job_lease_expired() -> None:
    assert not job().lease_expired
    assert job(as_of=100.0).lease_expired  # at lease_until: expired
    assert job(as_of=101.0).lease_expired
    assert not job(state="ready", lease_until=None, as_of=500.0).lease_expired
    assert not job(state="done", as_of=500.0).lease_expired


def test_job_to_dict() -> None:
    data = job().to_dict()
    assert data["job_id"] == "J"
    assert data["payload"] == {"p": 1}
    assert data["lease_expired"] is False
    assert set(data) >= {f.name for f in dataclasses.fields(tenure.Job)}


def test_job_from_row_builds_the_job_that_job_init_builds() -> None:
    # job_from_row fills Job's slots through their descriptors (faster than the frozen
    # dataclass's __init__): the value must be the very Job the constructor makes.
    import pickle

    from tenure._protocol import JobRow, job_from_row
    from tenure.models import JobHeaders

    row = JobRow(
        "J", "q", "leased", "A", 3, "hash", 105.0, 100.0, 2, 5, '{"p":[1]}', "7", "boom",
        1.0, 90.0, -4, 30.0, "key", '{"traceparent":"00-x"}',
    )  # fmt: skip
    built = job_from_row(row, 99.0, created=False)
    expected = tenure.Job(
        job_id="J", queue="q", state=tenure.JobState.LEASED, owner="A", generation=3,
        lease_until=105.0, attempts=2, max_attempts=5, payload={"p": [1]}, result=7,
        error="boom", available_at=100.0, created_at=1.0, updated_at=90.0, as_of=99.0,
        created=False, priority=-4, timeout=30.0, unique_key="key",
        headers=JobHeaders({"traceparent": "00-x"}),
    )  # fmt: skip
    assert type(built) is tenure.Job
    assert built == expected
    assert pickle.loads(pickle.dumps(built)) == expected
    assert dataclasses.astuple(built) == dataclasses.astuple(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.generation = 4  # type: ignore[misc]
    plain = job_from_row(row._replace(lease_until=None, timeout=None, headers=None), 99.0)
    assert (plain.lease_until, plain.timeout, plain.headers, plain.created) == (
        None, None, JobHeaders(), None,
    )  # fmt: skip
