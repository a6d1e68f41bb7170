"""Named locks against a small reference model, step by step (Hypothesis stateful testing).

The leases of test_state_machine.py, seen through `tenure.Lock`: several clients (each a
store object with a client clock of its own) acquire, hold and release two named locks
while the store's clock moves on its own. A client whose clock stands still is a paused
holder: its lease runs out by the store's clock, another client takes the lock with a
greater token, and when the paused client's time moves again its renewal is refused and
it learns the lock is lost. The model says, for every step, which acquire succeeds, with
which token, which renewal lands, which release is refused, and what the lock's job in
the store looks like; tokens are checked to grow with every acquisition of a name.

Renewals are the lock's own (its renewer thread): a client's time moving on by half a TTL
makes exactly one renewal of each of its locks due (the renewal period is at most a third
of the TTL, the local deadline almost a whole TTL away), and the step waits for it to be
answered. The client clocks otherwise stand still, so the watchdog never decides a loss on
its own and the only losses are refused renewals: deterministic.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import time
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import tenure
from tests.backends import Backend

TTL = 2.0
TOLERANCE = 1e-3  # seconds: stores may keep timestamps in microseconds
CLIENTS = ("A", "B", "C")
NAMES = 2
# Each example opens a client per letter (and their lock keepers): a few examples are
# enough to cover the rules' interleavings, and keep the file to a few seconds per store.
SETTINGS = settings(
    settings.default,
    max_examples=min(settings.default.max_examples, 8),
    stateful_step_count=min(settings.default.stateful_step_count, 35),
)


@dataclass
class ModelJob:
    """The lock's job in the store."""

    generation: int = 0
    state: str = "ready"
    owner: str | None = None
    lease_until: float | None = None
    attempts: int = 0


@dataclass
class Holding:
    """A client's `tenure.Lock` between acquire and release, and what the model knows."""

    lock: tenure.Lock
    generation: int
    lost: bool = False  # what the client has been told (a refused renewal)


def _wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 5.0
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


