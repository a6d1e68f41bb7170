"""submit_many.lua writes most of a batch's jobs as a COPY of the batch's first job of the
same kind and then sets their own fields (Redis 6.2 and newer); an older server refuses COPY
and the script writes every job in full. Both must leave the very same store: the same keys,
fields, values, set members and scores, and the same hash encodings. Checked by running one
batch on the suite's server and on a throwaway ``redis-server`` of the test's own without
COPY (``rename-command COPY ""``), the two stores at the same manual store time and key
prefix, and comparing everything but each store's random identity.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import tenure
from tenure.chaos import free_port
from tenure.chaos._servers import wait_for_port
from tests.backends import unavailable


@pytest.fixture
def without_copy(tmp_path: Path) -> Iterator[str]:
    """The URL of a redis-server of this test's own that does not know COPY."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--save", "", "--appendonly", "no", "--rename-command", "COPY", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, 15, "redis-server")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        process.wait()


def _dump(client: Any, prefix: str) -> dict[str, Any]:
    """Every key of the store but its identity (clock, meta), with its value and encoding."""
    dump: dict[str, Any] = {}
    for key in sorted(client.scan_iter(match="{" + prefix + "}:*", count=1000)):
        name = key.decode()
        if ":clock" in name or name.endswith(":meta"):
            continue
        kind = client.type(key).decode()
        if kind == "hash":
            value: Any = client.hgetall(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        else:
            value = client.get(key)
        dump[name] = (kind, client.object("encoding", key), value)
    return dump


def _batch() -> list[dict[str, Any]]:
    big = "x" * 200  # above hash-max-listpack-value: its job's hash is a hash table
    jobs: list[dict[str, Any]] = [
        {"job_id": "big-first", "payload": big},  # a model candidate that is not compact
        {"job_id": "a", "payload": {"n": 1}},
        {"job_id": "b", "payload": {"n": 22}},
        {"job_id": "none-1"},
        {"job_id": "none-2"},
        {"job_id": "big-later", "payload": big},
        {"job_id": "c", "payload": [1, 2]},
        {"job_id": "with space", "payload": 3},  # an encoded id: a spec of its own
        {"job_id": "prio", "payload": 4, "priority": 7},
        {"job_id": "late", "payload": 5, "delay": 30},
        {"job_id": "timed", "payload": 6, "timeout": 12.5},
        {"job_id": "headed", "payload": 7, "headers": {"h": "v"}},
        {"job_id": "keyed", "payload": 8, "unique_key": "k", "unique_for": 60},
        {"job_id": "keyed-again", "payload": 9, "unique_key": "k"},
        {"job_id": "other-queue", "payload": 10, "queue": "q2"},
    ]
    jobs += [{"job_id": f"j{n}", "payload": {"n": n}} for n in range(40)]
    return jobs


def test_copied_jobs_are_the_jobs_written_in_full(without_copy: str, url: str, raw: Any) -> None:
    version = raw.info("server")["redis_version"]
    if tuple(int(x) for x in version.split(".")[:2]) < (6, 2):
        pytest.skip(f"the suite's Redis ({version}) has no COPY: both runs would write in full")
    prefix = f"copy-{uuid.uuid4().hex[:10]}"
    own = redis.Redis.from_url(without_copy)
    copies = raw.info("commandstats").get("cmdstat_copy", {}).get("calls", 0)
    dumps = []
    for server, client in ((url.split("?", 1)[0], raw), (without_copy, own)):
        clock = tenure.ManualClock(1_800_000_000.25)
        with tenure.connect(f"{server}?prefix={prefix}", store_clock=clock) as store:
            first = store.submit_many(_batch())
            store.submit("existing", {"n": "x"})
            clock.advance(1.5)
            second = store.submit_many([*_batch()[:3], {"job_id": "existing"}, {"job_id": "z"}])
        try:
            dumps.append((_dump(client, prefix), first, second))
        finally:
            for key in client.scan_iter(match="{" + prefix + "}*", count=1000):
                client.delete(key)
    own.close()
    (copied, first_a, second_a), (full, first_b, second_b) = dumps
    # The first run did copy (most of its 58 new jobs), the second could not.
    assert raw.info("commandstats")["cmdstat_copy"]["calls"] - copies >= 40
    assert copied == full
    assert len(copied) > 50
    assert [job.to_dict() for job in first_a] == [job.to_dict() for job in first_b]
    assert [job.to_dict() for job in second_a] == [job.to_dict() for job in second_b]
    assert [job.created for job in second_a] == [False, False, False, False, True]
