"""The protocol against a small reference model, step by step (Hypothesis stateful testing).

The model below is the whole lease protocol in plain Python: store time with its floor,
claim/claim_next (with burial of poison jobs), renew/complete/release/fail conditioned on
owner, generation, secret and expiry, renew_many and complete_many (each item so checked,
all at one store time), complete_and_claim (completions first, then the claim, at one
store time), paused queues (claims skip them), store
schedules (upserts by name at store time), queue limits (claims take a limited queue's
jobs only while fewer of its leases run), queue rates (a token bucket by store time, one
token per lease granted), job control
(cancel, requeue, delete, and the store-wide generation floor every claim stays above), and
the rule that repeating an operation that already took effect succeeds (the same operation,
with the same result or error: another settle of an ended lease is refused). Hypothesis
drives a real store and the model with the same random sequence of operations (several
owners, stale and forged leases, the clock moving forwards and being stepped backwards) and
compares every answer and every job after every step. Jobs carry priorities (issue #18):
the model's claims take the highest priority first, then the oldest (available_at, seq).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import tenure
from tenure._queue_stats import QueueStats
from tenure.models import ATTEMPTS_KEPT
from tests.backends import Backend
from tests.conformance._support import forge, fresh_secret

MAX_GENERATION = 2**63 - 1
TOLERANCE = 1e-3  # seconds: stores may keep timestamps in microseconds
BURIED = "<any error: buried>"


class ModelLeaseLost(Exception):
    pass


class ModelJobNotFound(Exception):
    pass


class ModelStateConflict(Exception):
    pass


FINISHED = ("done", "dead", "cancelled")


@dataclass
class ModelJob:
    job_id: str
    queue: str
    seq: int
    max_attempts: int
    available_at: float
    priority: int = 0
    state: str = "ready"
    owner: str | None = None
    generation: int = 0
    secret: int | None = None
    settled_by: str | None = None  # the operation that ended the lease (the store's receipt)
    lease_until: float | None = None
    attempts: int = 0
    result: Any = None
    error: str | None = None
    # The attempt history (Store.attempts): [generation, owner, started, ended, ending, error]
    history: list[list[Any]] = dataclasses.field(default_factory=list)
    # Unique jobs (issue #18): the key and window it was submitted with; when it finished.
    unique_key: str | None = None
    unique_for: float | None = None
    finished_at: float | None = None

    def holds(self, key: str, now: float) -> bool:
        """Whether this job (the last one to take ``key``) holds it at ``now``."""
        if self.unique_key != key:
            return False  # its id was submitted again without the key
        if self.state in ("ready", "leased"):
            return True
        assert self.finished_at is not None
        return self.unique_for is not None and self.finished_at + self.unique_for > now

    def end_attempt(self, ending: str, now: float, error: str | None = None) -> None:
        """The current lease ended: its attempt (the last, still open) records how."""
        if self.history and self.history[-1][3] is None:
            self.history[-1][3:] = [now, ending, error]


@dataclass(frozen=True)
class ModelLease:
    job_id: str
    owner: str
    generation: int
    secret: int
    ttl: float
    lease_until: float
    attempt: int


class Model:
    """The reference: what a store must answer, computed without any store."""

    def __init__(
        self, clock: tenure.ManualClock, follows_boot_clock: bool, shared: dict[str, int]
    ) -> None:
        self.clock = clock
        # The store's generation floor, store-wide: shared by the examples of one store.
        self.shared = shared
        self.follows_boot_clock = follows_boot_clock
        self.anchor: tuple[str, float, float] | None = None  # boot id, store time, boot time
        self.floor = -math.inf
        self.jobs: dict[str, ModelJob] = {}
        self.seq = itertools.count()
        self.secrets = itertools.count(1)
        self.paused: set[str] = set()  # claims by queue skip these (issue #18)
        self.limits: dict[str, int] = {}  # at most so many running leases (issue #18)
        # Token buckets (issue #18): queue -> [per_second, burst, tokens, at]; tokens were
        # held at store time at (-inf: full, as a rate just set starts).
        self.rates: dict[str, list[float]] = {}
        # Store schedules by name: (created_at, updated_at, cron, queue), store time.
        self.schedules: dict[str, tuple[float, float, str, str]] = {}
        self.holders: dict[str, str] = {}  # unique key -> the job id that last took it

    def tick(self) -> float:
        """Store time for a write (or now()): the host's wall clock, or (SQLite) its boot
        clock from where the boot's first write anchored it; never below the floor."""
        now = self.clock.time()
        if self.follows_boot_clock:
            boot_id, boot_now = self.clock.boot()
            if self.anchor is None or self.anchor[0] != boot_id:
                self.anchor = (boot_id, max(self.floor, now), boot_now)
            now = self.anchor[1] + (boot_now - self.anchor[2])
        self.floor = max(self.floor, now)
        return self.floor

    def submit(
        self, job_id: str, queue: str, delay: float, max_attempts: int, priority: int = 0
    ) -> ModelJob:
        now = self.tick()
        if job_id not in self.jobs:
            self.jobs[job_id] = ModelJob(
                job_id, queue, next(self.seq), max_attempts, now + delay, priority
            )
        return self.jobs[job_id]

    def submit_unique(
        self, job_id: str, queue: str, key: str, window: float | None
    ) -> tuple[ModelJob, bool]:
        """Issue #18: the job, and whether this submit created it."""
        now = self.tick()
        if job_id in self.jobs:
            return self.jobs[job_id], False
        holder = self.jobs.get(self.holders.get(key, ""))
        if holder is not None and holder.holds(key, now):
            return holder, False
        job = ModelJob(job_id, queue, next(self.seq), 5, now, unique_key=key, unique_for=window)
        self.jobs[job_id] = job
        self.holders[key] = job_id
        return job, True

    def _grant(self, job: ModelJob, owner: str, ttl: float, now: float) -> ModelLease:
        if job.state == "leased":
            job.end_attempt("lost", now)  # expired, and taken over at a newer generation
        job.state = "leased"
        job.owner = owner
        job.generation = max(job.generation, self.shared["floor"]) + 1
        job.secret = next(self.secrets)
        job.settled_by = None
        job.lease_until = job.available_at = now + ttl
        job.attempts += 1
        job.history.append([job.generation, owner, now, None, None, None])
        del job.history[:-ATTEMPTS_KEPT]
        return ModelLease(
            job.job_id, owner, job.generation, job.secret, ttl, now + ttl, job.attempts
        )

    @staticmethod
    def _bury(job: ModelJob, now: float) -> None:
        job.state = "dead"
        job.finished_at = now
        job.secret = None
        job.lease_until = None
        job.error = job.error if job.error is not None else BURIED
        job.end_attempt("dead", now, job.error)

    @staticmethod
    def _due(job: ModelJob, now: float) -> bool:
        return (
            job.state in ("ready", "leased")
            and job.available_at <= now
            and job.generation < MAX_GENERATION
        )

    def _room(self, queue: str, now: float) -> float:
        """How many more leases the queue may have at ``now`` (inf: unlimited): its limit's
        room and its bucket's whole tokens, the smaller."""
        room = math.inf
        if queue in self.limits:
            running = sum(
                1
                for j in self.jobs.values()
                if j.queue == queue
                and j.state == "leased"
                and j.lease_until is not None
                and j.lease_until > now
            )
            room = self.limits[queue] - running
        if queue in self.rates:
            # A token due within 1e-5 s counts as there (the stores' rounding allowance).
            room = min(room, math.floor(self._tokens(queue, now) + 1e-5 * self.rates[queue][0]))
        return room

    def _tokens(self, queue: str, now: float) -> float:
        rate, burst, tokens, at = self.rates[queue]
        return min(burst, tokens + max(0.0, now - at) * rate)

    def _spend(self, queue: str, now: float) -> None:
        """A lease granted in a rate-limited queue takes a token."""
        if queue in self.rates:
            bucket = self.rates[queue]
            bucket[2], bucket[3] = self._tokens(queue, now) - 1, max(bucket[3], now)

    def set_rate(self, queue: str, rate: tuple[float, int] | None) -> None:
        """A new or changed rate starts full; the same one again keeps the bucket."""
        if rate is None:
            self.rates.pop(queue, None)
        elif self.rates.get(queue, [0.0, 0.0])[:2] != [rate[0], rate[1]]:
            self.rates[queue] = [rate[0], rate[1], rate[1], -math.inf]

    def claim(self, job_id: str, owner: str, ttl: float) -> ModelLease | None:
        now = self.tick()
        job = self.jobs.get(job_id)
        if job is None:
            raise ModelJobNotFound(job_id)
        if self._due(job, now) and job.attempts < job.max_attempts:
            if self._room(job.queue, now) < 1:
                return None  # its queue is full, or has no token
            self._spend(job.queue, now)
            return self._grant(job, owner, ttl, now)
        if self._due(job, now) and job.state == "leased":
            self._bury(job, now)  # expired on its last allowed attempt
        return None

    def claim_many(self, owner: str, ttl: float, limit: int, queues: list[str]) -> list[ModelLease]:
        return self._claim_many_at(self.tick(), owner, ttl, limit, queues)

    def _claim_many_at(
        self, now: float, owner: str, ttl: float, limit: int, queues: list[str]
    ) -> list[ModelLease]:
        granted: list[ModelLease] = []
        while len(granted) < limit:
            due = [
                j
                for j in self.jobs.values()
                if j.queue in queues
                and j.queue not in self.paused
                and self._room(j.queue, now) >= 1  # a full queue is not walked
                and self._due(j, now)
            ]
            if not due:
                break
            # The highest priority first, then the oldest (issue #18).
            job = min(due, key=lambda j: (-j.priority, j.available_at, j.seq))
            if job.state == "leased" and job.attempts >= job.max_attempts:
                self._bury(job, now)
                continue
            self._spend(job.queue, now)
            granted.append(self._grant(job, owner, ttl, now))
        return granted

    def _holds(self, job: ModelJob, lease: ModelLease, now: float) -> bool:
        return (
            job.state == "leased"
            and job.owner == lease.owner
            and job.generation == lease.generation
            and job.secret == lease.secret
            and job.lease_until is not None
            and job.lease_until > now
        )

    @staticmethod
    def _ended_by(
        job: ModelJob, lease: ModelLease, operation: str, states: tuple[str, ...], content: Any
    ) -> bool:
        """A repeat: this lease was ended by this operation, which wrote this content."""
        written = {"complete": job.result, "fail": job.error, "release": None}[operation]
        return (
            job.state in states
            and job.generation == lease.generation
            and job.secret == lease.secret
            and job.settled_by == operation
            and written == content
        )

    def renew(self, lease: ModelLease, ttl: float | None) -> ModelLease:
        renewed = self._renew_at(self.tick(), lease, ttl)
        if renewed is None:
            raise ModelLeaseLost
        return renewed

    def renew_many(self, leases: list[ModelLease], ttl: float | None) -> list[ModelLease | None]:
        """Each lease renewed (None: lost), as `Store.renew_many` answers."""
        now = self.tick()  # one store operation: one store time for every item
        return [self._renew_at(now, lease, ttl) for lease in leases]

    def _renew_at(self, now: float, lease: ModelLease, ttl: float | None) -> ModelLease | None:
        job = self.jobs.get(lease.job_id)
        if job is None or not self._holds(job, lease, now):  # deleted, or not held
            return None
        ttl = lease.ttl if ttl is None else ttl
        job.lease_until = job.available_at = now + ttl
        return dataclasses.replace(lease, ttl=ttl, lease_until=now + ttl)

    def complete(self, lease: ModelLease, result: Any) -> None:
        now = self.tick()
        job = self.jobs.get(lease.job_id)
        if job is None:  # deleted
            raise ModelLeaseLost
        if self._holds(job, lease, now):
            job.state = "done"
            job.finished_at = now
            job.settled_by = "complete"
            job.result = result
            job.lease_until = None
            job.available_at = now
            job.end_attempt("completed", now)
        elif not self._ended_by(job, lease, "complete", ("done",), result):
            raise ModelLeaseLost

    def complete_many(self, leases: list[ModelLease], results: list[Any]) -> list[str]:
        """Returns the job ids whose leases are stale, as `Store.complete_many` reports."""
        now = self.tick()  # one store operation: one store time for every item
        return [job_id for job_id, _, _ in self._complete_many_at(now, leases, results)]

    def _complete_many_at(
        self, now: float, leases: list[ModelLease], results: list[Any]
    ) -> list[tuple[str, int | None, str | None]]:
        """Each stale lease's job id, with the job's generation and owner as the completion
        found it (what `LeaseLost.current_generation` and `.current_owner` report)."""
        lost: list[tuple[str, int | None, str | None]] = []
        for lease, result in zip(leases, results, strict=True):
            job = self.jobs.get(lease.job_id)
            if job is not None and self._holds(job, lease, now):
                job.state = "done"
                job.finished_at = now
                job.settled_by = "complete"
                job.result = result
                job.lease_until = None
                job.available_at = now
                job.end_attempt("completed", now)
            elif job is None:
                lost.append((lease.job_id, None, None))
            elif not self._ended_by(job, lease, "complete", ("done",), result):
                lost.append((lease.job_id, job.generation, job.owner))
        return lost

    def complete_and_claim(
        self,
        leases: list[ModelLease],
        results: list[Any],
        owner: str,
        ttl: float,
        limit: int,
        queues: list[str],
    ) -> tuple[list[tuple[str, int | None, str | None]], list[ModelLease]]:
        """complete_many, then claim_many on the store the completions left: one store
        operation, one store time."""
        now = self.tick()
        lost = self._complete_many_at(now, leases, results)
        return lost, self._claim_many_at(now, owner, ttl, limit, queues)

    def release(self, lease: ModelLease) -> None:
        now = self.tick()
        job = self.jobs.get(lease.job_id)
        if job is None:  # deleted
            raise ModelLeaseLost
        if self._holds(job, lease, now):
            job.state = "ready"
            job.settled_by = "release"
            job.lease_until = None
            job.available_at = now
            job.attempts -= 1
            job.end_attempt("released", now)
        elif not self._ended_by(job, lease, "release", ("ready",), None):
            raise ModelLeaseLost

    def fail(self, lease: ModelLease, error: str, retry_in: float) -> None:
        now = self.tick()
        job = self.jobs.get(lease.job_id)
        if job is None:  # deleted
            raise ModelLeaseLost
        if self._holds(job, lease, now):
            job.state = "dead" if job.attempts >= job.max_attempts else "ready"
            job.finished_at = now
            job.lease_until = None
            job.available_at = now + retry_in
            job.error = error
            job.settled_by = "fail"
            job.end_attempt("failed", now, error)
        elif not self._ended_by(job, lease, "fail", ("ready", "dead"), error):
            raise ModelLeaseLost

    # -- job control ------------------------------------------------------------------

    def _control(self, job_id: str, takes: tuple[str, ...]) -> tuple[ModelJob, float]:
        now = self.tick()
        job = self.jobs.get(job_id)
        if job is None:
            raise ModelJobNotFound(job_id)
        if job.state not in takes:
            raise ModelStateConflict(job.state)
        return job, now

    def cancel(self, job_id: str, reason: str | None) -> ModelJob:
        job = self.jobs.get(job_id)
        if job is not None and job.state == "cancelled":
            self.tick()
            return job  # as the first cancel answered
        job, now = self._control(job_id, ("ready", "leased"))
        if job.state == "leased":
            job.end_attempt("cancelled", now, "cancelled" if reason is None else reason)
        if job.state == "leased" and job.generation < MAX_GENERATION:
            job.generation += 1
        job.state = "cancelled"
        job.finished_at = now
        job.secret = job.lease_until = job.settled_by = None
        job.available_at = now
        job.error = "cancelled" if reason is None else reason
        return job

    def requeue(self, job_id: str, delay: float, reset: bool) -> ModelJob:
        job, now = self._control(job_id, FINISHED)
        job.state = "ready"
        job.secret = job.lease_until = job.settled_by = None
        job.available_at = now + delay
        if reset:
            job.attempts = 0
        else:
            job.max_attempts = max(job.max_attempts, job.attempts + 1)
        job.result = None
        return job

    def delete(self, job_id: str) -> ModelJob:
        job, _ = self._control(job_id, FINISHED)
        self.shared["floor"] = max(self.shared["floor"], job.generation)
        del self.jobs[job_id]
        return job


