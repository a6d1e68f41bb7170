"""The parameters of the batch statements (`claim_next.sql`, `complete_many.sql`,
`renew_many.sql`, `complete_and_claim.sql`: arrays, one element per item) and the reading
of a claim's answer. Pure: the driver runs the statements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._protocol import Completion, Outcome, Renewal, Status
from ..._validate import MAX_GENERATION
from ._common import Answer

__all__ = ["claim_params", "completion_params", "renewal_params", "take_claims"]


def claim_params(
    owner: str, ttl: float, queues: Sequence[str], wanted: list[str], now: float | None
) -> dict[str, Any]:
    return {
        "owner": owner,
        "ttl": ttl,
        "queues": list(queues),
        "secret_hashes": wanted,
        "limit": len(wanted),
        "max_generation": MAX_GENERATION,
        "now": now,
    }


def take_claims(rows: list[Answer], wanted: list[str], claimed: list[Outcome]) -> list[str]:
    """Add the claims of a claim answer, and the jobs it buried, to ``claimed``; return the
    secret hashes still wanted: jobs buried on the way took places in the pick, and raced
    ones (picked, but changed by another writer after the statement's snapshot:
    _claim_next_answer.sql) took places and secret hashes the claims did not use, so look
    again for the rest, with the hashes no claim took."""
    used = set()
    for answer in rows:
        if answer.raced:
            continue
        claimed.append(answer.outcome)
        if answer.outcome.status == Status.APPLIED and answer.outcome.row is not None:
            used.add(answer.outcome.row.secret_hash)
    if len(used) == len(rows):
        return []
    return [secret_hash for secret_hash in wanted if secret_hash not in used]


def completion_params(completions: Sequence[Completion], now: float | None) -> dict[str, Any]:
    return {
        "job_ids": [c.job_id for c in completions],
        "owners": [c.owner for c in completions],
        "generations": [c.generation for c in completions],
        "held_hashes": [c.secret_hash for c in completions],
        "receipts": [c.receipt for c in completions],
        "results": [c.result for c in completions],
        "now": now,
    }


def renewal_params(renewals: Sequence[Renewal], now: float | None) -> dict[str, Any]:
    return {
        "job_ids": [r.job_id for r in renewals],
        "owners": [r.owner for r in renewals],
        "generations": [r.generation for r in renewals],
        "held_hashes": [r.secret_hash for r in renewals],
        # Each a float, so that psycopg sends a float8[] whatever the caller passed.
        "ttls": [float(r.ttl) for r in renewals],
        "now": now,
    }
