"""Signed fencing tokens (`tenure.fence.Keyring`, `SignedToken`), and what the SQL
destinations (SQLite, PostgreSQL) do with them before any fence moves. Without psycopg or a
reachable PostgreSQL server the PostgreSQL cases skip locally and fail in CI
(tests.backends)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import fence
from tenure.fence import Keyring, SignedToken
from tests.backends import POSTGRES_URL, postgres_admin

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
# On a SQLite and a PostgreSQL destination (a fresh file, a fresh schema), for each guard
# that takes a keyring: a token that does not verify, at the top generation, is refused
# with StaleToken before anything reaches the database (the tests hold the fence tables
# locked from another connection meanwhile: a statement sent to them would fail, not wait),
# the fence keeps its generation, and the real owner's next generation is accepted.

TOP = 2**63 - 1
LOCK_WAIT = 0.2  # seconds a destination connection waits for a lock (then fails)


def bad_tokens(ring: Keyring) -> dict[str, tuple[object, str]]:
    """Tokens of JOB at the top generation that ``ring`` refuses, and why."""
    real = ring.sign(token(8))
    return {
        "forged": (SignedToken(JOB, TOP, 0, "new", "A" * 43), "does not match"),
        "lifted": (SignedToken(JOB, TOP, real.issued_at, "new", real.signature), "does not match"),
        "other secret": (Keyring({"new": b"x" * 32}).sign(token(TOP)), "does not match"),
        "unknown key": (Keyring({"stranger": b"s" * 32}).sign(token(TOP)), "does not hold"),
        "unsigned": (token(TOP), "requires signed"),
    }


def in_transaction(conn: Any) -> bool:
    if isinstance(conn, sqlite3.Connection):
        return conn.in_transaction
    return conn.info.transaction_status != 0  # psycopg: 0 is idle


class Destination:
    """A fresh destination database with the fence tables: a SQLite file, or a PostgreSQL
    schema (each connection's search_path). Every connection is closed afterwards."""

    def __init__(
        self, dialect: str, opener: Callable[[], Any], lock_error: type[Exception]
    ) -> None:
        self.dialect = dialect
        self.lock_error = lock_error  # what a statement on a locked destination raises
        self._opener = opener
        self.opened: list[Any] = []
        fence.create_fence_table(self.connect())

    def connect(self) -> Any:
        conn = self._opener()
        self.opened.append(conn)
        return conn

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Another connection holds the fence tables (SQLite: the whole file) for the
        block: a guard's statement on them fails after LOCK_WAIT."""
        holder = self.connect()
        if self.dialect == "sqlite":
            holder.isolation_level = None
            holder.execute("BEGIN EXCLUSIVE")
        else:
            holder.execute("LOCK TABLE tenure_fence, tenure_effects IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            holder.rollback()


@pytest.fixture(params=["sqlite", "postgresql"])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Destination]:
    if request.param == "sqlite":
        path = tmp_path / "dest.db"
        dest = Destination(
            "sqlite", lambda: sqlite3.connect(path, timeout=LOCK_WAIT), sqlite3.OperationalError
        )
        yield dest
        for conn in dest.opened:
            conn.close()
        return
    admin = postgres_admin()  # (or `unavailable`: no psycopg, no server)
    import psycopg

    schema = f"fence_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE SCHEMA "{schema}"')
    options = f"-c search_path={schema} -c lock_timeout={round(LOCK_WAIT * 1000)}"
    dest = Destination(
        "postgresql",
        lambda: psycopg.connect(POSTGRES_URL, options=options),
        psycopg.errors.LockNotAvailable,
    )
    yield dest
    for conn in dest.opened:
        conn.close()
    admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    admin.close()


@pytest.mark.parametrize("guard", ["sql_fence", "advance_fence", "apply_once"])
def test_the_lock_stops_whatever_reaches_the_destination(
    ring: Keyring, destination: Destination, guard: str
) -> None:
    # What makes the locked checks below mean something: a token that verifies does reach
    # the database, and fails there while the destination is locked.
    conn = destination.connect()
    signed = ring.sign(token(7))
    attempts: dict[str, Callable[[], object]] = {
        "sql_fence": lambda: fence.sql_fence(conn, signed, keyring=ring).__enter__(),
        "advance_fence": lambda: fence.advance_fence(conn, signed, keyring=ring),
        "apply_once": lambda: fence.apply_once(conn, signed, "k", lambda cur: None, keyring=ring),
    }
    with destination.locked(), pytest.raises(destination.lock_error):
        attempts[guard]()
    conn.rollback()
    assert fence.fence_generation(conn, JOB) is None


def refuse_every_bad_token(
    ring: Keyring, destination: Destination, conn: Any, attempt: Callable[[object], object]
) -> None:
    """``attempt(token)`` refuses every bad token with StaleToken, the destination locked
    meanwhile (nothing may reach it), and leaves ``conn`` with no transaction open."""
    with destination.locked():
        for what, (bad, why) in bad_tokens(ring).items():
            with pytest.raises(tenure.StaleToken, match=why) as caught:
                attempt(bad)
            assert (caught.value.job_id, caught.value.generation) == (JOB, TOP), what
            assert not in_transaction(conn), what


def test_sql_fence_verifies_before_the_fence_moves(ring: Keyring, destination: Destination) -> None:
    conn = destination.connect()
    ran: list[int] = []

    def write(value: Any, keyring: Keyring | None = ring) -> None:
        with fence.sql_fence(conn, value, keyring=keyring):
            ran.append(value.generation)

    write(ring.sign(token(7)))
    refuse_every_bad_token(ring, destination, conn, write)
    assert ran == [7]  # no block ran for them
    assert fence.fence_generation(conn, JOB) == 7  # the forged generation never landed
    write(ring.sign(token(8)))  # the real owner goes on
    assert (ran, fence.fence_generation(conn, JOB)) == ([7, 8], 8)
    # Without a keyring a signed token is just its plain token.
    write(ring.sign(token(9)), keyring=None)
    assert fence.fence_generation(conn, JOB) == 9


@pytest.mark.parametrize("guard", ["advance_fence", "record_effect"])
def test_guards_in_the_callers_transaction_verify_before_the_fence_moves(
    ring: Keyring, destination: Destination, guard: str
) -> None:
    conn = destination.connect()

    def advance(value: object) -> None:  # first in a transaction of the caller's
        if guard == "advance_fence":
            fence.advance_fence(conn, value, keyring=ring)
        else:
            fence.record_effect(conn, value, "invoice:1", keyring=ring)

    advance(ring.sign(token(7)))
    conn.commit()
    refuse_every_bad_token(ring, destination, conn, advance)
    conn.commit()  # a caller that commits anyway commits nothing of the bad tokens
    assert fence.fence_generation(conn, JOB) == 7
    advance(ring.sign(token(8)))
    conn.commit()
    assert fence.fence_generation(conn, JOB) == 8


def test_apply_once_verifies_before_the_fence_moves(
    ring: Keyring, destination: Destination
) -> None:
    conn = destination.connect()
    ran: list[str] = []

    def apply(value: object, key: str) -> fence.EffectResult:
        def effect(cur: Any) -> str:
            ran.append(key)
            return key

        return fence.apply_once(conn, value, key, effect, keyring=ring)

    assert apply(ring.sign(token(7)), "invoice:1").applied
    refuse_every_bad_token(ring, destination, conn, lambda bad: apply(bad, "invoice:2"))
    assert ran == ["invoice:1"]  # no effect ran for them
    assert fence.fence_generation(conn, JOB) == 7
    assert fence.effect_generation(conn, JOB, "invoice:2") is None  # nor was recorded
    done = apply(ring.sign(token(8)), "invoice:2")  # the real owner goes on
    assert (done.applied, done.generation, done.value) == (True, 8, "invoice:2")
    again = apply(ring.sign(token(8)), "invoice:1")  # applied before, by generation 7
    assert (again.applied, again.generation) == (False, 7)
    assert ran == ["invoice:1", "invoice:2"]
    assert fence.fence_generation(conn, JOB) == 8