# -- the machine ---------------------------------------------------------------------------

OWNERS = st.sampled_from(["A", "B", "C"])
PRIORITIES = st.sampled_from([0, 0, 1, -1, 7])
TTLS = st.sampled_from([1.0, 2.0, 5.0, 10.0])
HOLDER_OPS = ("renew", "complete", "release", "fail")
Pair = tuple[tenure.Lease, ModelLease]


def close_enough(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOLERANCE


# Which lease a holder rule uses: mostly one of the last few granted, sometimes any older
# (stale) one. Counted back from the newest.
PICK = st.just(0) | st.integers(0, 3) | st.integers(0, 10_000)
has_leases = precondition(lambda self: bool(self.leases))


class LeaseProtocol(RuleBasedStateMachine):
    def __init__(
        self,
        url: str,
        clock: tenure.ManualClock,
        namespace: str,
        follows_boot_clock: bool,
        shared: dict[str, int],
    ) -> None:
        super().__init__()
        self.clock = clock
        self.store = tenure.connect(url, clock=clock, store_clock=clock)
        self.model = Model(clock, follows_boot_clock, shared)
        self.job_ids = [f"{namespace}j{i}" for i in range(5)]  # j4 is never submitted
        self.unique_keys = [f"{namespace}k{i}" for i in range(2)]
        self.queues = [f"{namespace}q0", f"{namespace}q1"]
        # Every lease ever granted (renewals too), the stale ones included.
        self.leases: list[Pair] = []

    def pick(self, back: int) -> Pair:
        return self.leases[max(0, len(self.leases) - 1 - back)]

    def teardown(self) -> None:
        try:
            self.same_counts()
        finally:
            self.store.close()

    def same_counts(self) -> None:
        """queue_stats counts what the listings hold (issue #20: Redis keeps its counts in
        every script, so a miscount any step of the example left shows here). Once per
        example: after every step it would double the machine's time."""
        stats = self.store.queue_stats()  # the clock stands still: the listings' time
        assert stats is not None
        for queue in self.queues:
            listed = self.store.jobs(queue=queue, limit=1000)
            assert _counts(stats.queue(queue)) == _counts_of(listed, stats.as_of), queue

    # -- comparing answers ------------------------------------------------------------

    @staticmethod
    def same_lease(real: tenure.Lease, model: ModelLease) -> None:
        assert (real.job_id, real.owner, real.generation, real.ttl, real.attempt) == (
            model.job_id,
            model.owner,
            model.generation,
            model.ttl,
            model.attempt,
        ), (real, model)
        assert close_enough(real.lease_until, model.lease_until), (real, model)

    def both(self, real_call: Callable[[], Any], model_call: Callable[[], Any]) -> tuple[Any, Any]:
        """Run the same operation on the store and the model; they must agree on whether
        it raised, and on what."""
        try:
            expected = model_call()
        except ModelLeaseLost:
            with pytest.raises(tenure.LeaseLost):
                real_call()
            return None, None
        except ModelJobNotFound:
            with pytest.raises(tenure.JobNotFound):
                real_call()
            return None, None
        except ModelStateConflict as conflict:
            state = str(conflict)
        else:
            return real_call(), expected
        with pytest.raises(tenure.JobStateConflict) as caught:
            real_call()
        assert caught.value.state == state, (caught.value, state)
        return None, None

    # -- rules ------------------------------------------------------------------------

    @initialize(max_attempts=st.lists(st.sampled_from([1, 2, 3, 5]), min_size=3, max_size=3))
    def some_jobs(self, max_attempts: list[int]) -> None:
        for index, attempts in enumerate(max_attempts):
            self._submit(index, index % 2, 0.0, attempts, index % 2)

    @rule(
        job=st.integers(0, 3),
        queue=st.integers(0, 1),
        delay=st.sampled_from([0.0, 0.0, 1.0, 5.0]),
        max_attempts=st.sampled_from([1, 2, 3, 5]),
        priority=PRIORITIES,
    )
    def submit(self, job: int, queue: int, delay: float, max_attempts: int, priority: int) -> None:
        self._submit(job, queue, delay, max_attempts, priority)

    def _submit(self, job: int, queue: int, delay: float, max_attempts: int, priority: int) -> None:
        job_id, queue_name = self.job_ids[job], self.queues[queue]
        real = self.store.submit(
            job_id,
            {"job": job},
            queue=queue_name,
            delay=delay,
            max_attempts=max_attempts,
            priority=priority,
        )
        expected = self.model.submit(job_id, queue_name, delay, max_attempts, priority)
        assert (real.queue, real.state, real.generation, real.max_attempts) == (
            expected.queue,
            expected.state,
            expected.generation,
            expected.max_attempts,
        )

    @rule(
        jobs=st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True),
        queue=st.integers(0, 1),
        delay=st.sampled_from([0.0, 0.0, 1.0, 5.0]),
        max_attempts=st.sampled_from([1, 2, 3, 5]),
        priority=PRIORITIES,
    )
    def submit_many(
        self, jobs: list[int], queue: int, delay: float, max_attempts: int, priority: int
    ) -> None:
        """Issue #17: a batch is each submit in order, at one store time."""
        specs = [
            tenure.JobSpec(
                self.job_ids[job],
                {"job": job},
                self.queues[(job + queue) % 2],
                delay,
                max_attempts,
                priority + job % 2,  # two priorities in most batches
            )
            for job in jobs
        ]
        new = [spec.job_id not in self.model.jobs for spec in specs]
        answers = self.store.submit_many(specs)
        for spec, real, created in zip(specs, answers, new, strict=True):
            expected = self.model.submit(
                spec.job_id, spec.queue, delay, max_attempts, spec.priority
            )
            assert real.job_id == spec.job_id
            assert real.created is created
            assert (real.queue, real.state, real.generation) == (
                expected.queue,
                expected.state,
                expected.generation,
            )

    @rule(
        job=st.integers(0, 3),
        key=st.integers(0, 1),
        # Not multiples of the clock's steps (0.5 s): no window ends exactly at a store time.
        window=st.sampled_from([None, 1.25, 3.75]),
    )
    def submit_unique(self, job: int, key: int, window: float | None) -> None:
        """Issue #18: a held key answers its holder; a free one is taken."""
        job_id, name = self.job_ids[job], self.unique_keys[key]
        real = self.store.submit(
            job_id, {"job": job}, queue=self.queues[0], unique_key=name, unique_for=window
        )
        expected, created = self.model.submit_unique(job_id, self.queues[0], name, window)
        assert (real.job_id, real.created, real.unique_key) == (
            expected.job_id,
            created,
            expected.unique_key,
        ), (real, expected)

    @rule(job=st.integers(0, 4), owner=OWNERS, ttl=TTLS)
    def claim(self, job: int, owner: str, ttl: float) -> None:
        job_id = self.job_ids[job]
        real, expected = self.both(
            lambda: self.store.claim(job_id, owner, ttl),
            lambda: self.model.claim(job_id, owner, ttl),
        )
        if expected is None:
            assert real is None, real
            return
        assert real is not None, f"store refused a claim the model grants: {expected}"
        self.same_lease(real, expected)
        self.leases.append((real, expected))

    @rule(
        owner=OWNERS,
        ttl=TTLS,
        limit=st.integers(1, 3),
        queues=st.lists(st.integers(0, 1), min_size=1, max_size=2, unique=True),
    )
    def claim_next(self, owner: str, ttl: float, limit: int, queues: list[int]) -> None:
        names = [self.queues[q] for q in queues]
        expected = self.model.claim_many(owner, ttl, limit, names)
        if limit == 1:
            one = self.store.claim_next(owner, ttl, queues=names)
            real = [] if one is None else [one]
        else:
            real = self.store.claim_many(owner, ttl, limit, queues=names)
        assert len(real) == len(expected), (real, expected)
        for got, want in zip(real, expected, strict=False):
            self.same_lease(got, want)
            self.leases.append((got, want))

    @has_leases
    @rule(back=PICK, ttl=st.none() | TTLS)
    def renew(self, back: int, ttl: float | None) -> None:
        lease, model_lease = self.pick(back)
        real, expected = self.both(
            lambda: self.store.renew(lease, ttl), lambda: self.model.renew(model_lease, ttl)
        )
        if expected is not None:
            self.same_lease(real, expected)
            self.leases.append((real, expected))

    def holder_op(self, op: str, lease: tenure.Lease, model_lease: ModelLease, arg: Any) -> None:
        if op == "complete":
            self.both(
                lambda: self.store.complete(lease, arg),
                lambda: self.model.complete(model_lease, arg),
            )
        elif op == "release":
            self.both(lambda: self.store.release(lease), lambda: self.model.release(model_lease))
        elif op == "fail":
            self.both(
                lambda: self.store.fail(lease, f"failed {arg}", retry_in=arg),
                lambda: self.model.fail(model_lease, f"failed {arg}", arg),
            )
        else:
            self.both(lambda: self.store.renew(lease), lambda: self.model.renew(model_lease, None))

    @has_leases
    @rule(back=PICK, result=st.integers(0, 3))
    def complete(self, back: int, result: int) -> None:
        self.holder_op("complete", *self.pick(back), result)

    def pick_batch(self, backs: list[int]) -> list[Pair]:
        pairs: dict[str, Pair] = {}
        for back in backs:  # one lease per job, as the store requires
            lease, model_lease = self.pick(back)
            pairs.setdefault(lease.job_id, (lease, model_lease))
        return list(pairs.values())

    @has_leases
    @rule(backs=st.lists(PICK, min_size=1, max_size=4), ttl=st.none() | TTLS)
    def renew_many(self, backs: list[int], ttl: float | None) -> None:
        chosen = self.pick_batch(backs)
        real = self.store.renew_many([lease for lease, _ in chosen], ttl)
        expected = self.model.renew_many([model for _, model in chosen], ttl)
        assert len(real) == len(expected), (real, expected)
        for got, want, (lease, _) in zip(real, expected, chosen, strict=True):
            if want is None:
                assert isinstance(got, tenure.LeaseLost), (got, lease)
                assert (got.job_id, got.generation) == (lease.job_id, lease.generation)
            else:
                assert isinstance(got, tenure.Lease), (got, want)
                self.same_lease(got, want)
                self.leases.append((got, want))

    @has_leases
    @rule(backs=st.lists(PICK, min_size=1, max_size=4), result=st.integers(0, 3))
    def complete_many(self, backs: list[int], result: int) -> None:
        chosen = self.pick_batch(backs)
        results = [result + i for i in range(len(chosen))]
        lost = self.store.complete_many([real for real, _ in chosen], results)
        expected = self.model.complete_many([model for _, model in chosen], results)
        assert [error.job_id for error in lost] == expected, (lost, expected)

    @rule(
        backs=st.lists(PICK, max_size=4),
        result=st.integers(0, 3),
        owner=OWNERS,
        ttl=TTLS,
        limit=st.integers(1, 3),
        queues=st.lists(st.integers(0, 1), min_size=1, max_size=2, unique=True),
    )
    def complete_and_claim(
        self, backs: list[int], result: int, owner: str, ttl: float, limit: int, queues: list[int]
    ) -> None:
        chosen = self.pick_batch(backs) if self.leases else []  # no leases: the claim alone
        results = [result + i for i in range(len(chosen))]
        names = [self.queues[q] for q in queues]
        lost, claimed = self.store.complete_and_claim(
            [real for real, _ in chosen], owner, ttl, limit, results=results, queues=names
        )
        expected_lost, expected_claimed = self.model.complete_and_claim(
            [model for _, model in chosen], results, owner, ttl, limit, names
        )
        # Each stale lease in order, judged on the store as it was before the claim.
        got_lost = [(e.job_id, e.current_generation, e.current_owner) for e in lost]
        assert got_lost == expected_lost, (lost, expected_lost)
        assert len(claimed) == len(expected_claimed), (claimed, expected_claimed)
        for got, want in zip(claimed, expected_claimed, strict=True):
            self.same_lease(got, want)
            self.leases.append((got, want))

    @has_leases
    @rule(back=PICK)
    def release(self, back: int) -> None:
        self.holder_op("release", *self.pick(back), None)

    @has_leases
    @rule(back=PICK, retry_in=st.sampled_from([0.0, 1.0, 3.0]))
    def fail(self, back: int, retry_in: float) -> None:
        self.holder_op("fail", *self.pick(back), retry_in)

    @has_leases
    @rule(
        back=PICK,
        op=st.sampled_from(HOLDER_OPS),
        forgery=st.sampled_from(["secret", "owner", "generation"]),
    )
    def forged(self, back: int, op: str, forgery: str) -> None:
        """Someone who knows the public fields (and maybe an old secret) tries to act."""
        lease, model_lease = self.pick(back)
        if forgery == "secret":
            fake = forge(lease, secret=fresh_secret())
            model_fake = dataclasses.replace(model_lease, secret=-1)
        elif forgery == "owner":
            fake = forge(lease, owner="Mallory")
            model_fake = dataclasses.replace(model_lease, owner="Mallory")
        else:
            fake = forge(lease, generation=lease.generation + 1)
            model_fake = dataclasses.replace(model_lease, generation=lease.generation + 1)
        self.holder_op(op, fake, model_fake, 0.0 if op == "fail" else 9)

    @rule(queue=st.integers(0, 1), paused=st.booleans())
    def pause(self, queue: int, paused: bool) -> None:
        name = self.queues[queue]
        if paused:
            self.store.pause_queue(name)
        else:
            self.store.resume_queue(name)
        if self.model.follows_boot_clock:
            self.model.tick()  # SQLite: a write transaction, which reads (and floors) the clock
        (self.model.paused.add if paused else self.model.paused.discard)(name)
        mine = [q for q in self.store.paused_queues() if q in self.queues]
        assert mine == sorted(self.model.paused)

    @rule(queue=st.integers(0, 1), n=st.sampled_from([None, 1, 2]))
    def limit(self, queue: int, n: int | None) -> None:
        name = self.queues[queue]
        self.store.set_queue_limit(name, n)
        if self.model.follows_boot_clock:
            self.model.tick()  # SQLite: a write transaction, which reads (and floors) the clock
        if n is None:
            self.model.limits.pop(name, None)
        else:
            self.model.limits[name] = n
        mine = {q: k for q, k in self.store.queue_limits().items() if q in self.queues}
        assert mine == self.model.limits

    @rule(
        queue=st.integers(0, 1),
        # 2/s: a token per clock step (0.5 s), exactly; 0.5/s: a quarter of one.
        rate=st.sampled_from([None, (2.0, 1), (0.5, 2), (1.0, None)]),
    )
    def rate(self, queue: int, rate: tuple[float, int | None] | None) -> None:
        """Issue #18: a queue's token bucket; claims take a token per lease granted."""
        name = self.queues[queue]
        per_second, burst = (None, None) if rate is None else rate
        self.store.set_queue_rate(name, per_second, burst=burst)
        if self.model.follows_boot_clock:
            self.model.tick()  # SQLite: a write transaction, which reads (and floors) the clock
        if per_second is None:
            self.model.set_rate(name, None)
        else:
            self.model.set_rate(name, (per_second, burst or max(1, math.ceil(per_second))))
        mine = {q: tuple(r) for q, r in self.store.queue_rates().items() if q in self.queues}
        assert mine == {q: (r[0], int(r[1])) for q, r in self.model.rates.items()}

    @rule(
        name=st.integers(0, 1),
        cron=st.sampled_from(["* * * * *", "*/5 * * * * *"]),
        queue=st.integers(0, 1),
        remove=st.booleans(),
    )
    def schedule(self, name: int, cron: str, queue: int, remove: bool) -> None:
        """Store schedules (issue #18): an upsert by name at store time (a write that floors
        the clock, as every store's), created_at kept; remove says whether there was one."""
        key = f"{self.queues[0]}-s{name}"
        model = self.model.schedules
        if remove:
            assert self.store.remove_schedule(key) is (key in model)
            model.pop(key, None)
            if self.model.follows_boot_clock:
                self.model.tick()  # SQLite: a write transaction, which reads the clock
        else:
            added = self.store.add_schedule(key, cron, queue=self.queues[queue])
            now = self.model.tick()
            model[key] = (model[key][0] if key in model else now, now, cron, self.queues[queue])
            assert close_enough(added.created_at, model[key][0]), (added, model[key])
            assert close_enough(added.updated_at, now), (added, now)
        listed = [s for s in self.store.schedules() if s.name.startswith(self.queues[0])]
        assert [s.name for s in listed] == sorted(model)
        for found in listed:
            created, updated, want_cron, want_queue = model[found.name]
            assert (found.cron, found.queue) == (want_cron, want_queue)
            assert close_enough(found.created_at, created)
            assert close_enough(found.updated_at, updated)

    @rule(job=st.integers(0, 4), reason=st.sampled_from([None, "stop"]))
    def cancel(self, job: int, reason: str | None) -> None:
        job_id = self.job_ids[job]
        real, expected = self.both(
            lambda: self.store.cancel(job_id, reason), lambda: self.model.cancel(job_id, reason)
        )
        if expected is not None:
            self.same_job(real, expected)

    @rule(job=st.integers(0, 4), delay=st.sampled_from([0.0, 1.0, 5.0]), reset=st.booleans())
    def requeue(self, job: int, delay: float, reset: bool) -> None:
        job_id = self.job_ids[job]
        real, expected = self.both(
            lambda: self.store.requeue(job_id, delay=delay, reset_attempts=reset),
            lambda: self.model.requeue(job_id, delay, reset),
        )
        if expected is not None:
            self.same_job(real, expected)

    @rule(job=st.integers(0, 4))
    def delete(self, job: int) -> None:
        job_id = self.job_ids[job]
        real, expected = self.both(
            lambda: self.store.delete(job_id), lambda: self.model.delete(job_id)
        )
        if expected is not None:
            assert real is None

    @rule(
        move=st.sampled_from(
            [("advance", s) for s in (0.5, 1.0, 2.0, 3.0, 5.0, 10.0)]
            + [("step", s) for s in (-30.0, -4.0, -1.0, 2.0)]
        )
    )
    def clock_moves(self, move: tuple[str, float]) -> None:
        """Time passes (both clocks), or wall time alone is stepped, mostly back, the way an
        NTP step or an operator's `date -s` does."""
        how, seconds = move
        if how == "advance":
            self.clock.advance(seconds)
            return
        # Ask the store for the time first: from then on its time may not go below this,
        # whatever the wall clock does. (This also pins the model's floor where a store that
        # raises its floor on reads too would have it.)
        now = self.store.now()
        assert close_enough(now, self.model.tick()), (now, self.model.floor)
        self.clock.jump(seconds)

    # -- after every step -------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        for queue in self.queues:  # one listing per queue: every job, in submission order
            listed = self.store.jobs(queue=queue, limit=1000)
            model_jobs = sorted(
                (job for job in self.model.jobs.values() if job.queue == queue),
                key=lambda job: job.seq,
            )
            assert [job.job_id for job in listed] == [job.job_id for job in model_jobs]
            for real, expected in zip(listed, model_jobs, strict=True):
                self.same_job(real, expected)
        for job_id in self.job_ids:  # and one by one, with its attempts
            if job_id in self.model.jobs:
                self.same_job(self.store.get(job_id), self.model.jobs[job_id])
                self.same_attempts(self.store.attempts(job_id), self.model.jobs[job_id])
            else:
                assert self.store.attempts(job_id) == []
                with pytest.raises(tenure.JobNotFound):
                    self.store.get(job_id)

    @staticmethod
    def same_attempts(real: list[tenure.Attempt], expected: ModelJob) -> None:
        assert len(real) == len(expected.history), (real, expected.history)
        for attempt, (generation, owner, started, ended, ending, error) in zip(
            real, expected.history, strict=True
        ):
            assert (attempt.generation, attempt.owner, attempt.ending) == (
                generation,
                owner,
                ending,
            ), (real, expected.history)
            assert close_enough(attempt.started_at, started), (attempt, started)
            assert close_enough(attempt.ended_at, ended), (attempt, ended)
            if error == BURIED:
                assert attempt.error, attempt
            else:
                assert attempt.error == error, (attempt, error)

    @staticmethod
    def same_job(real: tenure.Job, expected: ModelJob) -> None:
        assert real.priority == expected.priority, (real, expected)
        assert (real.state, real.owner, real.generation, real.attempts, real.max_attempts) == (
            expected.state,
            expected.owner,
            expected.generation,
            expected.attempts,
            expected.max_attempts,
        ), (real, expected)
        assert close_enough(real.lease_until, expected.lease_until), (real, expected)
        assert close_enough(real.available_at, expected.available_at), (real, expected)
        assert real.result == expected.result, (real, expected)
        assert real.unique_key == expected.unique_key, (real, expected)
        if expected.error == BURIED:
            assert isinstance(real.error, str), real
            assert real.error, real
        else:
            assert real.error == expected.error, (real, expected)


