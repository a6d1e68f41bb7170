"""Fencing tokens in HTTP headers, and the problem documents a destination answers with.

Headers (names are case-insensitive; values are ASCII)::

    Tenure-Job: <job id, percent-encoded (UTF-8, RFC 3986)>     always
    Tenure-Generation: <decimal, 1 to 2**63-1, no sign or leading zero>   always
    Tenure-Issued-At: <integer milliseconds since the epoch, signer's clock>   signed
    Tenure-Key-Id: <key id of the signing key>                     signed
    Tenure-Token-Signature: <base64url HMAC-SHA256, no padding>    signed
    Idempotency-Key: <effect key>                                  optional, per effect

The three signed headers come together or not at all. A destination with a `Keyring`
refuses requests without them. See `tenure.fence._signed` for what is signed.

Refusals are `Rejection` values that render as RFC 9457 ``application/problem+json``:
409 Conflict for a stale token (``current_generation`` names the newer one), 403 Forbidden
for a token whose signature does not verify (or is missing, or expired), 400 for malformed
headers, 428 Precondition Required when a token is required and absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from .._validate import MAX_GENERATION, validate_id
from ..errors import InvalidArgument
from ..models import FencingToken
from ._signed import Keyring, SignedToken, TokenCheck, validate_keyring
from ._token import fencing_token

__all__ = [
    "EFFECT_KEY_HEADER",
    "GENERATION_HEADER",
    "ISSUED_AT_HEADER",
    "JOB_HEADER",
    "KEY_ID_HEADER",
    "PROBLEM_CONTENT_TYPE",
    "SIGNATURE_HEADER",
    "check_headers",
    "collect_headers",
    "missing",
    "read_token",
    "Rejection",
    "token_headers",
]

JOB_HEADER = "Tenure-Job"
GENERATION_HEADER = "Tenure-Generation"
ISSUED_AT_HEADER = "Tenure-Issued-At"
KEY_ID_HEADER = "Tenure-Key-Id"
SIGNATURE_HEADER = "Tenure-Token-Signature"
EFFECT_KEY_HEADER = "Idempotency-Key"
PROBLEM_CONTENT_TYPE = "application/problem+json"

_TOKEN_HEADERS = (JOB_HEADER, GENERATION_HEADER, ISSUED_AT_HEADER, KEY_ID_HEADER, SIGNATURE_HEADER)
_SIGNED_HEADERS = (ISSUED_AT_HEADER, KEY_ID_HEADER, SIGNATURE_HEADER)
_GENERATION = re.compile(r"[1-9][0-9]{0,18}")
# Visible ASCII, with '%' only as the start of an escape.
_PERCENT_ENCODED = re.compile(r"(?:[!-$&-~]|%[0-9A-Fa-f]{2})+")

_TITLES = {
    "stale": (409, "Stale fencing token"),
    "strict": (409, "Fencing token generation already used"),
    "unsigned": (403, "Unsigned fencing token"),
    "unknown-key": (403, "Fencing token signed with an unknown key"),
    "bad-signature": (403, "Fencing token signature does not verify"),
    "expired": (403, "Fencing token too old"),
    "malformed": (400, "Malformed fencing token"),
    "missing": (428, "Fencing token required"),
}


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a destination refused a request; renders as an RFC 9457 problem document."""

    kind: str
    detail: str
    job_id: str | None = None
    presented_generation: int | None = None
    current_generation: int | None = None

    @property
    def status(self) -> int:
        return _TITLES[self.kind][0]

    @property
    def title(self) -> str:
        return _TITLES[self.kind][1]

    def problem(self, instance: str | None = None) -> dict[str, Any]:
        """The ``application/problem+json`` body (``type`` is ``urn:tenure:problem:<kind>``;
        the extension members name the job and both generations)."""
        body: dict[str, Any] = {
            "type": f"urn:tenure:problem:{self.kind}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance is not None:
            body["instance"] = instance
        body["job_id"] = self.job_id
        body["presented_generation"] = self.presented_generation
        body["current_generation"] = self.current_generation
        return body

    def body(self, instance: str | None = None) -> bytes:
        return json.dumps(self.problem(instance), ensure_ascii=False).encode("utf-8")

    @classmethod
    def stale(cls, token: FencingToken, current: int | None, *, strict: bool) -> Rejection:
        if strict and current == token.generation:
            return cls(
                "strict",
                f"generation {token.generation} of job {token.job_id!r} was already used here "
                "and this destination is strict (one effect per generation)",
                token.job_id,
                token.generation,
                current,
            )
        return cls(
            "stale",
            f"job {token.job_id!r}: this request's token has generation {token.generation}, "
            f"but generation {current} was already accepted here; another worker holds the "
            "job now. Nothing was changed; stop working on this job.",
            token.job_id,
            token.generation,
            current,
        )

    @classmethod
    def of_check(cls, check: TokenCheck) -> Rejection:
        job = None if check.job_id == "?" else check.job_id
        return cls(check.kind, check.detail, job, check.generation or None, None)


def token_headers(token: object, keyring: Keyring | None = None) -> dict[str, str]:
    """The headers that carry ``token`` (a FencingToken, Lease, JobContext or SignedToken);
    signed now with ``keyring``'s current key when one is given."""
    keyring = validate_keyring(keyring)
    signed = token if isinstance(token, SignedToken) else None
    plain = fencing_token(token)
    if keyring is not None:
        signed = keyring.sign(plain)
    headers = {JOB_HEADER: quote(plain.job_id, safe=""), GENERATION_HEADER: str(plain.generation)}
    if signed is not None:
        headers[ISSUED_AT_HEADER] = str(signed.issued_at)
        headers[KEY_ID_HEADER] = signed.key_id
        headers[SIGNATURE_HEADER] = signed.signature
    return headers


def collect_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """ASGI ``(name, value)`` byte pairs -> lower-case name -> values (latin-1, per HTTP)."""
    found: dict[str, list[str]] = {}
    for name, value in raw:
        found.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return found


def _malformed(detail: str, job_id: str | None = None, generation: int | None = None) -> Rejection:
    return Rejection("malformed", detail, job_id, generation)


def _one(headers: Mapping[str, list[str]], name: str) -> str | Rejection | None:
    values = headers.get(name.lower())
    if not values:
        return None
    if len(values) > 1:
        return _malformed(f"{name} was sent {len(values)} times")
    return values[0].strip()


def _header_lists(headers: object) -> dict[str, list[str]]:
    """``headers`` (a mapping, or any object with ``items()``) as lower-case name -> values,
    refusing names that are not str and values that are not a str or a list of str."""
    items = getattr(headers, "items", None)
    if isinstance(headers, (str, bytes)) or not callable(items):
        raise InvalidArgument(
            "headers",
            "must be a mapping of header names to a value or a list of values (a dict, "
            f"httpx.Headers, starlette's Headers...), not {type(headers).__name__}",
        )
    merged: dict[str, list[str]] = {}
    for name, value in items():
        if not isinstance(name, str):
            raise InvalidArgument("headers", f"names must be str, not {type(name).__name__}")
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            kind = type(value).__name__
            if isinstance(values, list):
                kind = f"a list holding {', '.join(sorted({type(v).__name__ for v in values}))}"
            raise InvalidArgument(
                f"headers[{name!r}]",
                f"must be a str, or a list of str (a repeated header), not {kind}",
            )
        merged.setdefault(name.lower(), []).extend(values)
    return merged


def check_headers(
    headers: Mapping[str, str] | Mapping[str, list[str]], keyring: Keyring | None = None
) -> FencingToken | Rejection | None:
    """The (verified) token a request carries, or why it is refused, or None if it carries
    no token at all. ``headers``: names (any case) -> a value, or a list of the values of
    a repeated header (`collect_headers` makes that from ASGI headers); any mapping of str
    will do (httpx's and Starlette's header objects too). Other values raise
    `InvalidArgument`, as does a ``keyring`` that is not a `Keyring` or None."""
    return read_token(_header_lists(headers), validate_keyring(keyring))


def read_token(
    headers: Mapping[str, list[str]], keyring: Keyring | None
) -> FencingToken | Rejection | None:
    """`check_headers` for arguments known to be good: lower-case names -> lists of str
    values (as `collect_headers` makes them), and a `Keyring` or None."""
    values: dict[str, str | None] = {}
    for name in _TOKEN_HEADERS:
        found = _one(headers, name)
        if isinstance(found, Rejection):
            return found
        values[name] = found
    if all(value is None for value in values.values()):
        return None  # no token: the caller decides whether one is required
    job_text, generation_text = values[JOB_HEADER], values[GENERATION_HEADER]
    if job_text is None or generation_text is None:
        return _malformed(f"a token needs both {JOB_HEADER} and {GENERATION_HEADER}")
    if not _PERCENT_ENCODED.fullmatch(job_text):
        return _malformed(f"{JOB_HEADER} must be a percent-encoded job id")
    try:
        job_id = validate_id("job", unquote(job_text, errors="strict"))
    except (InvalidArgument, UnicodeDecodeError) as exc:
        return _malformed(f"{JOB_HEADER}: {exc}")
    if not _GENERATION.fullmatch(generation_text) or int(generation_text) > MAX_GENERATION:
        return _malformed(
            f"{GENERATION_HEADER} must be a decimal from 1 to 2**63-1 (no sign, no leading zeros)",
            job_id,
        )
    generation = int(generation_text)
    signed_values = [values[name] for name in _SIGNED_HEADERS]
    token: FencingToken | SignedToken = FencingToken(job_id, generation)
    if any(value is not None for value in signed_values):
        if any(value is None for value in signed_values):
            return _malformed(
                f"a signed token needs all of {', '.join(_SIGNED_HEADERS)}", job_id, generation
            )
        issued_at, key_id, signature = signed_values
        try:
            token = SignedToken.build(job_id, generation, issued_at, key_id, signature)
        except InvalidArgument as exc:
            return _malformed(str(exc), job_id, generation)
    if keyring is None:
        return token.token if isinstance(token, SignedToken) else token
    verified = keyring.check(token)
    if isinstance(verified, TokenCheck):
        return Rejection.of_check(verified)
    return verified


def missing(required_for: str) -> Rejection:
    return Rejection(
        "missing",
        f"{required_for} must carry a fencing token ({JOB_HEADER} and {GENERATION_HEADER}"
        ", and the signature headers when the destination has a key)",
    )
