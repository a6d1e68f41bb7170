"""Signed fencing tokens: an HMAC-SHA256 over (key id, job, generation, issue time).

A fenced destination that cannot ask the lease store whether a token is real must not
trust a generation just because a request carries it: a forged token with generation
2**63-1 would raise the destination's highest-seen generation to the top and fence out the
real owner for good. With a `Keyring` configured on both sides, the sender signs each token
and the destination verifies the signature *before* it raises anything; a token that does
not verify is refused and changes nothing.

What the signature covers, as UTF-8 text joined by ``\\n``::

    tenure-fence-v1
    <key id>
    <job id, percent-encoded (RFC 3986, nothing left unescaped but unreserved characters)>
    <generation, decimal>
    <issued-at, integer milliseconds since the epoch, decimal>

Safety never depends on clocks. The issue time is the signer's wall clock and only serves
an optional ``max_age`` (a hygiene limit on how long a captured token can be replayed; the
comparison uses the destination's clock, so it is as good as the two clocks' agreement).
What makes an old token useless is fencing itself: once a newer generation was accepted,
every older token is refused, signed or not.

Key rotation: a keyring holds several keys by id; it signs with ``current`` and verifies
with any of them. Rotate by (1) adding the new key to every destination, (2) switching the
signers' ``current`` to it, (3) removing the old key from destinations once no token signed
with it can matter any more (after the longest lease plus ``max_age``, if any).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote

from .._clock import Clock, SystemClock
from .._validate import validate_generation, validate_id
from ..errors import InvalidArgument, StaleToken
from ..models import FencingToken

__all__ = ["Keyring", "SignedToken", "TokenCheck", "validate_keyring"]

_DOMAIN = "tenure-fence-v1"
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SIGNATURE = re.compile(r"[A-Za-z0-9_-]{43}")  # base64url of 32 bytes, without padding
MIN_KEY_BYTES = 16
MAX_ISSUED_AT = 2**53  # milliseconds: far beyond any real clock, exact in a float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _message(key_id: str, job_id: str, generation: int, issued_at: int) -> bytes:
    job = quote(job_id, safe="")
    text = f"{_DOMAIN}\n{key_id}\n{job}\n{generation:d}\n{issued_at:d}"
    return text.encode("utf-8")


def validate_key_id(value: object, argument: str = "key_id") -> str:
    if not isinstance(value, str) or not _KEY_ID.fullmatch(value):
        raise InvalidArgument(
            argument, f"must be 1-64 characters of A-Z a-z 0-9 . _ -, got {value!r}"
        )
    return value


def validate_issued_at(value: object, argument: str = "issued_at") -> int:
    """An issue time: an int of milliseconds since the epoch, from 0 to 2**53."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ISSUED_AT:
        shown = value if type(value) is int else type(value).__name__
        raise InvalidArgument(
            argument, f"must be an int of milliseconds from 0 to 2**53, not {shown}"
        )
    return value


def _secret(key_id: str, value: object) -> bytes:
    if isinstance(value, str):
        try:
            value = value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(
                f"keys[{key_id!r}]", "must be valid Unicode text (it has a lone surrogate)"
            ) from None
    if not isinstance(value, (bytes, bytearray)):
        raise InvalidArgument(
            f"keys[{key_id!r}]", f"must be bytes or str, not {type(value).__name__}"
        )
    if len(value) < MIN_KEY_BYTES:
        raise InvalidArgument(
            f"keys[{key_id!r}]",
            f"must be at least {MIN_KEY_BYTES} bytes of secret (use e.g. "
            f"secrets.token_urlsafe(32)), got {len(value)}",
        )
    return bytes(value)