def _counts(found: QueueStats | None) -> tuple[Any, ...]:
    if found is None:
        return (0, 0, 0, 0, None)
    return (found.ready, found.scheduled, found.leased, found.expired, found.oldest_ready_at)


def _counts_of(jobs: list[tenure.Job], now: float) -> tuple[Any, ...]:
    """What queue_stats should answer for these jobs of one queue at store time ``now``."""
    ready = [job.available_at for job in jobs if job.state == "ready" and job.available_at <= now]
    leased = [job.lease_until or 0.0 for job in jobs if job.state == "leased"]
    return (
        len(ready),
        sum(job.state == "ready" for job in jobs) - len(ready),
        sum(until > now for until in leased),
        sum(until <= now for until in leased),
        min(ready, default=None),
    )


def test_store_matches_the_reference_model(backend: Backend, url: str) -> None:
    examples = itertools.count()
    shared = {"floor": 0}  # the store's generation floor: examples share the store
    # SQLite's store time runs on the host's boot clock; the servers' on wall time.
    follows_boot_clock = backend.name == "sqlite"

    def factory() -> LeaseProtocol:
        # Examples share the store: each gets its own job ids and queues, and a clock that
        # starts past every time an earlier example could have reached (the floor stays).
        # Each clock is a boot of its own, so SQLite re-anchors on its wall time.
        k = next(examples)
        clock = tenure.ManualClock(1_700_000_000.0 + k * 1_000_000.0)
        return LeaseProtocol(url, clock, f"e{k}-", follows_boot_clock, shared)

    run_state_machine_as_test(factory)  # type: ignore[arg-type]  # a factory is documented
    assert next(examples) > 1
