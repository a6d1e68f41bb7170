"""Leases with arbitrary field values, handed to every lease-taking operation (issue #12).

A `Lease` is a plain value the client holds: anyone can rebuild one with other fields. For
each example Hypothesis edits some fields of a genuine lease, each to the genuine value, to
another well-formed value (another job, owner, generation or secret; another valid ttl,
attempt or time) or to a value no claim produces (wrong type, out of range, NaN, control
characters, ...), and the oracle says what must happen:

* a malformed field: `InvalidArgument` naming ``lease.<field>``, nothing sent;
* else an edited job id, owner, generation or secret: `LeaseLost` from the store;
* else (only ttl, attempt, lease_until, local_deadline edited, all well-formed): the call
  acts exactly as with the genuine lease.

No other exception may escape, and whenever the call did not succeed every job is exactly
as it was.
"""

from __future__ import annotations

import dataclasses
import itertools
import secrets
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import tenure
from tests.conformance._support import job_view

WEEK = 7 * 24 * 3600.0
IDENTITY = ("job_id", "owner", "generation", "secret")
OPERATIONS = ("renew", "complete", "release", "fail", "complete_many", "complete_and_claim")

MALFORMED_IDS = st.sampled_from(
    [
        "",
        "x" * 256,
        "nul\x00",
        "line\nbreak",
        "\x7f",
        "\ud800",
        "unassigned \u0378",
        None,
        42,
        b"bytes",
        ["J"],
    ]
) | st.text(min_size=1, max_size=20).map(lambda t: t + "\x00")
MALFORMED: dict[str, st.SearchStrategy[Any]] = {
    "job_id": MALFORMED_IDS,
    "owner": MALFORMED_IDS,
    "generation": st.sampled_from([0, -1, 2**63, 2**64, True, 1.0, "1", None])
    | st.integers(max_value=0)
    | st.integers(min_value=2**63),
    "ttl": st.sampled_from(
        [float("nan"), float("inf"), float("-inf"), 0, -1, True, "30", None, timedelta(0)]
    )
    | st.floats(min_value=WEEK * 1.0001, allow_infinity=False)
    | st.floats(max_value=0.0099, allow_nan=False, allow_infinity=False),
    "secret": st.sampled_from([None, 42, b"0" * 48, "", "A" * 48, "g" * 48, "\ud800" * 48])
    | st.text(max_size=60).filter(lambda t: len(t) != 48),
    "attempt": st.sampled_from([0, -1, 1_000_001, True, 1.5, "1", None]),
    "lease_until": st.sampled_from([float("nan"), float("inf"), "1", None, True, 10**400]),
    "local_deadline": st.sampled_from([float("nan"), float("-inf"), "0", None, False]),
    "store_id": st.sampled_from([None, 42, "another-store", b"id"]),
}


def well_formed(field: str, genuine: tenure.Lease, other: tenure.Lease) -> st.SearchStrategy[Any]:
    """Another value the field's rule accepts (for identity fields: not the genuine one)."""
    return {
        "job_id": st.sampled_from([other.job_id, "never-submitted"]),
        "owner": st.sampled_from([other.owner, "Mallory"]),
        "generation": st.sampled_from([genuine.generation + 1, 2**63 - 1, other.generation + 7]),
        "secret": st.sampled_from([other.secret, "0" * 48]) | st.just(secrets.token_hex(24)),
        "ttl": st.floats(min_value=0.01, max_value=WEEK)
        | st.integers(1, 3600)
        | st.just(timedelta(seconds=45)),
        "attempt": st.integers(1, 1_000_000),
        "lease_until": st.floats(allow_nan=False, allow_infinity=False),
        "local_deadline": st.floats(allow_nan=False, allow_infinity=False),
        "store_id": st.just(genuine.store_id),
    }[field]


FIELDS = [f.name for f in dataclasses.fields(tenure.Lease)]