class LockProtocol(RuleBasedStateMachine):
    def __init__(self, url: str, start: float, namespace: str) -> None:
        super().__init__()
        self.store_clock = tenure.ManualClock(start)
        self.eyes = tenure.connect(url, clock=self.store_clock, store_clock=self.store_clock)
        self.clocks = {c: tenure.ManualClock(start) for c in CLIENTS}
        self.clients = {
            c: tenure.connect(url, clock=self.clocks[c], store_clock=self.store_clock)
            for c in CLIENTS
        }
        self.owners = {c: f"{namespace}{c}" for c in CLIENTS}
        self.names = [f"{namespace}n{i}" for i in range(NAMES)]
        self.jobs: dict[str, ModelJob] = {}  # lock name -> its job, once created
        self.holdings: dict[tuple[str, str], Holding] = {}
        self.tokens: dict[str, list[int]] = {name: [] for name in self.names}

    def teardown(self) -> None:
        for holding in self.holdings.values():
            with contextlib.suppress(tenure.LeaseLost):
                holding.lock.release()
        for store in (*self.clients.values(), self.eyes):
            store.close()
        self.holdings.clear()
        self.clients.clear()

    def now(self) -> float:
        return self.store_clock.time()

    def current(self, name: str, holding: Holding) -> bool:
        """Whether ``holding`` is the lock's live lease by the store's clock."""
        job = self.jobs[name]
        return (
            job.state == "leased"
            and job.generation == holding.generation
            and job.owner == holding.lock.owner
            and job.lease_until is not None
            and job.lease_until > self.now()
        )

    # -- rules ---------------------------------------------------------------------------

    @rule(client=st.sampled_from(CLIENTS), name=st.integers(0, NAMES - 1))
    def acquire(self, client: str, name: int) -> None:
        lock_name = self.names[name]
        if (client, lock_name) in self.holdings:
            return  # one holding per client and name: a Lock is not reentrant
        job = self.jobs.setdefault(lock_name, ModelJob())
        now = self.now()
        free = job.state == "ready" or (job.lease_until is not None and job.lease_until <= now)
        lock = tenure.Lock(self.clients[client], lock_name, TTL, owner=self.owners[client])
        got = lock.acquire(blocking=False)
        assert got is free, (client, lock_name, job)
        if not got:
            event("acquire refused: held")
            return
        event("acquire: taken over after expiry" if job.state == "leased" else "acquire: free")
        job.generation += 1
        job.state, job.owner, job.lease_until = "leased", lock.owner, now + TTL
        job.attempts += 1
        assert lock.token.generation == job.generation, (lock.token, job)
        assert all(t < job.generation for t in self.tokens[lock_name])  # never repeated
        self.tokens[lock_name].append(job.generation)
        self.holdings[(client, lock_name)] = Holding(lock, job.generation)

    @rule(clients=st.sets(st.sampled_from(CLIENTS), min_size=1))
    def client_time_passes(self, clients: set[str]) -> None:
        """Half a TTL of these clients' time: each renews every lock it holds, once. A
        renewal of a lease that is no longer current by the store's clock is refused."""
        due = [
            (key, holding, holding.lock.lease)
            for key, holding in self.holdings.items()
            if key[0] in clients and not holding.lost
        ]
        for client in clients:
            self.clocks[client].advance(TTL / 2)
        for (_, name), holding, before in due:
            lock = holding.lock
            _wait_for(
                lambda lock=lock, before=before: lock.lost or lock.lease is not before,
                f"{name}'s renewal",
            )
            if self.current(name, holding):
                assert not lock.lost, (name, lock.lost_reason, self.jobs[name])
                self.jobs[name].lease_until = self.now() + TTL
                assert abs(lock.lease.lease_until - (self.now() + TTL)) <= TOLERANCE
            else:  # a stale holder's renewal: refused, and the holder is told
                assert lock.lost, (name, holding, self.jobs[name])
                assert "renewal rejected" in (lock.lost_reason or ""), lock.lost_reason
                holding.lost = True
                event("stale holder's renewal refused")
                with pytest.raises(tenure.LeaseLost):
                    lock.check()

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 3.0]))
    def store_time_passes(self, seconds: float) -> None:
        """The store's clock moves while the clients' stand still (they are paused)."""
        self.store_clock.advance(seconds)

    @rule(client=st.sampled_from(CLIENTS), name=st.integers(0, NAMES - 1))
    def release(self, client: str, name: int) -> None:
        lock_name = self.names[name]
        holding = self.holdings.pop((client, lock_name), None)
        if holding is None:
            return
        if holding.lost:  # known lost: nothing to give back, quietly
            holding.lock.release()
        elif self.current(lock_name, holding):
            holding.lock.release()
            job = self.jobs[lock_name]
            job.state, job.lease_until = "ready", None
            job.attempts -= 1  # a release gives the attempt back
        else:  # lost without the client knowing (expired, maybe taken): refused
            event("release refused: lost without knowing")
            with pytest.raises(tenure.LeaseLost, match="lost while held"):
                holding.lock.release()
        assert not holding.lock.held
        assert tenure.worker.token_state(holding.lock.token) in ("ended", "lost")

    # -- after every step ----------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        for name, expected in self.jobs.items():
            real = self.eyes.get(f"lock:{name}")
            assert (real.state, real.generation, real.attempts) == (
                expected.state,
                expected.generation,
                expected.attempts,
            ), (name, real, expected)
            assert real.queue == f"tenure.lock:{name}"
            if expected.state == "leased":
                assert real.owner == expected.owner, (real, expected)
                assert real.lease_until is not None
                assert expected.lease_until is not None
                assert abs(real.lease_until - expected.lease_until) <= TOLERANCE, (real, expected)
        for (_, name), holding in self.holdings.items():
            assert holding.lock.lost is holding.lost, (name, holding)
            assert holding.lock.token.generation == holding.generation


def test_locks_match_the_reference_model(backend: Backend, url: str) -> None:
    examples = itertools.count()

    def factory() -> LockProtocol:
        # Examples share the store: each gets its own names and owners, and clocks that
        # start past every time an earlier example could have reached.
        k = next(examples)
        return LockProtocol(url, 1_700_000_000.0 + k * 1_000_000.0, f"e{k}-")

    run_state_machine_as_test(factory, settings=SETTINGS)  # type: ignore[arg-type]
    assert next(examples) > 1
    # Each client's lock keeper (two idle threads) stops when its store is collected: let
    # that happen now, once, not whenever the collector runs (other tests look at keeper
    # threads; a collection per example would cost a second per store).
    gc.collect()
