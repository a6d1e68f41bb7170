"""Cancel and requeue against claims, renewals and completions, with real OS processes on
every backend: four worker processes drain the jobs (claim, renew, complete) while this
process cancels jobs at random, whatever their state, and requeues some of those it
cancelled at once. Each job has one winner per life: it ends ``done`` with exactly one
accepted completion (and a cancel was told it was done), or ``cancelled`` with none; a
cancel moves the generation past every lease the job had, every holder of it is told
``LeaseLost`` with the reason "cancelled", and a requeued job runs again above it.

And purge against submit: worker processes submit, claim and complete a few shared ids over
and over while this process purges every finished job as fast as it can; a purged id
submitted again must never be granted a generation its earlier lives had."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import tenure
from tests.conformance._support import json_answers

pytestmark = [pytest.mark.races, pytest.mark.slow]

WORKER = Path(__file__).with_name("_cancel_race_worker.py")
PURGE_WORKER = Path(__file__).with_name("_purge_race_worker.py")
PROCESSES = 4
JOBS = 200


def start_workers(
    url: str, stop: Path, worker: Path = WORKER, **config: Any
) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [
                sys.executable,
                str(worker),
                json.dumps({"url": url, "owner": f"p{i}", "seed": i, "stop": str(stop), **config}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]


def test_cancel_races_worker_processes_and_each_job_has_one_winner(
    url: str, tmp_path: Path
) -> None:
    rng = random.Random(7)
    stop = tmp_path / "stop"
    with tenure.connect(url) as store:
        for index in range(JOBS):
            store.submit(f"job-{index:04d}")
        procs = start_workers(url, stop)
        deadline = time.monotonic() + 30
        while not store.jobs(state="leased", limit=1) and time.monotonic() < deadline:
            time.sleep(0.005)  # the workers are up: cancels now meet held leases
        cancels: dict[str, tenure.Job | tenure.JobStateConflict] = {}
        requeued: dict[str, tenure.Job] = {}
        # Cancel half of the jobs while the workers run: every other one is a job held
        # right now (read from the store), the rest drawn at random, whatever their state.
        targets = iter(rng.sample([f"job-{i:04d}" for i in range(JOBS)], JOBS))
        for turn in range(JOBS // 2):
            held = store.jobs(state="leased", limit=4) if turn % 2 == 0 else []
            job_id = held[0].job_id if held else next(targets)
            if job_id in cancels:
                continue
            try:
                cancels[job_id] = store.cancel(job_id, reason="race")
            except tenure.JobStateConflict as conflict:
                cancels[job_id] = conflict
            if isinstance(cancels[job_id], tenure.Job) and rng.random() < 0.5:
                requeued[job_id] = store.requeue(job_id)  # runs again, above the cancel
            time.sleep(rng.uniform(0.0, 0.002))
        stop.touch()
        histories = json_answers(procs, "cancel-race worker")
        events = [event for history in histories for event in history["events"]]
        final = {job_id: store.get(job_id) for job_id in (f"job-{i:04d}" for i in range(JOBS))}

    claims: dict[str, list[int]] = defaultdict(list)
    completions: dict[str, list[int]] = defaultdict(list)
    losses: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["kind"] == "claim":
            claims[event["job"]].append(event["generation"])
        elif event["kind"] == "complete":
            completions[event["job"]].append(event["generation"])
        elif event["kind"] == "lost":
            losses[event["job"]].append(event)

    cancelled_leased = 0
    for job_id, job in final.items():
        assert job.state in ("done", "cancelled"), job
        granted = claims[job_id]
        assert len(granted) == len(set(granted)), (job_id, granted)  # no token twice
        if job_id in requeued:
            cancelled = cancels[job_id]
            assert isinstance(cancelled, tenure.Job), cancelled
            assert job.state == "done", job  # its second life ended as a life must
            assert job.generation > cancelled.generation, (job, cancelled)
            assert completions[job_id] == [job.generation], (job_id, completions[job_id])
            before = [g for g in granted if g < cancelled.generation]
            # Told it was cancelled, or (once the requeued job was claimed again) that a
            # newer lease took the job: either way refused, and only those leases.
            reasons = [loss["reason"] for loss in losses[job_id]]
            assert len(reasons) == len(before), (job_id, reasons, before)
            assert set(reasons) <= {"cancelled", "superseded"}, reasons
            cancelled_leased += bool(before)
        elif job.state == "done":
            assert completions[job_id] == [job.generation], (job_id, completions[job_id])
            assert not losses[job_id], losses[job_id]
            answer = cancels.get(job_id)
            if answer is not None:  # the completion won: the cancel was told so
                assert isinstance(answer, tenure.JobStateConflict), answer
                assert answer.state == "done"
        else:
            assert isinstance(cancels[job_id], tenure.Job), cancels[job_id]
            assert completions[job_id] == [], (job_id, completions[job_id])
            # Every lease the job had lies below its final generation and was told why.
            assert all(generation < job.generation for generation in granted), (job_id, job)
            assert [loss["reason"] for loss in losses[job_id]] == ["cancelled"] * len(granted)
            cancelled_leased += bool(granted)
    # Both ways of winning happened, including cancels of held leases: the race was run.
    assert any(job.state == "done" for job in final.values())
    assert any(job.state == "cancelled" for job in final.values())
    assert cancelled_leased > 0, "no cancel landed on a held lease"
    assert requeued, "nothing was requeued"


def test_purge_races_submitting_processes_and_never_reissues_a_generation(
    url: str, tmp_path: Path
) -> None:
    ids = [f"reborn-{n}" for n in range(3)]
    stop = tmp_path / "stop"
    purged = 0
    with tenure.connect(url) as store:
        # SQLite has one write lock, and its busy handler lets four processes that write in
        # a tight loop take it far more often than the purger (15 purges in 30 s seen on an
        # idle machine): there each worker rests a millisecond between its cycles.
        pause = 0.001 if url.startswith("sqlite") else 0.0
        procs = start_workers(url, stop, PURGE_WORKER, ids=ids, pause=pause)
        deadline = time.monotonic() + 30
        # Purge until the ids have been purged and born again many times (bounded in time).
        while purged < 40 and time.monotonic() < deadline:
            gone = store.purge(older_than=0)
            purged += gone
            if not gone:
                time.sleep(0.001)  # leave SQLite's write lock to the workers for a moment
        stop.touch()
        histories = json_answers(procs, "purge-race worker")
    granted: dict[str, list[int]] = defaultdict(list)
    for history in histories:
        for claim in history["claims"]:
            granted[claim["job"]].append(claim["generation"])
    # 40 is the aim; 20 (each id purged and born again about seven times) is a race run.
    assert purged >= 20, f"only {purged} jobs purged in 30 s: the race was not run"
    for job_id in ids:
        generations = granted[job_id]
        # No token came back after a purge: each generation of each id was granted to one
        # process, once (a lost floor would start a reborn id at generation 1 again).
        assert len(generations) == len(set(generations)), (job_id, sorted(generations))