@st.composite
def edits(
    draw: st.DrawFn, genuine: tenure.Lease, other: tenure.Lease
) -> dict[str, tuple[str, Any]]:
    """Up to three fields edited, each to a well-formed or a malformed value; the rest kept.
    Few at a time, so that the three outcomes all come up often."""
    chosen = {name: ("genuine", getattr(genuine, name)) for name in FIELDS}
    edited = draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True), label="edited")
    for name in edited:
        kind = draw(st.sampled_from(["other", "malformed"]), label=name)
        source = well_formed(name, genuine, other) if kind == "other" else MALFORMED[name]
        chosen[name] = (kind, draw(source, label=f"{name} value"))
    return chosen


def call(store: tenure.Store, operation: str, lease: tenure.Lease) -> bool:
    """Run ``operation`` with ``lease``; True when it succeeded (a batch: nothing lost)."""
    if operation == "renew":
        store.renew(lease)
    elif operation == "complete":
        store.complete(lease, {"done": True})
    elif operation == "release":
        store.release(lease)
    elif operation == "fail":
        store.fail(lease, "boom", retry_in=5)
    elif operation == "complete_many":
        return store.complete_many([lease], [{"done": True}]) == []
    else:
        # A queue nobody submits to: the claim half takes nothing, so a refused completion
        # must leave every job as it was.
        lost, claimed = store.complete_and_claim(
            [lease], "C", 10, 1, results=[{"done": True}], queues=["empty"]
        )
        assert claimed == []
        return lost == []
    return True


_examples = itertools.count()


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), operation=st.sampled_from(OPERATIONS))
def test_edited_leases_act_as_genuine_or_are_refused(
    store: tenure.Store, data: st.DataObject, operation: str
) -> None:
    n = next(_examples)
    mine, theirs = f"mine-{n}", f"theirs-{n}"
    store.submit(mine, max_attempts=5)
    store.submit(theirs)
    genuine = store.claim(mine, "A", 30)
    other = store.claim(theirs, "B", 30)
    assert genuine is not None
    assert other is not None
    chosen = data.draw(edits(genuine, other), label="fields")
    lease = dataclasses.replace(genuine, **{name: value for name, (_, value) in chosen.items()})
    # Edits that copy the other holder's job, owner and secret, where its generation and
    # every other field already equal this lease's, rebuild B's own genuine lease: no
    # forgery, and its call rightly succeeds on the other job.
    assume(lease != other)
    malformed = {name for name, (kind, _) in chosen.items() if kind == "malformed"}
    forged = {name for name, (kind, value) in chosen.items() if kind == "other"} & set(IDENTITY)
    before = [job_view(store.get(job_id)) for job_id in (mine, theirs)]

    outcome: str
    refusal: tenure.InvalidArgument | None = None
    try:
        succeeded = call(store, operation, lease)
        outcome = "ok" if succeeded else "lost"
    except tenure.InvalidArgument as exc:
        outcome, refusal = "invalid", exc
    except tenure.LeaseLost:
        outcome = "lost"
    # (any other exception fails the example, with its traceback)
    event(f"{operation}: {outcome}")
    if refusal is not None:
        named = refusal.argument.removeprefix("leases[0]").removeprefix("lease").lstrip(".")
        assert named in malformed, (refusal, malformed)

    if malformed:
        assert outcome == "invalid", (operation, chosen)
    elif forged:
        assert outcome == "lost", (operation, chosen)
    else:
        assert outcome == "ok", (operation, chosen)
    after = [job_view(store.get(job_id)) for job_id in (mine, theirs)]
    if outcome != "ok":
        assert after == before, (operation, chosen)
        return
    job = store.get(mine)
    expected_state = {"renew": "leased", "release": "ready", "fail": "ready"}.get(operation, "done")
    assert (job.state, job.generation, job.owner) == (expected_state, genuine.generation, "A")
    if operation == "renew":
        ttl = chosen["ttl"][1]
        seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
        assert job.lease_until == pytest.approx(job.as_of + seconds, abs=1e-3)
    assert after[1] == before[1]  # the other job is never touched
