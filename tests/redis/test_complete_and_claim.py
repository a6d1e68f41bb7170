"""complete_and_claim on Redis: one script run per call, at one store time."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tenure._protocol import Status, new_secret
from tenure.stores.redis._common import SCRIPTS
from tests.redis._support import AWKWARD_IDS, cached, completion, count_requests


def test_one_script_run_for_completions_and_claims(
    real_store: tenure.Store, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(30):
        real_store.submit(f"job-{number:02}")
    leases = real_store.claim_many("A", 10, 10)
    assert [lease.job_id for lease in leases] == [f"job-{n:02}" for n in range(10)]
    cached(raw, "complete_and_claim")
    sent = count_requests(real_store, monkeypatch)
    lost, claimed = real_store.complete_and_claim(leases, "A", 10, 10, results=list(range(10)))
    assert lost == []
    assert [command[0] for command in sent] == ["EVALSHA"]
    # clock, the paused, limits and rates hashes, the 10 job keys, the queue's set
    assert sent[0][2] == "15"  # (the key count, sent as text)
    assert [lease.job_id for lease in claimed] == [f"job-{n:02}" for n in range(10, 20)]
    assert {lease.generation for lease in claimed} == {1}
    assert [real_store.get(f"job-{n:02}").result for n in range(10)] == list(range(10))
    assert [real_store.get(f"job-{n:02}").state for n in range(10, 21)] == ["leased"] * 10 + [
        "ready"
    ]


def test_reloads_a_flushed_script(
    real_store: tenure.Store, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_store.submit("a")
    real_store.submit("b")
    lease = real_store.claim("a", "A", 10)
    assert lease is not None
    raw.script_flush()
    sent = count_requests(real_store, monkeypatch)
    lost, claimed = real_store.complete_and_claim([lease], "A", 10, 5)
    assert lost == []
    assert [command[0] for command in sent] == ["EVALSHA", "EVAL"]
    assert [lease.job_id for lease in claimed] == ["b"]
    assert (real_store.get("a").state, real_store.get("b").state) == ("done", "leased")


def test_driver_answers_completions_in_order_then_claims_at_one_time(
    real_store: tenure.Store, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for job_id in ["fresh", "stale", "next-1", "next-2", "next-3"]:
        real_store.submit(job_id)
    fresh = real_store.claim("fresh", "A", 10)
    stale = real_store.claim("stale", "A", 10)
    assert fresh is not None
    assert stale is not None
    real_store.release(stale)  # back in the queue, due from now: behind the others
    driver: Any = real_store._driver
    hashes = [new_secret()[1] for _ in range(5)]
    cached(raw, "complete_and_claim")
    sent = count_requests(real_store, monkeypatch)
    completed, claimed = driver.complete_and_claim(
        [completion(stale, "1"), completion(fresh, "2")], "B", 10, ["default"], hashes
    )
    assert len(sent) == 1
    assert [(o.status, o.row and o.row.job_id) for o in completed] == [
        (Status.MISSED, "stale"),
        (Status.APPLIED, None),  # an applied completion's row is left out of the reply
    ]
    # The completions saw the store before the claim: the released job as it was then.
    assert completed[0].row is not None
    assert (completed[0].row.state, completed[0].row.generation) == ("ready", 1)
    # The claim then took every claimable job, the released one last (due since release).
    assert [(o.status, o.row and (o.row.job_id, o.row.generation)) for o in claimed] == [
        (Status.APPLIED, ("next-1", 1)),
        (Status.APPLIED, ("next-2", 1)),
        (Status.APPLIED, ("next-3", 1)),
        (Status.APPLIED, ("stale", 2)),
    ]
    assert [o.row and (o.row.owner, o.row.secret_hash) for o in claimed] == [
        ("B", secret_hash) for secret_hash in hashes[:4]
    ]
    assert len({o.now for o in completed + claimed}) == 1  # one store time for the whole run
    assert (real_store.get("fresh").state, real_store.get("fresh").result) == ("done", 2)


def test_driver_accepts_empty_lists(
    real_store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_store.submit("a")
    lease = real_store.claim("a", "A", 10)
    assert lease is not None
    driver: Any = real_store._driver
    sent = count_requests(real_store, monkeypatch)
    assert driver.complete_and_claim([], "A", 10, ["default"], []) == ([], [])
    assert sent == []
    completed, claimed = driver.complete_and_claim([completion(lease)], "A", 10, ["default"], [])
    assert [o.status for o in completed] == [Status.APPLIED]
    assert claimed == []
    real_store.submit("b")
    completed, claimed = driver.complete_and_claim([], "A", 10, ["default"], ["h"])
    assert completed == []
    assert [(o.status, o.row and o.row.job_id) for o in claimed] == [(Status.APPLIED, "b")]
    ours = SCRIPTS["complete_and_claim"].sha
    assert [command[:2] for command in sent if command[1] == ours] == [("EVALSHA", ours)] * 2


@pytest.mark.parametrize("queue", ["default", "queue:with {tags} and spaces ✓"])
def test_awkward_ids_and_queues(real_store: tenure.Store, queue: str) -> None:
    for job_id in AWKWARD_IDS:
        real_store.submit(job_id, queue=queue)
    half = len(AWKWARD_IDS) // 2
    first = real_store.claim_many("worker :{*} ✓", 10, half, queues=[queue])
    results = [{"id": lease.job_id, "text": '"\\/\n\u0001 ✓ 🚀'} for lease in first]
    lost, rest = real_store.complete_and_claim(
        first, "worker :{*} ✓", 10, len(AWKWARD_IDS), results=results, queues=[queue]
    )
    assert lost == []
    assert [lease.job_id for lease in first + rest] == AWKWARD_IDS
    for lease, result in zip(first, results, strict=True):
        assert (real_store.get(lease.job_id).state, real_store.get(lease.job_id).result) == (
            "done",
            result,
        )
    assert {real_store.get(lease.job_id).state for lease in rest} == {"leased"}
