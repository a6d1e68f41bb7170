"""Helpers shared by the conformance tests. None of them fakes a store: they read real
stores through the public API, or wrap a real driver to lose a reply after it took effect."""

from __future__ import annotations

import dataclasses
import json
import secrets
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import tenure

_QUEUE_RACE_WORKER = Path(__file__).with_name("_limit_race_worker.py")

# Job fields that depend on when the snapshot was read (as_of, lease_expired) or on which
# call returned it (created: only submit's answer says).
_MOMENT_FIELDS = ("as_of", "lease_expired", "created")


def claim_all(
    store: tenure.Store, *job_ids: str, owner: str = "A", ttl: float = 10
) -> list[tenure.Lease]:
    """Submit each job and claim it by id for ``owner``."""
    leases = []
    for job_id in job_ids:
        store.submit(job_id)
        lease = store.claim(job_id, owner, ttl)
        assert lease is not None
        leases.append(lease)
    return leases


def job_view(job: tenure.Job) -> dict[str, Any]:
    """A job's stored state, without the fields that depend on when it was read."""
    view = job.to_dict()
    for name in _MOMENT_FIELDS:
        view.pop(name)
    return view


def snapshot(store: tenure.Store) -> list[dict[str, Any]]:
    """Every job of the store (up to 1,000), as stored."""
    return [job_view(job) for job in store.jobs(limit=1000)]


def forge(lease: tenure.Lease, **changes: Any) -> tenure.Lease:
    """A lease with some fields changed, each still well-formed: it passes the client's
    checks, so only the store can refuse it."""
    return dataclasses.replace(lease, **changes)


def fresh_secret() -> str:
    """A well-formed lease secret that no claim drew (a forger's best guess)."""
    return secrets.token_hex(24)


class CountingCalls:
    """Wraps a real driver and counts the calls of each operation. A subclass sees each
    call's arguments before it goes on to the driver (`_called`, which may raise instead)
    and its answer after (`_answered`, which may raise instead of returning it)."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self.calls: Counter[str] = Counter()

    def _called(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        pass

    def _answered(self, name: str) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._driver, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            self._called(name, args, kwargs)
            result = attr(*args, **kwargs)
            self._answered(name)
            return result

        return call


class LosingReplies(CountingCalls):
    """Wraps a real driver. The next call of each named operation runs in the store (and
    takes effect there), then its reply is lost: the caller sees `StoreUnavailable` with
    ``outcome_unknown=True``, exactly what a dropped connection after COMMIT looks like."""

    def __init__(self, driver: Any, *operations: str) -> None:
        super().__init__(driver)
        self.pending = set(operations)

    def lose_next(self, *operations: str) -> None:
        self.pending.update(operations)

    def _answered(self, name: str) -> None:
        if name in self.pending:
            self.pending.discard(name)
            raise tenure.StoreUnavailable(
                f"{name}: reply lost after the store applied it (test wrapper)",
                operation=name,
                outcome_unknown=True,
            )


def json_answers(procs: list[subprocess.Popen[str]], what: str, timeout: float = 90) -> list[Any]:
    """The JSON document each race process printed, in order; every one must exit 0
    within ``timeout`` seconds (else all are killed and the test fails, naming ``what``)."""
    answers = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            pytest.fail(f"a {what} did not finish within {timeout:g} s")
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    return answers


def run_queue_race(
    url: str, tmp_path: Path, processes: int, seconds: float, what: str, **options: Any
) -> list[Any]:
    """Start ``processes`` queue-race workers (_limit_race_worker.py) on ``url``, worker
    ``i`` as owner ``p{i}`` with seed ``i`` and ``options`` (``i`` for an option's value
    that is a function of it), let them race for ``seconds`` once all are connected, stop
    them and return their JSON answers (`json_answers`, naming ``what``)."""
    stop = tmp_path / "stop"
    procs = []
    for i in range(processes):
        spec = {key: value(i) if callable(value) else value for key, value in options.items()}
        spec.update(url=url, owner=f"p{i}", seed=i, stop=str(stop))
        command = [sys.executable, str(_QUEUE_RACE_WORKER), json.dumps(spec)]
        procs.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("ready-*"))) < processes and time.monotonic() < deadline:
        time.sleep(0.01)  # every worker is connected: the race starts now
    time.sleep(seconds)  # the race's length, not a condition of correctness
    stop.touch()
    return json_answers(procs, what)


def check_one_job_per_key(store: tenure.Store, answers: list[tenure.Job], keys: int) -> None:
    """Unique jobs (issue #18): of ``answers`` to submits of keys k0, k1... one created the
    job of each key, every answer names that job, and the store holds one job per key."""
    created = {job.unique_key: job.job_id for job in answers if job.created}
    assert len([job for job in answers if job.created]) == keys, answers
    assert sorted(created) == sorted(f"k{k}" for k in range(keys))
    for job in answers:
        assert job.job_id == created[job.unique_key], job
    stored = [job.unique_key for job in store.jobs(limit=1000)]
    assert sorted(stored) == sorted(created)


def counted_stats(store: tenure.Store) -> dict[str, tuple[Any, ...]]:
    """What `Store.queue_stats` answers, per queue: (ready, scheduled, leased, expired,
    oldest_ready_at)."""
    stats = store.queue_stats()
    assert stats is not None
    return {
        q.queue: (q.ready, q.scheduled, q.leased, q.expired, q.oldest_ready_at)
        for q in stats.queues
    }


def recomputed_stats(store: tenure.Store) -> dict[str, tuple[Any, ...]]:
    """The same, recomputed from the jobs themselves (up to 1,000)."""
    now = store.now()
    counts: dict[str, list[Any]] = defaultdict(lambda: [0, 0, 0, 0, None])
    for job in store.jobs(limit=1000):
        if job.state == "ready":
            due = job.available_at <= now
            counts[job.queue][0 if due else 1] += 1
            oldest = counts[job.queue][4]
            if due and (oldest is None or job.available_at < oldest):
                counts[job.queue][4] = job.available_at
        elif job.state == "leased":
            assert job.lease_until is not None
            counts[job.queue][2 if job.lease_until > now else 3] += 1
    return {queue: tuple(found) for queue, found in counts.items()}
