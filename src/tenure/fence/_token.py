"""What a fenced destination accepts as a token, checked before any I/O.

Today: a `tenure.FencingToken` or a `tenure.Lease` (its ``token``). Signed tokens (HMAC over
job, generation and issue time) will be verified here too, before any destination raises
its highest-seen generation.
"""

from __future__ import annotations

from .._validate import validate_generation, validate_id
from ..errors import InvalidArgument
from ..models import FencingToken, Lease

__all__ = ["fencing_token"]


def fencing_token(value: object, argument: str = "token") -> FencingToken:
    """The validated `FencingToken` of ``value`` (a FencingToken or a Lease)."""
    if isinstance(value, Lease):
        value = value.token
    if not isinstance(value, FencingToken):
        raise InvalidArgument(
            argument,
            "must be a tenure.FencingToken or a tenure.Lease (its .token is used), "
            f"not {type(value).__name__}",
        )
    validate_id(f"{argument} job_id", value.job_id)
    validate_generation(f"{argument} generation", value.generation)
    return value
