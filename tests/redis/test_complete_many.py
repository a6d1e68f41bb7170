"""complete_many on Redis: one script run per call, answers in input order, any job id."""

from __future__ import annotations

from typing import Any

import pytest

import tenure
from tenure._protocol import Status
from tenure.stores.redis import Keys
from tests.backends import REDIS
from tests.redis._support import AWKWARD_IDS, cached, completion, count_requests


def test_one_script_run_for_the_whole_batch(
    real_store: tenure.Store, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(20):
        real_store.submit(f"job-{number}")
    leases = real_store.claim_many("A", 10, 20)
    assert len(leases) == 20
    cached(raw, "complete_many")
    sent = count_requests(real_store, monkeypatch)
    assert real_store.complete_many(leases, list(range(20))) == []
    assert [command[0] for command in sent] == ["EVALSHA"]
    assert sent[0][2] == "21"  # the clock and the 20 job keys, all declared
    assert [real_store.get(f"job-{n}").result for n in range(20)] == list(range(20))


def test_reloads_a_flushed_script(
    real_store: tenure.Store, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_store.submit("a")
    lease = real_store.claim("a", "A", 10)
    assert lease is not None
    raw.script_flush()
    sent = count_requests(real_store, monkeypatch)
    assert real_store.complete_many([lease]) == []
    assert [command[0] for command in sent] == ["EVALSHA", "EVAL"]
    assert real_store.get("a").state == "done"


def test_answers_in_input_order_with_stale_missing_and_done(
    real_store: tenure.Store, raw: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = ["fresh-1", "done-already", "stale", "gone", "fresh-2", "other-owner"]
    for job_id in ids:
        real_store.submit(job_id)
    leases = {job_id: real_store.claim(job_id, "A", 10) for job_id in ids}
    assert all(leases.values())
    lease = {job_id: value for job_id, value in leases.items() if value is not None}
    real_store.complete(lease["done-already"], "first")
    real_store.release(lease["stale"])
    raw.delete(Keys(prefix).job("gone"))
    real_store.release(lease["other-owner"])
    taken = real_store.claim("other-owner", "B", 10)
    assert taken is not None

    # Driver level: one outcome per completion, in the order given.
    order = ["stale", "fresh-1", "gone", "done-already", "other-owner", "fresh-2"]
    driver: Any = real_store._driver
    cached(raw, "complete_many")
    sent = count_requests(real_store, monkeypatch)
    outcomes = driver.complete_many([completion(lease[job_id], "r") for job_id in order])
    assert len(sent) == 1
    assert [(o.status, o.row and o.row.job_id) for o in outcomes] == [
        (Status.MISSED, "stale"),
        (Status.APPLIED, None),  # an applied completion's row is left out of the reply
        (Status.MISSING, None),
        (Status.MISSED, "done-already"),
        (Status.MISSED, "other-owner"),
        (Status.APPLIED, None),
    ]
    assert len({o.now for o in outcomes}) == 1  # one store time for the whole run
    rows = {o.row.job_id: o.row for o in outcomes if o.row is not None}
    assert (rows["stale"].state, rows["stale"].lease_until) == ("ready", None)  # null field
    assert (rows["done-already"].state, rows["done-already"].result) == ("done", '"first"')
    assert (rows["other-owner"].owner, rows["other-owner"].generation) == ("B", 2)
    fresh = driver.get("fresh-1").row
    assert (fresh.state, fresh.result) == ("done", "r")
    # The stale completions changed nothing.
    assert real_store.get("other-owner").state == "leased"
    assert real_store.get("stale").state == "ready"
    assert real_store.get("done-already").result == "first"


def test_store_reports_the_stale_leases_in_order(real_store: tenure.Store) -> None:
    for job_id in "abcd":
        real_store.submit(job_id)
    leases = [real_store.claim(job_id, "A", 10) for job_id in "abcd"]
    assert all(leases)
    held = [lease for lease in leases if lease is not None]
    real_store.release(held[3])
    real_store.release(held[1])
    real_store.complete(held[2])  # a repeat by the same lease is a success
    lost = real_store.complete_many(held)
    assert [(error.job_id, error.generation) for error in lost] == [("b", 1), ("d", 1)]
    assert [real_store.get(job_id).state for job_id in "abcd"] == ["done", "ready", "done", "ready"]


@pytest.mark.parametrize("queue", ["default", "queue:with {tags} and spaces ✓"])
def test_awkward_ids_and_results(real_store: tenure.Store, queue: str) -> None:
    for job_id in AWKWARD_IDS:
        real_store.submit(job_id, queue=queue)
    leases = real_store.claim_many("worker :{*} ✓", 10, len(AWKWARD_IDS), queues=[queue])
    assert [lease.job_id for lease in leases] == AWKWARD_IDS
    results = [{"id": lease.job_id, "text": '"\\/\n\u0001 ✓ 🚀'} for lease in leases]
    assert real_store.complete_many(leases, results) == []
    for job_id, result in zip(AWKWARD_IDS, results, strict=True):
        job = real_store.get(job_id)
        assert (job.state, job.result, job.owner) == ("done", result, "worker :{*} ✓")
    # Repeating the call is a success and changes nothing; without the results it is not
    # a repeat, and each completion is refused.
    assert real_store.complete_many(leases, results) == []
    assert len(real_store.complete_many(leases)) == len(leases)
    assert real_store.get(AWKWARD_IDS[0]).result == results[0]


@pytest.mark.parametrize("start", [2**53, 2**63 - 3])
def test_generations_stay_exact(real_store: tenure.Store, url: str, start: int) -> None:
    real_store.submit("J")
    real_store.submit("K")
    REDIS.set_generation(url, "J", start)
    first = real_store.claim("J", "A", 10)
    assert first is not None
    real_store.release(first)
    second = real_store.claim("J", "B", 10)
    other = real_store.claim("K", "B", 10)
    assert second is not None
    assert other is not None
    assert second.generation == start + 2
    # The neighbouring generation (equal as a double) is stale.
    lost = real_store.complete_many([first, other])
    assert [(error.job_id, error.generation, error.current_generation) for error in lost] == [
        ("J", start + 1, start + 2)
    ]
    assert real_store.complete_many([second]) == []
    assert real_store.get("J").generation == start + 2