@dataclass(frozen=True, slots=True)
class SignedToken:
    """A fencing token with the signer's key id, issue time and HMAC.

    ``str(token)`` is the compact form for transports other than HTTP headers
    (``<generation>:<percent-encoded job>;t=<issued-at ms>;k=<key id>;s=<signature>``);
    `SignedToken.parse` reads it back. Parsing checks the form, never the signature: only
    `Keyring.verify` (or a destination configured with a keyring) does that.
    """

    job_id: str
    generation: int
    issued_at: int  # milliseconds since the epoch, by the signer's clock
    key_id: str
    signature: str  # base64url (no padding) HMAC-SHA256 of the fields

    @property
    def token(self) -> FencingToken:
        """The plain token (job and generation), without any proof it is genuine."""
        return FencingToken(self.job_id, self.generation)

    def __str__(self) -> str:
        return f"{self.token};t={self.issued_at:d};k={self.key_id};s={self.signature}"

    @classmethod
    def parse(cls, text: str) -> SignedToken:
        if not isinstance(text, str):
            raise InvalidArgument("token", f"must be a str, not {type(text).__name__}")
        base, *fields = text.split(";")
        values: dict[str, str] = {}
        for item in fields:
            name, sep, value = item.partition("=")
            if not sep or name not in ("t", "k", "s") or name in values:
                raise InvalidArgument(
                    "token", "must look like '<generation>:<job>;t=<ms>;k=<key id>;s=<sig>'"
                )
            values[name] = value
        if set(values) != {"t", "k", "s"}:
            raise InvalidArgument("token", "is not signed (needs ;t=...;k=...;s=...)")
        if not base.partition(":")[0].isascii():
            raise InvalidArgument("token", "the generation must be ASCII digits")
        try:
            plain = FencingToken.parse(base)
        except InvalidArgument:
            raise
        except ValueError as exc:  # bad UTF-8 escapes, non-ASCII digits
            raise InvalidArgument("token", f"must look like '<generation>:<job>': {exc}") from None
        return cls.build(plain.job_id, plain.generation, values["t"], values["k"], values["s"])

    @classmethod
    def build(
        cls, job_id: str, generation: int, issued_at: object, key_id: object, signature: object
    ) -> SignedToken:
        """Check the form of each field (raises `InvalidArgument`); not the signature.
        ``issued_at`` may be given as its decimal digits (as a header carries it)."""
        if isinstance(issued_at, str):
            if not issued_at.isdigit() or not issued_at.isascii() or len(issued_at) > 16:
                raise InvalidArgument("token issued_at", "must be milliseconds, in digits")
            issued_at = int(issued_at)
        return cls(job_id, generation, issued_at, key_id, signature)._checked()  # type: ignore[arg-type]

    def _checked(self) -> SignedToken:
        """This token, if each field has its form (raises `InvalidArgument`)."""
        validate_id("token job_id", self.job_id)
        validate_generation("token generation", self.generation)
        validate_issued_at(self.issued_at, "token issued_at")
        validate_key_id(self.key_id, "token key_id")
        if not isinstance(self.signature, str) or not _SIGNATURE.fullmatch(self.signature):
            raise InvalidArgument(
                "token signature", "must be 43 characters of base64url (HMAC-SHA256)"
            )
        return self


@dataclass(frozen=True, slots=True)
class TokenCheck:
    """Why a destination refused a token, before any fence was consulted (internal to the
    destinations: `kind` is one of ``unsigned``, ``unknown-key``, ``bad-signature``,
    ``expired``)."""

    kind: str
    detail: str
    job_id: str
    generation: int

    def error(self) -> StaleToken:
        return StaleToken(
            f"token for job {self.job_id!r} generation {self.generation} refused: "
            f"{self.detail}. Nothing was written.",
            job_id=self.job_id,
            generation=self.generation,
        )


