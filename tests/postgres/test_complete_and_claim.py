"""complete_and_claim on PostgreSQL: one statement (one round trip, one commit), and what a
reply lost after that commit leaves behind (the conformance suite has the semantics)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import tenure
from tests.postgres._support import claimed_leases, completion, count_statements, driver_of
from tests.proxy import Proxy


def test_one_statement_completes_and_claims(
    real_store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    leases = claimed_leases(real_store, *(f"J{i:02}" for i in range(10)))
    for index in range(10):
        real_store.submit(f"K{index:02}")
    calls = count_statements(driver_of(real_store), monkeypatch)
    lost, claimed = real_store.complete_and_claim(leases, "A", 30, 10, results=list(range(10)))
    assert calls == [("complete_and_claim", 10)]
    assert lost == []
    assert [lease.job_id for lease in claimed] == [f"K{i:02}" for i in range(10)]
    jobs = {job.job_id: job for job in real_store.jobs(limit=100)}
    assert [jobs[f"J{i:02}"].result for i in range(10)] == list(range(10))
    assert {jobs[f"K{i:02}"].state for i in range(10)} == {"leased"}


def test_lost_reply_is_recovered_not_repeated_and_the_completions_can_be(
    proxied: tuple[Proxy, str],
    open_real_store: Callable[..., tenure.Store],
) -> None:
    proxy, url = proxied
    store = open_real_store(url=url)
    leases = claimed_leases(store, "A", "B")
    store.submit("C")
    store.submit("D")
    proxy.lose_next_reply()
    lost, (claimed,) = store.complete_and_claim(leases, "W", 30, 1, results=["a", "b"])
    assert proxy.replies_lost == 1
    # It had committed: both done (the store repeated the completions, which is safe), and
    # the lease it took of C found by its secret; no blind repeat took D.
    assert lost == []
    assert (claimed.job_id, claimed.owner, claimed.generation) == ("C", "W", 1)
    jobs = {job.job_id: job for job in store.jobs()}
    assert [(jobs[k].state, jobs[k].result) for k in "AB"] == [("done", "a"), ("done", "b")]
    assert (jobs["C"].state, jobs["C"].owner, jobs["C"].generation) == ("leased", "W", 1)
    assert jobs["D"].state == "ready"
    # Repeating the completions is safe: recognised, nothing changes.
    assert store.complete_many(leases, ["a", "b"]) == []
    assert store.get("A").updated_at == jobs["A"].updated_at
    # The driver's answer for one completion, one claim, when the reply arrives.
    driver = driver_of(store)
    (more,) = claimed_leases(store, "E")
    completed, claimed = driver.complete_and_claim(
        [completion(more, '"e"')], "W", 30, ("default",), ["h1"]
    )
    assert [o.status for o in completed] == ["applied"]
    assert [(o.row.job_id if o.row else None) for o in claimed] == ["D"]
