"""Unique keys under real concurrency (issue #18): several OS processes submit, at the same
moment, one job each for the same keys (one by one and in batches), on every store and on
its own clock. Exactly one job is created per key, and every answer names that job."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tenure
from tests.conformance._support import check_one_job_per_key, json_answers

pytestmark = [pytest.mark.races]

WORKER = Path(__file__).with_name("_unique_race_worker.py")
PROCESSES = 4
KEYS = 20


def test_processes_racing_for_keys_create_one_job_per_key(
    url: str, real_store: tenure.Store, tmp_path: Path
) -> None:
    real_store.now()  # the store (schema, file) exists before the processes race to open it
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{i}" for i in range(PROCESSES)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                json.dumps(
                    {
                        "url": url,
                        "owner": f"p{i}",
                        "keys": KEYS,
                        "ready": str(ready[i]),
                        "go": str(go),
                    }
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    deadline = time.monotonic() + 60
    while not all(path.exists() for path in ready):
        if time.monotonic() > deadline or any(proc.poll() is not None for proc in procs):
            break  # json_answers reports the process that failed
        time.sleep(0.005)
    go.touch()
    answers = [
        tenure.Job(**{**EMPTY, **answer})
        for history in json_answers(procs, "unique-race process")
        for answer in history
    ]
    assert len(answers) == PROCESSES * KEYS
    check_one_job_per_key(real_store, answers, KEYS)


# The fields check_one_job_per_key does not look at.
EMPTY = dict(
    queue="default",
    state="ready",
    owner=None,
    generation=0,
    lease_until=None,
    attempts=0,
    max_attempts=5,
    payload=None,
    result=None,
    error=None,
    available_at=0.0,
    created_at=0.0,
    updated_at=0.0,
    as_of=0.0,
)
