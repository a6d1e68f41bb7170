"""What a fenced destination accepts as a token, checked before any I/O.

A `tenure.FencingToken`, a `tenure.Lease` (its ``token``), a worker's ``JobContext`` (its
``token``) or a `SignedToken`. With a `Keyring` the token must be a `SignedToken` whose
signature verifies: the check happens here, before any destination raises its highest-seen
generation, so a forged token changes nothing.
"""

from __future__ import annotations

from .._validate import validate_generation, validate_id
from ..errors import InvalidArgument
from ..models import FencingToken, Lease
from ._signed import Keyring, SignedToken, validate_keyring

__all__ = ["fencing_token", "plain_token"]


def fencing_token(
    value: object, argument: str = "token", keyring: Keyring | None = None
) -> FencingToken:
    """The validated `FencingToken` of ``value``.

    Without ``keyring`` a `SignedToken` counts as its plain token (its signature is not
    checked). With one, ``value`` must be a `SignedToken` that verifies, else `StaleToken`.
    """
    keyring = validate_keyring(keyring)
    signed = value if isinstance(value, SignedToken) else None
    if isinstance(value, Lease):
        value = value.token
    elif signed is not None:
        value = signed.token
    elif not isinstance(value, FencingToken):
        token = getattr(value, "token", None)  # a worker JobContext
        if isinstance(token, FencingToken):
            value = token
    if not isinstance(value, FencingToken):
        raise InvalidArgument(
            argument,
            "must be a tenure.FencingToken, a tenure.Lease (its .token is used), a worker "
            f"JobContext or a SignedToken, not {type(value).__name__}",
        )
    plain_token(value, argument)
    if keyring is not None:
        return keyring.verify(signed if signed is not None else value)
    return value


def plain_token(value: object, argument: str = "token") -> FencingToken:
    """``value`` itself, if it is a `FencingToken` with a valid job id and a generation from
    1 to 2**63-1 (a FencingToken built by hand is not checked when it is made)."""
    if not isinstance(value, FencingToken):
        raise InvalidArgument(
            argument, f"must be a tenure.FencingToken, not {type(value).__name__}"
        )
    validate_id(f"{argument} job_id", value.job_id)
    validate_generation(f"{argument} generation", value.generation)
    return value
