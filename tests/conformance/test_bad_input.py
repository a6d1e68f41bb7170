"""Bad input (docs/design.md §6): every public entry point refuses it with InvalidArgument naming
the argument and the rule, before touching the store, which is left unchanged."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import tenure
import tenure.aio
from tenure.stores import FRAGMENT_RULE
from tests.conformance._bad_values import (
    BAD_ATTEMPTS,
    BAD_CONNS,
    BAD_CURSORS,
    BAD_DELAYS,
    BAD_ERRORS,
    BAD_IDS,
    BAD_JOB_ITEMS,
    BAD_JOB_LISTS,
    BAD_JSON,
    BAD_LEASE_FIELDS,
    BAD_LEASE_LISTS,
    BAD_LEASE_VALUES,
    BAD_LIMITS,
    BAD_OLDER_THAN,
    BAD_OPTIONAL_IDS,
    BAD_QUEUES,
    BAD_RENEW_TTLS,
    BAD_RESULT_LISTS,
    BAD_RETRY_IN,
    BAD_STATES,
    BAD_TTLS,
    WEEK,
)
from tests.conformance._support import snapshot


@dataclass
class World:
    """A store with a job in every state, and the live lease of the leased one."""

    store: tenure.Store
    lease: tenure.Lease
    job: tenure.Job


@pytest.fixture
def world(store: tenure.Store, clock: tenure.ManualClock) -> World:
    store.submit("R", {"ready": True})
    store.submit("L", queue="q2")
    store.submit("D")
    store.submit("X", max_attempts=1)
    store.submit("W", delay=60)
    done = store.claim("D", "A", 10)
    assert done is not None
    store.complete(done, "ok")
    dead = store.claim("X", "A", 10)
    assert dead is not None
    store.fail(dead, "boom")
    lease = store.claim("L", "A", 10)
    assert lease is not None
    clock.advance(1)
    return World(store, lease, store.get("R"))


Call = Callable[[World, Any], object]

# (entry point, argument named in the error, bad values, call)
CASES: list[tuple[str, str, list[Any], Call]] = [
    ("submit", "job_id", BAD_IDS, lambda w, v: w.store.submit(v)),
    ("submit", "queue", BAD_IDS, lambda w, v: w.store.submit("new", queue=v)),
    ("submit", "delay", BAD_DELAYS, lambda w, v: w.store.submit("new", delay=v)),
    ("submit", "max_attempts", BAD_ATTEMPTS, lambda w, v: w.store.submit("new", max_attempts=v)),
    ("submit", "payload", BAD_JSON, lambda w, v: w.store.submit("new", v)),
    # an existing job id too: validation comes before the idempotent no-op
    ("submit", "payload", BAD_JSON[:4], lambda w, v: w.store.submit("R", v)),
    ("get", "job_id", BAD_IDS, lambda w, v: w.store.get(v)),
    ("jobs", "queue", BAD_OPTIONAL_IDS, lambda w, v: w.store.jobs(queue=v)),
    ("jobs", "state", BAD_STATES, lambda w, v: w.store.jobs(state=v)),
    ("jobs", "limit", BAD_LIMITS, lambda w, v: w.store.jobs(limit=v)),
    ("claim", "job_id", BAD_IDS, lambda w, v: w.store.claim(v, "B", 10)),
    ("claim", "owner", BAD_IDS, lambda w, v: w.store.claim("R", v, 10)),
    ("claim", "ttl", BAD_TTLS, lambda w, v: w.store.claim("R", "B", v)),
    # a missing job: InvalidArgument, not JobNotFound (validated before the store is asked)
    ("claim", "ttl", BAD_TTLS[:6], lambda w, v: w.store.claim("missing", "B", v)),
    ("claim_next", "owner", BAD_IDS, lambda w, v: w.store.claim_next(v, 10)),
    ("claim_next", "ttl", BAD_TTLS, lambda w, v: w.store.claim_next("B", v)),
    ("claim_next", "queues", BAD_QUEUES, lambda w, v: w.store.claim_next("B", 10, queues=v)),
    ("claim_many", "owner", BAD_IDS, lambda w, v: w.store.claim_many(v, 10, 2)),
    ("claim_many", "ttl", BAD_TTLS, lambda w, v: w.store.claim_many("B", v, 2)),
    ("claim_many", "limit", BAD_LIMITS, lambda w, v: w.store.claim_many("B", 10, v)),
    ("claim_many", "queues", BAD_QUEUES, lambda w, v: w.store.claim_many("B", 10, 2, queues=v)),
    ("wait_for_jobs", "queues", BAD_QUEUES, lambda w, v: w.store.wait_for_jobs(queues=v)),
    ("wait_for_jobs", "timeout", BAD_DELAYS, lambda w, v: w.store.wait_for_jobs(timeout=v)),
    ("renew", "lease", BAD_LEASE_VALUES, lambda w, v: w.store.renew(v)),
    ("renew", "lease", [None], lambda w, v: w.store.renew(w.job)),  # type: ignore[arg-type]
    ("renew", "ttl", BAD_RENEW_TTLS, lambda w, v: w.store.renew(w.lease, v)),
    ("complete", "lease", BAD_LEASE_VALUES, lambda w, v: w.store.complete(v)),
    ("complete", "result", BAD_JSON, lambda w, v: w.store.complete(w.lease, v)),
    ("complete_many", "leases", BAD_LEASE_LISTS, lambda w, v: w.store.complete_many(v)),
    (
        "complete_many",
        "leases",
        [[v] for v in BAD_LEASE_VALUES],
        lambda w, v: w.store.complete_many([w.lease, *v]),
    ),
    ("complete_many", "leases", [2], lambda w, v: w.store.complete_many([w.lease] * v)),
    (
        "complete_many",
        "results",
        BAD_RESULT_LISTS,
        lambda w, v: w.store.complete_many([w.lease], v),
    ),
    (
        "complete_many",
        "results",
        [[v] for v in BAD_JSON],
        lambda w, v: w.store.complete_many([w.lease], v),
    ),
    # complete_and_claim: the rules of complete_many and of claim_many; a refused call
    # neither completes the live lease it was given nor claims the ready job "R".
    (
        "complete_and_claim",
        "leases",
        BAD_LEASE_LISTS,
        lambda w, v: w.store.complete_and_claim(v, "B", 10, 2),
    ),
    (
        "complete_and_claim",
        "leases",
        [[v] for v in BAD_LEASE_VALUES],
        lambda w, v: w.store.complete_and_claim([w.lease, *v], "B", 10, 2),
    ),
    (
        "complete_and_claim",
        "leases",
        [2, 3],
        lambda w, v: w.store.complete_and_claim([w.lease] * v, "B", 10, 2),
    ),
    (
        "complete_and_claim",
        "leases",
        [[None]],
        lambda w, v: w.store.complete_and_claim([w.job, *v], "B", 10, 2),  # type: ignore[list-item]
    ),
    (
        "complete_and_claim",
        "leases",  # a lease edited after it was issued, to a generation no claim grants
        [0, 2**63],
        lambda w, v: w.store.complete_and_claim(
            [dataclasses.replace(w.lease, generation=v)], "B", 10, 2
        ),
    ),
    (
        "complete_and_claim",
        "results",
        BAD_RESULT_LISTS,
        lambda w, v: w.store.complete_and_claim([w.lease], "B", 10, 2, results=v),
    ),
    (
        "complete_and_claim",
        "results",
        [[v] for v in BAD_JSON],
        lambda w, v: w.store.complete_and_claim([w.lease], "B", 10, 2, results=v),
    ),
    (
        "complete_and_claim",
        "results",  # results without leases
        [["r"], [None]],
        lambda w, v: w.store.complete_and_claim([], "B", 10, 2, results=v),
    ),
    (
        "complete_and_claim",
        "owner",
        BAD_IDS,
        lambda w, v: w.store.complete_and_claim([w.lease], v, 10, 2),
    ),
    (
        "complete_and_claim",
        "ttl",
        BAD_TTLS,
        lambda w, v: w.store.complete_and_claim([w.lease], "B", v, 2),
    ),
    (
        "complete_and_claim",
        "limit",
        BAD_LIMITS,
        lambda w, v: w.store.complete_and_claim([w.lease], "B", 10, v),
    ),
    (
        "complete_and_claim",
        "queues",
        BAD_QUEUES,
        lambda w, v: w.store.complete_and_claim([w.lease], "B", 10, 2, queues=v),
    ),
    # and with no leases (the claim alone)
    ("complete_and_claim", "owner", BAD_IDS, lambda w, v: w.store.complete_and_claim([], v, 10, 2)),
    (
        "complete_and_claim",
        "ttl",
        BAD_TTLS,
        lambda w, v: w.store.complete_and_claim([], "B", v, 2),
    ),
    (
        "complete_and_claim",
        "limit",
        BAD_LIMITS,
        lambda w, v: w.store.complete_and_claim([], "B", 10, v),
    ),
    (
        "complete_and_claim",
        "queues",
        BAD_QUEUES,
        lambda w, v: w.store.complete_and_claim([], "B", 10, 2, queues=v),
    ),
    ("release", "lease", BAD_LEASE_VALUES, lambda w, v: w.store.release(v)),
    ("fail", "lease", BAD_LEASE_VALUES, lambda w, v: w.store.fail(v, "e")),
    ("fail", "error", BAD_ERRORS, lambda w, v: w.store.fail(w.lease, v)),
    ("fail", "retry_in", BAD_RETRY_IN, lambda w, v: w.store.fail(w.lease, "e", retry_in=v)),
    # issue #17: submit_many (every element checked before anything is sent: the first,
    # valid, element is not submitted either), wait, paged jobs(), conn=
    ("submit_many", "jobs", BAD_JOB_LISTS, lambda w, v: w.store.submit_many(v)),
    (
        "submit_many",
        "jobs[1]",
        BAD_JOB_ITEMS,
        lambda w, v: w.store.submit_many([{"job_id": "n"}, v]),
    ),
    (
        "submit_many",
        "jobs[1]",
        [{"job_id": "m", "ttl": 3}, {"job_id": "m", "id": "m"}],
        lambda w, v: w.store.submit_many([{"job_id": "n"}, v]),
    ),
    (
        "submit_many",
        "jobs[1].job_id",
        [*BAD_IDS, "n"],  # "n" repeats jobs[0]'s id
        lambda w, v: w.store.submit_many([{"job_id": "n"}, {"job_id": v}]),
    ),
    (
        "submit_many",
        "jobs[1].job_id",
        [{"payload": 1}, {}],  # no job_id
        lambda w, v: w.store.submit_many([{"job_id": "n"}, v]),
    ),
    (
        "submit_many",
        "jobs[1].job_id",
        ["R"],  # an existing id, twice in one batch
        lambda w, v: w.store.submit_many([tenure.JobSpec(v), tenure.JobSpec(v)]),
    ),
    (
        "submit_many",
        "jobs[1].queue",
        BAD_IDS,
        lambda w, v: w.store.submit_many([{"job_id": "n"}, {"job_id": "m", "queue": v}]),
    ),
    (
        "submit_many",
        "jobs[1].delay",
        BAD_DELAYS,
        lambda w, v: w.store.submit_many([tenure.JobSpec("n"), tenure.JobSpec("m", delay=v)]),
    ),
    (
        "submit_many",
        "jobs[1].max_attempts",
        BAD_ATTEMPTS,
        lambda w, v: w.store.submit_many([{"job_id": "n"}, {"job_id": "m", "max_attempts": v}]),
    ),
    (
        "submit_many",
        "jobs[1].payload",
        BAD_JSON,
        lambda w, v: w.store.submit_many([tenure.JobSpec("n"), tenure.JobSpec("m", v)]),
    ),
    ("submit_many", "conn", BAD_CONNS, lambda w, v: w.store.submit_many([{"job_id": "n"}], conn=v)),
    ("submit", "conn", BAD_CONNS, lambda w, v: w.store.submit("n", conn=v)),
    ("wait", "job_id", BAD_IDS, lambda w, v: w.store.wait(v)),
    # (None is no limit, the contract's default: BAD_RETRY_IN is BAD_DELAYS without it.)
    ("wait", "timeout", BAD_RETRY_IN, lambda w, v: w.store.wait("D", timeout=v)),
    ("jobs", "owner", BAD_OPTIONAL_IDS, lambda w, v: w.store.jobs(owner=v)),
    ("jobs", "older_than", BAD_OLDER_THAN, lambda w, v: w.store.jobs(older_than=v)),
    ("jobs", "cursor", BAD_CURSORS, lambda w, v: w.store.jobs(cursor=v)),
    ("jobs", "after", BAD_CURSORS, lambda w, v: w.store.jobs(after=v)),
]


def _edited(world: World, field: str, value: Any) -> tenure.Lease:
    return dataclasses.replace(world.lease, **{field: value})


# Each lease-taking entry point, given the world's live lease edited in one field.
LEASE_ENTRIES: list[tuple[str, str, Callable[[World, tenure.Lease], object]]] = [
    ("renew", "lease", lambda w, lease: w.store.renew(lease)),
    ("complete", "lease", lambda w, lease: w.store.complete(lease, "r")),
    ("release", "lease", lambda w, lease: w.store.release(lease)),
    ("fail", "lease", lambda w, lease: w.store.fail(lease, "e")),
    ("complete_many", "leases[0]", lambda w, lease: w.store.complete_many([lease])),
    (
        "complete_and_claim",
        "leases[0]",
        lambda w, lease: w.store.complete_and_claim([lease], "B", 10, 2),
    ),
]
for _field, _values in BAD_LEASE_FIELDS.items():
    for _entry, _argument, _call in LEASE_ENTRIES:
        CASES.append(
            (
                _entry,
                f"{_argument}.{_field}",
                _values,
                lambda w, v, call=_call, field=_field: call(w, _edited(w, field, v)),
            )
        )


def _case_ids() -> Iterator[str]:
    seen: dict[str, int] = {}
    for entry, argument, _, _ in CASES:
        name = f"{entry}-{argument}"
        seen[name] = seen.get(name, 0) + 1
        yield name if seen[name] == 1 else f"{name}-{seen[name]}"


def _describe(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        text = f"<{type(value).__name__} too long to print>"
    return text if len(text) < 60 else text[:57] + "..."


@pytest.mark.parametrize(("entry", "argument", "values", "call"), CASES, ids=list(_case_ids()))
def test_bad_input_is_refused_and_changes_nothing(
    world: World, entry: str, argument: str, values: list[Any], call: Call
) -> None:
    before = snapshot(world.store)
    for value in values:
        what = f"{entry}({argument}={_describe(value)})"
        refusal: tenure.InvalidArgument | None = None
        try:
            call(world, value)
        except tenure.InvalidArgument as exc:
            refusal = exc
        except Exception as exc:  # report which value slipped through, and how
            pytest.fail(f"{what} raised {type(exc).__name__}: {exc}, not InvalidArgument")
        else:
            pytest.fail(f"{what} was accepted")
        named = refusal.argument == argument or refusal.argument.startswith(
            (f"{argument} ", f"{argument}[")
        )
        assert named, f"{what}: error names {refusal.argument!r}: {refusal}"
        assert str(refusal) == f"{refusal.argument}: {refusal.rule}", what
        assert len(refusal.rule) > 10, f"{what}: the rule is not explained: {refusal}"
        assert snapshot(world.store) == before, f"{what} changed the store"
    # The live lease and the store are intact.
    world.store.complete(world.lease, "still mine")
    assert world.store.get("L").state == "done"


@pytest.mark.parametrize(
    "value",
    [0.01, WEEK, dt.timedelta(days=7), dt.timedelta(milliseconds=10), 1, 3600.5],
    ids=repr,
)
def test_ttl_bounds_are_inclusive(store: tenure.Store, value: Any) -> None:
    store.submit("J")
    lease = store.claim("J", "A", value)
    assert lease is not None
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    assert lease.ttl == seconds
    assert math.isclose(lease.lease_until - store.now(), seconds, abs_tol=1e-6)
    assert store.renew(lease, value).ttl == seconds


def test_valid_edge_values(store: tenure.Store) -> None:
    store.submit("a" * 255, queue="q" * 255, delay=0, max_attempts=1)
    store.submit("d", delay=366 * 24 * 3600, max_attempts=1_000_000)
    store.submit("u", {"\u2028": "\ufeff"})  # separators and BOM are text, not controls
    assert store.claim_many("o" * 255, 10, 1000, queues=[f"q{i}" for i in range(64)]) == []
    assert len(store.jobs(limit=1000)) == 3


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/jobs",
        "mysql://user@localhost/db",
        "mongodb://localhost",
        "file:///tmp/tenure.db",
        "sqlite3:///tenure.db",
        "tenure.db",
        "/tmp/tenure.db",
        "sqlite",
        "",
        42,
        b"sqlite:///tenure.db",
    ],
    ids=repr,
)
def test_unknown_url_schemes(url: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.connect(url)
    assert caught.value.argument == "url"
    if isinstance(url, str) and "://" in url:
        assert url.split("://")[0] in str(caught.value)
        assert "sqlite://" in str(caught.value)  # says what is known
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_unknown_scheme_from_the_environment(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TENURE_STORE_URL", "bogus://somewhere")
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.connect()
    assert caught.value.argument == "url"
    assert "bogus" in str(caught.value)


@pytest.mark.parametrize("fragment", ["#frag", "#", "#a=b"])
def test_url_fragments_are_refused_by_every_store(
    url: str, fragment: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fragment used to be ignored by sqlite:// (and refused by postgresql:// alone): a
    '#' left unencoded in a path or password would silently cut the URL short."""
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.connect(url + fragment)
    assert (caught.value.argument, caught.value.rule) == ("url", FRAGMENT_RULE)
    assert sorted(tmp_path.rglob("*")) == before  # nothing was created


@pytest.mark.anyio
async def test_url_fragments_are_refused_async(url: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match="#fragment"):
        await tenure.aio.connect(url + "#frag")


@pytest.mark.anyio
async def test_unknown_url_scheme_async() -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        await tenure.aio.connect("http://example.com")
    assert caught.value.argument == "url"
