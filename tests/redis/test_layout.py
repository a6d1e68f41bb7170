"""Key layout: ids are data, never key syntax; every key of a store shares one hash tag."""

from __future__ import annotations

from typing import Any

import pytest
from redis.crc import key_slot
from redis.exceptions import NoScriptError

import tenure
from tenure.stores.redis import Keys, encode
from tests.redis._support import AWKWARD_IDS


def test_encoding_is_injective_and_free_of_key_syntax() -> None:
    encoded = [encode(job_id) for job_id in AWKWARD_IDS]
    assert len(set(encoded)) == len(AWKWARD_IDS)
    for text in encoded:
        assert not set(text) & set("{}:*?[] \\")
    assert encode("a:b") != encode("a%3Ab")


@pytest.mark.parametrize("queue", ["default", "queue:with {tags} and spaces ✓"])
def test_awkward_ids_round_trip(
    real_store: tenure.Store, raw: Any, prefix: str, queue: str
) -> None:
    for number, job_id in enumerate(AWKWARD_IDS):
        job = real_store.submit(job_id, {"n": number}, queue=queue)
        assert (job.job_id, job.queue, job.payload) == (job_id, queue, {"n": number})
    # Claimed in submission order, each under its own id.
    leases = real_store.claim_many("worker :{*}", 10, len(AWKWARD_IDS), queues=[queue])
    assert [lease.job_id for lease in leases] == AWKWARD_IDS
    for lease in leases:
        real_store.renew(lease)
        real_store.complete(lease, lease.job_id)
    for job_id in AWKWARD_IDS:
        job = real_store.get(job_id)
        assert (job.state, job.result, job.owner) == ("done", job_id, "worker :{*}")
    listed = real_store.jobs(queue=queue, limit=1000)
    assert [job.job_id for job in listed] == AWKWARD_IDS
    with pytest.raises(tenure.JobNotFound):
        real_store.get("a%3Ab" + "x")

    # Every key lives under the store's hash tag, hence in one Cluster slot.
    keys = [key.decode() for key in raw.scan_iter(match="*" + prefix + "*", count=1000)]
    tag = "{" + prefix + "}"
    assert keys
    assert all(key.startswith(tag + ":") for key in keys)
    assert {key_slot(key.encode()) for key in keys} == {key_slot(tag.encode())}
    jobs = [key for key in keys if key.startswith(tag + ":j:")]
    # One hash per job, and beside it its attempt history (the job's key + ":att").
    histories = {key for key in jobs if key.endswith(":att")}
    assert len(jobs) - len(histories) == len(AWKWARD_IDS)
    assert histories == {Keys(prefix).job(job_id) + ":att" for job_id in AWKWARD_IDS}


def test_one_hash_per_job_under_the_encoded_id(
    real_store: tenure.Store, raw: Any, prefix: str
) -> None:
    real_store.submit("a:b {c}", "payload")
    key = Keys(prefix).job("a:b {c}")
    assert key == "{" + prefix + "}:j:a%3Ab%20%7Bc%7D"
    fields = {k.decode(): v.decode() for k, v in raw.hgetall(key).items()}
    assert fields["id"] == "a:b {c}"
    assert fields["s"] == "ready"
    assert fields["g"] == "0"


def test_stores_with_different_prefixes_are_separate(
    url: str, open_real_store: Any, raw: Any
) -> None:
    other_url = url.replace("prefix=", "prefix=other-")
    first, second = open_real_store(), open_real_store(url=other_url)
    try:
        first.submit("J", 1)
        with pytest.raises(tenure.JobNotFound):
            second.get("J")
        second.submit("J", 2)
        assert (first.get("J").payload, second.get("J").payload) == (1, 2)
        assert first.store_id != second.store_id
    finally:
        prefix = other_url.rpartition("prefix=")[2]
        keys = list(raw.scan_iter(match="{" + prefix + "}:*"))
        if keys:
            raw.delete(*keys)


def test_listing_by_state_walks_past_the_scan_budget(real_store: tenure.Store) -> None:
    # list.lua examines 500 jobs per run; the driver continues the walk with a cursor.
    for number in range(1203):
        real_store.submit(f"job-{number:04d}")
    for job_id in ("job-0007", "job-0700", "job-1202"):
        lease = real_store.claim(job_id, "w", 10)
        assert lease is not None
        real_store.complete(lease)
    assert [job.job_id for job in real_store.jobs(state="done", limit=10)] == [
        "job-0007",
        "job-0700",
        "job-1202",
    ]
    assert [job.job_id for job in real_store.jobs(state="done", limit=2)] == [
        "job-0007",
        "job-0700",
    ]
    ready = real_store.jobs(state="ready", limit=1000)
    assert len(ready) == 1000
    assert ready[0].job_id == "job-0000"
    assert len(real_store.jobs(limit=1000)) == 1000


def test_batch_claim_is_one_script_run(real_store: tenure.Store, monkeypatch: Any) -> None:
    for number in range(50):
        real_store.submit(f"J{number:02d}")
    driver: Any = real_store._driver
    ran: list[tuple[str, str]] = []  # requests the server ran: (operation, command)
    not_cached: list[str] = []  # EVALSHA refused with NOSCRIPT: nothing ran
    send = driver._send

    def counting_send(operation: str, command: Any) -> Any:
        try:
            answer = send(operation, command)
        except NoScriptError:
            # The shared server's script cache may have been emptied (another test's SCRIPT
            # FLUSH, or the script never loaded there yet): the driver sends the text next.
            not_cached.append(operation)
            raise
        ran.append((operation, command[0]))
        return answer

    monkeypatch.setattr(driver, "_send", counting_send)
    leases = real_store.claim_many("w", 10, 40)
    # One script run for the whole batch: one EVALSHA, or after a NOSCRIPT one EVAL.
    assert ran == [("claim_next", "EVAL" if not_cached else "EVALSHA")], (ran, not_cached)
    assert not_cached in ([], ["claim_next"])
    assert [lease.job_id for lease in leases] == [f"J{n:02d}" for n in range(40)]
    assert len({lease.secret for lease in leases}) == 40
    assert {lease.generation for lease in leases} == {1}
