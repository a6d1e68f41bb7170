"""Signed fencing tokens (`tenure.fence.Keyring`, `SignedToken`), and what the destinations
do with them before any fence moves."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence
from tenure.fence import Keyring, SignedToken

OLD = b"old-secret-0123456789abcdef"
NEW = b"new-secret-0123456789abcdef"
JOB = "job/ä 1"


@pytest.fixture
def ring(clock: tenure.ManualClock) -> Keyring:  # the suite's clock, at 1_700_000_000.0
    return Keyring({"new": NEW, "old": OLD}, current="new", clock=clock)


def token(generation: int = 7, job: str = JOB) -> tenure.FencingToken:
    return tenure.FencingToken(job, generation)


def refused(ring: Keyring, value: Any) -> str:
    with pytest.raises(tenure.StaleToken) as caught:
        ring.verify(value)
    return str(caught.value)


def test_sign_and_verify(ring: Keyring, clock: tenure.ManualClock) -> None:
    signed = ring.sign(token())
    assert (signed.job_id, signed.generation, signed.key_id) == (JOB, 7, "new")
    assert signed.issued_at == 1_700_000_000_000
    assert len(signed.signature) == 43
    assert ring.verify(signed) == token()
    assert signed.token == token()


def test_the_signature_covers_every_field(ring: Keyring) -> None:
    signed = ring.sign(token(7))
    fields = {
        "forged generation": SignedToken(JOB, 2**63 - 1, signed.issued_at, "new", signed.signature),
        "older generation": SignedToken(JOB, 6, signed.issued_at, "new", signed.signature),
        "cross-job": SignedToken("another job", 7, signed.issued_at, "new", signed.signature),
        "issue time": SignedToken(JOB, 7, signed.issued_at + 1, "new", signed.signature),
        "key id": SignedToken(JOB, 7, signed.issued_at, "old", signed.signature),
    }
    for what, altered in fields.items():
        assert "does not match" in refused(ring, altered), what


def test_truncated_and_garbled_signatures(ring: Keyring) -> None:
    signed = ring.sign(token())
    with pytest.raises(tenure.InvalidArgument, match="43 characters"):
        SignedToken.build(JOB, 7, signed.issued_at, "new", signed.signature[:-1])
    with pytest.raises(tenure.InvalidArgument):
        SignedToken.parse(str(signed)[:-5])  # a truncated compact token
    flipped = signed.signature[:-1] + ("A" if signed.signature[-1] != "A" else "B")
    assert "does not match" in refused(ring, SignedToken(JOB, 7, signed.issued_at, "new", flipped))


def test_unsigned_and_unknown_keys_are_refused(ring: Keyring) -> None:
    assert "requires signed tokens" in refused(ring, token())
    other = Keyring({"stranger": b"s" * 32})
    assert "does not hold" in refused(ring, other.sign(token()))
    same_id_other_secret = Keyring({"new": b"x" * 32})
    assert "does not match" in refused(ring, same_id_other_secret.sign(token()))


def test_rotation_old_tokens_verify_until_the_old_key_is_removed(clock: tenure.ManualClock) -> None:
    before = Keyring({"old": OLD}, clock=clock)
    old_token = before.sign(token())
    during = Keyring({"new": NEW, "old": OLD}, current="new", clock=clock)
    assert during.verify(old_token) == token()
    assert during.sign(token()).key_id == "new"
    # Why destinations get the new key first: one that has only the old key refuses it.
    assert "does not hold" in refused(before, during.sign(token()))
    after = Keyring({"new": NEW}, clock=clock)
    assert "does not hold" in refused(after, old_token)
    assert after.verify(during.sign(token())) == token()


def test_max_age_is_optional_and_clock_based(clock: tenure.ManualClock) -> None:
    signer = Keyring({"k": NEW}, clock=clock)
    checker = Keyring({"k": NEW}, clock=clock, max_age=60)
    signed = signer.sign(token())
    clock.advance(59)
    assert checker.verify(signed) == token()
    clock.advance(2)
    assert "max_age" in refused(checker, signed)
    assert Keyring({"k": NEW}, clock=clock).verify(signed) == token()  # no max_age: fine
    future = signer.sign(token(), issued_at=round((clock.time() + 3600) * 1000))
    assert "max_age" in refused(checker, future)


def test_compact_form_round_trips(ring: Keyring) -> None:
    signed = ring.sign(token())
    text = str(signed)
    assert text.startswith("7:job%2F%C3%A4%201;t=")
    assert SignedToken.parse(text) == signed
    sig = "s=" + "A" * 43
    for bad in (
        "7:job",
        "7:job;t=1;k=new",
        "7:job;t=1;k=new;s=x;s=y",
        "7:job;x=1;k=a;s=b",
        f"7:%FF;t=1;k=a;{sig}",
        f"\u0663:job;t=1;k=a;{sig}",
        f"7:job;t=\u0663;k=a;{sig}",
    ):
        with pytest.raises(tenure.InvalidArgument):
            SignedToken.parse(bad)


@pytest.mark.parametrize(
    ("keys", "options", "argument"),
    [
        ({}, {}, "keys"),
        ({"k": b"short"}, {}, "keys['k']"),
        ({"bad id!": b"x" * 16}, {}, "keys"),
        ({"k": 12345}, {}, "keys['k']"),
        ({"a": b"x" * 16, "b": b"y" * 16}, {}, "current"),
        ({"a": b"x" * 16}, {"current": "b"}, "current"),
        ({"a": b"x" * 16}, {"max_age": 0}, "max_age"),
        ({"a": b"x" * 16}, {"max_age": "60"}, "max_age"),
        ({"a": b"x" * 16}, {"max_age": float("nan")}, "max_age"),
        ({"k": "\ud800" * 40}, {}, "keys['k']"),  # a lone surrogate has no UTF-8
        ({"k": b"x" * 16}, {"current": ["k"]}, "current"),
        ({"k": b"x" * 16}, {"current": 1}, "current"),
        ({"k": b"x" * 16}, {"clock": "c"}, "clock"),
        ({"k": b"x" * 16}, {"clock": object()}, "clock"),
    ],
)
def test_bad_keyrings(keys: Any, options: dict[str, Any], argument: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        Keyring(keys, **options)
    assert caught.value.argument == argument


@pytest.mark.parametrize(
    ("specs", "options", "argument"),
    [
        (42, {}, "specs"),
        (None, {}, "specs"),
        (b"k=0123456789abcdef", {}, "specs"),
        ([b"k=0123456789abcdef"], {}, "specs"),
        (["k=0123456789abcdef", 5], {}, "specs"),
        (["k"], {}, "key"),
        ([], {}, "key"),
        ("k=0123456789abcdef", {"max_age": -1}, "max_age"),
        ("k=0123456789abcdef", {"clock": "c"}, "clock"),
    ],
)
def test_bad_keyring_specs(specs: Any, options: dict[str, Any], argument: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        Keyring.parse(specs, **options)
    assert caught.value.argument == argument


@pytest.mark.parametrize("issued_at", [1.5, "1", True, -1, 2**53 + 1, 2**80, float("nan")])
def test_bad_issue_times(ring: Keyring, issued_at: Any) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        ring.sign(token(), issued_at=issued_at)
    assert caught.value.argument == "issued_at"
    assert ring.sign(token(), issued_at=0).issued_at == 0  # the bounds still sign
    assert ring.sign(token(), issued_at=2**53).issued_at == 2**53


@pytest.mark.parametrize(
    ("field", "value", "argument"),
    [
        ("issued_at", 1.5, "token issued_at"),
        ("issued_at", "12", "token issued_at"),
        ("key_id", ["new"], "token key_id"),
        ("signature", None, "token signature"),
    ],
)
def test_hand_made_signed_tokens_are_checked(
    ring: Keyring, field: str, value: Any, argument: str
) -> None:
    fields = {"issued_at": 0, "key_id": "new", "signature": "A" * 43, field: value}
    forged = SignedToken(JOB, 7, **fields)
    with pytest.raises(tenure.InvalidArgument) as caught:
        ring.check(forged)
    assert caught.value.argument == argument


def test_secrets_never_show(ring: Keyring) -> None:
    assert "secret" not in repr(ring)
    assert repr(ring) == "Keyring(keys=['new', 'old'], current='new')"
    parsed = Keyring.parse("a=0123456789abcdef, b=fedcba9876543210")
    assert (parsed.current, parsed.key_ids) == ("a", ("a", "b"))
    with pytest.raises(tenure.InvalidArgument):
        Keyring.parse("a=0123456789abcdef a=0123456789abcdef")


# -- a destination verifies before it raises its highest-seen generation ----------------


def test_sql_fence_verifies_before_the_fence_moves(ring: Keyring, tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "dest.db")
    with fence.sql_fence(conn, ring.sign(token(7)), keyring=ring):
        pass
    forged = SignedToken(JOB, 2**63 - 1, 0, "new", "A" * 43)
    with pytest.raises(tenure.StaleToken, match="does not match"):
        fence.sql_fence(conn, forged, keyring=ring)
    with pytest.raises(tenure.StaleToken, match="requires signed"):
        fence.sql_fence(conn, token(2**63 - 1), keyring=ring)
    assert fence.fence_generation(conn, JOB) == 7  # the forged generation never landed
    with fence.sql_fence(conn, ring.sign(token(8)), keyring=ring):  # the real owner goes on
        pass
    assert fence.fence_generation(conn, JOB) == 8
    # Without a keyring a signed token is just its plain token.
    with fence.sql_fence(conn, ring.sign(token(9))):
        pass
    assert fence.fence_generation(conn, JOB) == 9
    conn.close()