class Keyring:
    """Keys to sign fencing tokens with (``current``) and to verify them (all of them).

    ``keys`` maps key ids (1-64 characters of ``A-Za-z0-9._-``) to secrets of at least 16
    bytes (``str`` secrets are UTF-8 encoded). ``current`` defaults to the only key, and
    must be named when there are several. ``max_age`` (seconds, optional) refuses tokens
    issued longer ago than that by the verifier's ``clock``, or as far in its future; it
    limits replays of captured tokens and is not needed for fencing to be safe.
    """

    def __init__(
        self,
        keys: Mapping[str, bytes | str],
        *,
        current: str | None = None,
        max_age: float | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(keys, Mapping) or not keys:
            raise InvalidArgument("keys", "must be a non-empty mapping of key id -> secret")
        self._keys = {validate_key_id(k, "keys"): _secret(k, v) for k, v in keys.items()}
        if current is None:
            if len(self._keys) != 1:
                raise InvalidArgument(
                    "current", "must name the signing key when the keyring has several"
                )
            current = next(iter(self._keys))
        if not isinstance(current, str) or current not in self._keys:
            raise InvalidArgument("current", f"must be one of the key ids, got {current!r}")
        self.current = current
        if max_age is not None:
            if isinstance(max_age, bool) or not isinstance(max_age, (int, float)):
                raise InvalidArgument("max_age", "must be a number of seconds or None")
            if not 0 < max_age <= 366 * 24 * 3600:
                raise InvalidArgument("max_age", "must be from 0 to 366 days (exclusive of 0)")
        self.max_age = None if max_age is None else float(max_age)
        if clock is not None and not isinstance(clock, Clock):
            raise InvalidArgument(
                "clock",
                "must be a clock (with .time() and .monotonic(), e.g. tenure.ManualClock) "
                f"or None, not {type(clock).__name__}",
            )
        self._clock = clock or SystemClock()

    def __repr__(self) -> str:  # never the secrets
        extra = f", max_age={self.max_age}" if self.max_age is not None else ""
        return f"Keyring(keys={sorted(self._keys)}, current={self.current!r}{extra})"

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    @classmethod
    def parse(
        cls, specs: Iterable[str] | str, *, max_age: float | None = None, clock: Clock | None = None
    ) -> Keyring:
        """A keyring from ``"id=secret"`` items (a string holds several, separated by
        commas or whitespace); the first is ``current``. For command lines and env vars."""
        if isinstance(specs, str):
            specs = specs.replace(",", " ").split()
        elif isinstance(specs, (bytes, bytearray)) or not isinstance(specs, Iterable):
            raise InvalidArgument(
                "specs", f"must be a str or an iterable of str, not {type(specs).__name__}"
            )
        keys: dict[str, str] = {}
        for spec in specs:
            if not isinstance(spec, str):
                raise InvalidArgument(
                    "specs", f"must hold 'ID=SECRET' str items, not {type(spec).__name__}"
                )
            key_id, sep, secret = spec.partition("=")
            if not sep:
                raise InvalidArgument("key", f"must look like ID=SECRET, got {key_id[:8]!r}...")
            if key_id in keys:
                raise InvalidArgument("key", f"key id {key_id!r} given twice")
            keys[key_id] = secret
        if not keys:
            raise InvalidArgument("key", "no keys given")
        return cls(keys, current=next(iter(keys)), max_age=max_age, clock=clock)

    def _mac(self, key_id: str, job_id: str, generation: int, issued_at: int) -> str:
        digest = hmac.new(
            self._keys[key_id], _message(key_id, job_id, generation, issued_at), hashlib.sha256
        )
        return _b64(digest.digest())

    def sign(self, token: FencingToken, *, issued_at: int | None = None) -> SignedToken:
        """``token`` signed with the current key, issued now (by this keyring's clock)."""
        if not isinstance(token, FencingToken):
            raise InvalidArgument("token", f"must be a FencingToken, not {type(token).__name__}")
        validate_id("token job_id", token.job_id)
        validate_generation("token generation", token.generation)
        if issued_at is None:
            when = round(self._clock.time() * 1000)
        else:
            when = validate_issued_at(issued_at)
        signature = self._mac(self.current, token.job_id, token.generation, when)
        return SignedToken.build(token.job_id, token.generation, when, self.current, signature)

    def check(self, token: object) -> FencingToken | TokenCheck:
        """The verified plain token, or why it is refused. No exception for a refusal;
        `InvalidArgument` for a `SignedToken` whose fields do not have their form."""
        if not isinstance(token, SignedToken):
            plain = token if isinstance(token, FencingToken) else None
            return TokenCheck(
                "unsigned",
                "this destination requires signed tokens and the token carries no signature",
                plain.job_id if plain else "?",
                plain.generation if plain else 0,
            )
        token._checked()  # a hand-made SignedToken: its fields must have their form
        job_id, generation = token.job_id, token.generation
        if token.key_id not in self._keys:
            return TokenCheck(
                "unknown-key",
                f"it is signed with key {token.key_id!r}, which this destination does not hold",
                job_id,
                generation,
            )
        expected = self._mac(token.key_id, job_id, generation, token.issued_at)
        if not hmac.compare_digest(expected.encode(), token.signature.encode()):
            return TokenCheck(
                "bad-signature",
                "its signature does not match its job, generation and issue time "
                "(forged, altered, or signed for another job)",
                job_id,
                generation,
            )
        if self.max_age is not None:
            age = self._clock.time() - token.issued_at / 1000.0
            if abs(age) > self.max_age:
                return TokenCheck(
                    "expired",
                    f"it was issued {age:.0f} s from this destination's now, beyond "
                    f"max_age={self.max_age:g} s",
                    job_id,
                    generation,
                )
        return token.token

    def verify(self, token: object) -> FencingToken:
        """The plain token of a `SignedToken` that verifies; `StaleToken` otherwise."""
        found = self.check(token)
        if isinstance(found, TokenCheck):
            raise found.error()
        return found


def validate_keyring(value: object, argument: str = "keyring") -> Keyring | None:
    """``value`` if it is a `Keyring` or None (what every ``keyring=`` argument takes)."""
    if value is None or isinstance(value, Keyring):
        return value
    raise InvalidArgument(argument, f"must be a Keyring or None, not {type(value).__name__}")
