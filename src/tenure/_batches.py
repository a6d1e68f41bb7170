"""The lease batches of `complete_many`, `complete_and_claim` and `renew_many`: what a store
sends for them, and what their answers mean. Pure: no I/O.

Everything in a batch is checked before anything is sent, so bad input changes nothing;
each lease of a batch is then answered on its own, as the single operation answers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._protocol import (
    Completion,
    LeaseMaker,
    Outcome,
    Renewal,
    Status,
    hash_secret,
    lease_lost,
    settle_receipt,
    settle_verdict,
)
from ._validate import MAX_BATCH, encode_json
from .errors import InvalidArgument, LeaseLost
from .models import Lease

__all__ = ["checked_batch", "completions_of", "lost_of", "renewals_of", "renewed_or_lost"]


def checked_batch(leases: object, maker: LeaseMaker) -> list[Lease]:
    """A batch's leases, each checked by ``maker`` (`LeaseMaker.check`), each job at most
    once."""
    if isinstance(leases, (str, bytes, Lease)) or not isinstance(leases, Sequence):
        raise InvalidArgument("leases", "must be a list or tuple of tenure.Lease")
    if len(leases) > MAX_BATCH:
        raise InvalidArgument("leases", f"must hold at most {MAX_BATCH}, got {len(leases)}")
    checked = [maker.check(item, f"leases[{index}]") for index, item in enumerate(leases)]
    seen: set[str] = set()
    for lease in checked:
        if lease.job_id in seen:
            raise InvalidArgument(
                "leases", f"must name each job at most once: job {lease.job_id!r} repeats"
            )
        seen.add(lease.job_id)
    return checked


def completions_of(
    leases: object, results: object, maker: LeaseMaker, payload_limit: int
) -> tuple[list[Lease], list[Completion]]:
    """The checked leases of a batch completion and what the driver is sent for them."""
    checked = checked_batch(leases, maker)
    if results is None:
        values: Sequence[Any] = [None] * len(checked)
    elif isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise InvalidArgument("results", "must be a list or tuple, one result per lease")
    elif len(results) != len(checked):
        raise InvalidArgument(
            "results",
            f"must hold one result per lease: {len(results)} results for {len(checked)} leases",
        )
    else:
        values = results
    completions = []
    for index, (lease, value) in enumerate(zip(checked, values, strict=True)):
        result_json = encode_json(f"results[{index}]", value, payload_limit)
        secret_hash = hash_secret(lease.secret)
        completions.append(
            Completion(
                lease.job_id,
                lease.owner,
                lease.generation,
                secret_hash,
                settle_receipt(secret_hash, "complete"),
                result_json,
            )
        )
    return checked, completions


def lost_of(
    checked: list[Lease], completions: list[Completion], outcomes: list[Outcome]
) -> list[LeaseLost]:
    """The `LeaseLost` of each completion the store did not apply (a repeat of one that
    took effect is not lost), in order."""
    lost = []
    for lease, completion, outcome in zip(checked, completions, outcomes, strict=True):
        error = settle_verdict(
            "complete", lease, completion.secret_hash, outcome, completion.result
        )
        if error is not None:
            lost.append(error)
    return lost


def renewals_of(checked: list[Lease], ttl: float | None) -> list[Renewal]:
    """What the driver is sent to renew ``checked`` by ``ttl`` seconds (None: each its own)."""
    return [
        Renewal(
            lease.job_id,
            lease.owner,
            lease.generation,
            hash_secret(lease.secret),
            lease.ttl if ttl is None else ttl,
        )
        for lease in checked
    ]


def renewed_or_lost(
    maker: LeaseMaker,
    checked: list[Lease],
    renewals: list[Renewal],
    outcomes: list[Outcome],
    sent_at: float,
) -> list[Lease | LeaseLost]:
    """Each lease's answer, as `renew` would give it: its new `Lease` (local deadline from
    ``sent_at``), or the `LeaseLost` it would raise."""
    answers: list[Lease | LeaseLost] = []
    for lease, renewal, outcome in zip(checked, renewals, outcomes, strict=True):
        if outcome.status != Status.APPLIED or outcome.row is None:
            answers.append(lease_lost("renew", lease, outcome, renewal.secret_hash))
        else:
            answers.append(
                maker.lease(outcome.row, lease.owner, renewal.ttl, lease.secret, sent_at)
            )
    return answers
