"""``tenure demo``: the worked example of docs/design.md §1, performed for real and narrated.

A throwaway SQLite lease store and a second SQLite database as the "external system" (a
``reports`` table guarded by `tenure.fence.sql_fence`) live in a temporary directory. The
clock is a `tenure.ManualClock` shared by the store and the workers, so the story's minute
passes instantly and the output is the same on every run. Every step is checked; the
command exits 0 only when each one behaved as the story says.
"""

from __future__ import annotations

import contextlib
import shlex
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from .. import fence
from .._clock import ManualClock
from .._store import Store, connect
from ..errors import LeaseLost, StaleToken
from ..models import FencingToken, JobState, Lease
from . import CliError, CliState, common_options
from ._dashboard import INSTALL_DASHBOARD, dashboard_hint, dashboard_missing
from ._output import Cell, Output, format_value

__all__ = ["DemoResult", "Step", "dashboard_command", "demo", "run_demo"]

JOB = "report-42"
STORE_FILE = "store.db"
WORKDIR_PREFIX = "tenure-demo-"  # of the temporary directory each run makes
TTL = 30.0
EARLIER = 6  # leases before worker A's: A gets generation EARLIER + 1

# The destination's own table and write: an overwrite, exactly the kind of effect a late
# request from a stalled worker would clobber without a fence.
_CREATE_REPORTS = """
CREATE TABLE reports (
    report_id  TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    written_by TEXT NOT NULL,
    generation INTEGER NOT NULL
)
"""
_WRITE_REPORT = """
INSERT INTO reports (report_id, body, written_by, generation) VALUES (?, ?, ?, ?)
ON CONFLICT (report_id) DO UPDATE
SET body = excluded.body, written_by = excluded.written_by, generation = excluded.generation
"""


@dataclass
class Step:
    """One line of the timeline: who did what, what happened, and whether that was the
    story's expectation. ``t`` is simulated seconds since worker A's claim (None: before)."""

    t: float | None
    actor: str
    action: str
    result: str
    expected: str
    ok: bool


@dataclass
class DemoResult:
    steps: list[Step] = field(default_factory=list)
    job: dict[str, Any] | None = None
    destination: list[dict[str, Any]] = field(default_factory=list)
    fence: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and bool(self.steps) and all(s.ok for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "clock": "simulated (tenure.ManualClock): no real time passes",
            "job_id": JOB,
            "ttl": TTL,
            "steps": [asdict(step) for step in self.steps],
            "final": {"job": self.job, "destination": self.destination, "fence": self.fence},
            "failure": self.failure,
        }


class _StoryBroken(Exception):
    pass


class _Story:
    """Performs steps in order; the first one that does not behave stops the story."""

    def __init__(self, clock: ManualClock, result: DemoResult) -> None:
        self.clock = clock
        self.result = result
        self.t0: float | None = None

    def elapsed(self) -> float | None:
        return None if self.t0 is None else round(self.clock.time() - self.t0, 3)

    def step(
        self, actor: str, action: str, expected: str, perform: Callable[[], tuple[bool, str]]
    ) -> None:
        t = self.elapsed()
        try:
            ok, observed = perform()
        except Exception as exc:  # anything unexpected is a broken story, reported as such
            ok, observed = False, f"unexpected {type(exc).__name__}: {exc}"
        self.result.steps.append(Step(t, actor, action, observed, expected, ok))
        if not ok:
            self.result.failure = (
                f"step {len(self.result.steps)} ({actor}: {action}): expected {expected}; "
                f"observed {observed}"
            )
            raise _StoryBroken


def _write(dest: sqlite3.Connection, token: FencingToken, body: str, writer: str) -> None:
    """The fenced write both workers make: the report upsert, guarded by the fence."""
    with fence.sql_fence(dest, token) as cur:
        cur.execute(_WRITE_REPORT, (JOB, body, writer, token.generation))


def _report(dest: sqlite3.Connection) -> tuple[str, str, int] | None:
    row = dest.execute(
        "SELECT body, written_by, generation FROM reports WHERE report_id = ?", (JOB,)
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), int(row[2]))


def run_demo(workdir: Path) -> DemoResult:
    """Perform the story in ``workdir`` (which the caller throws away) and return it."""
    result = DemoResult()
    clock = ManualClock()
    store = connect(f"sqlite:///{workdir / STORE_FILE}", clock=clock, store_clock=clock)
    dest = sqlite3.connect(workdir / "destination.db", isolation_level=None)
    try:
        dest.execute(_CREATE_REPORTS)
        fence.create_fence_table(dest)
        with contextlib.suppress(_StoryBroken):
            _ClassicStory(_Story(clock, result), store, dest, clock).tell()
        try:
            _final_state(result, store, dest)
        except Exception as exc:  # report it like a broken step, not as a traceback
            result.failure = result.failure or (
                f"reading the final state: unexpected {type(exc).__name__}: {exc}"
            )
    finally:
        dest.close()
        store.close()
    return result


def _final_state(result: DemoResult, store: Store, dest: sqlite3.Connection) -> None:
    result.job = store.get(JOB).to_dict()
    result.destination = [
        {"report_id": r[0], "body": r[1], "written_by": r[2], "generation": r[3]}
        for r in dest.execute("SELECT report_id, body, written_by, generation FROM reports")
    ]
    result.fence = [
        {"job_id": r[0], "generation": r[1], "updated_at": r[2]}
        for r in dest.execute(
            "SELECT job_id, generation, updated_at FROM tenure_fence ORDER BY job_id"
        )
    ]


class _ClassicStory:
    """The worked example, one method per step; `tell` runs them in order on a manual
    clock, so each step sees the store exactly as the story says."""

    def __init__(
        self, story: _Story, store: Store, dest: sqlite3.Connection, clock: ManualClock
    ) -> None:
        self.story, self.store, self.dest, self.clock = story, store, dest, clock
        self.leases: dict[str, Lease] = {}

    def tell(self) -> None:
        story, clock = self.story, self.clock
        story.step(
            "store", f"job {JOB}", f"generation {EARLIER} after {EARLIER} claims", self.prelude
        )
        story.t0 = clock.time()
        story.step("worker-a", "claim", f"generation {EARLIER + 1}", self.a_claims)
        clock.advance(1)
        story.step("worker-a", "stall", "worker-a holds the lease when it stalls", self.a_stalls)
        clock.advance(TTL)  # now +31s: A's lease ended at +30s by the store's clock
        story.step("store", "expire", "the lease has expired", self.expiry)
        story.step("worker-b", "claim", f"generation {EARLIER + 2}", self.b_claims)
        clock.advance(1)
        story.step("worker-b", "write", "the destination accepts generation 8", self.b_writes)
        clock.advance(1)
        story.step("worker-b", "complete", "the store accepts the completion", self.b_completes)
        clock.advance(12)  # +45s: A wakes up
        story.step("worker-a", "wake", "worker-a's local deadline has passed", self.a_wakes)
        story.step("worker-a", "write", "StaleToken from the destination", self.a_writes)
        story.step("worker-a", "complete", "LeaseLost from the store", self.a_completes)

    def prelude(self) -> tuple[bool, str]:
        self.store.submit(JOB, {"month": "2026-11"}, max_attempts=10)
        expired = released = 0
        for number in range(1, EARLIER + 1):
            lease = self.store.claim(JOB, f"worker-{number:02d}", TTL)
            if lease is None:
                return False, f"earlier claim {number} was refused"
            if number % 2:
                self.clock.advance(TTL + 1)  # this one stalled: its lease expired
                expired += 1
            else:
                self.store.release(lease)
                released += 1
        generation = self.store.get(JOB).generation
        return generation == EARLIER, (
            f"{JOB} submitted; earlier leases used generations 1-{generation} "
            f"({expired} expired, {released} released)"
        )

    def a_claims(self) -> tuple[bool, str]:
        lease = self.store.claim(JOB, "worker-a", TTL)
        if lease is None:
            return False, "claim refused"
        self.leases["a"] = lease
        return lease.generation == EARLIER + 1, (
            f"claims {JOB} -> generation {lease.generation}, lease {TTL:.0f}s (until +{TTL:.0f}s)"
        )

    def a_stalls(self) -> tuple[bool, str]:
        job = self.store.get(JOB)
        holds = job.owner == "worker-a" and not job.lease_expired
        return holds, "stalls (GC pause, SIGSTOP...) with a write stamped 7 in hand"

    def expiry(self) -> tuple[bool, str]:
        job = self.store.get(JOB)
        return job.lease_expired, (
            f"worker-a's lease has expired (at +{TTL:.0f}s, by the store's clock)"
            if job.lease_expired
            else f"lease still live (state {job.state})"
        )

    def b_claims(self) -> tuple[bool, str]:
        lease = self.store.claim(JOB, "worker-b", TTL)
        if lease is None:
            return False, "claim refused"
        self.leases["b"] = lease
        return lease.generation == EARLIER + 2, f"claims {JOB} -> generation {lease.generation}"

    def b_writes(self) -> tuple[bool, str]:
        _write(self.dest, self.leases["b"].token, "total 1234 (by worker-b)", "worker-b")
        highest = fence.fence_generation(self.dest, JOB)
        report = _report(self.dest)
        ok = highest == EARLIER + 2 and report is not None and report[1] == "worker-b"
        written = f"writes the report, fenced with {self.leases['b'].generation} -> "
        if ok:
            return True, written + "accepted"
        return False, written + f"fence holds {highest}, report row {report}"

    def b_completes(self) -> tuple[bool, str]:
        self.store.complete(self.leases["b"], result={"total": 1234})
        job = self.store.get(JOB)
        return (
            job.state == JobState.DONE and job.owner == "worker-b",
            f"completes {JOB} -> {job.state}",
        )

    def a_wakes(self) -> tuple[bool, str]:
        lease = self.leases["a"]
        late = -lease.remaining(self.clock)
        return lease.expired_locally(self.clock), (
            f"wakes up {late:.0f}s past its local deadline and carries on with {lease.generation}"
        )

    def a_writes(self) -> tuple[bool, str]:
        try:
            _write(self.dest, self.leases["a"].token, "total 999 (by worker-a, stale)", "worker-a")
        except StaleToken as exc:
            report = _report(self.dest)
            kept = report is not None and report[1] == "worker-b"
            return kept, (
                f"writes the report, fenced with {exc.generation} -> REJECTED by the "
                f"destination: StaleToken (it has seen {exc.highest_seen})"
            )
        return False, "the destination ACCEPTED the stale write"

    def a_completes(self) -> tuple[bool, str]:
        try:
            self.store.complete(self.leases["a"], result={"total": 999})
        except LeaseLost as exc:
            job = self.store.get(JOB)
            kept = job.state == JobState.DONE and job.owner == "worker-b" and job.generation == 8
            return kept, (
                f"completes with {exc.generation} -> REJECTED by the store: LeaseLost "
                f"(job is at {exc.current_generation})"
            )
        return False, "the store ACCEPTED the stale completion"


def dashboard_command(workdir: Path) -> str:
    """The command that shows the demo's store in the dashboard."""
    return f"tenure dashboard --store {shlex.quote(f'sqlite:///{workdir / STORE_FILE}')}"


# -- rendering ----------------------------------------------------------------------------


def _time(t: float | None) -> str:
    return "before" if t is None else f"+{t:.0f}s"


def render(out: Output, result: DemoResult, kept: Path | None = None) -> None:
    """The story: the timeline, the final state, then (with ``kept``, where the demo's
    store was kept) the dashboard command that shows it, and last the verdict lines."""
    out.line("tenure demo: worker-a stalls past its lease, worker-b takes the job over", "bold")
    out.line(
        f"Lease store: a throwaway SQLite file. Destination: another SQLite database whose "
        f"writes are fenced (tenure.fence). Lease TTL {TTL:.0f}s."
    )
    out.line("The clock is simulated (tenure.ManualClock): the 45 seconds pass instantly.")
    out.line()
    out.table(
        ["time", "who", "what happened", "check"],
        [
            [_time(s.t), s.actor, s.result, Cell("ok", "good") if s.ok else Cell("FAILED", "bad")]
            for s in result.steps
        ],
    )
    out.line()
    final: list[tuple[str, str | Cell]] = []
    if result.job is not None:
        job = result.job
        final.append(
            (
                "store",
                Cell(
                    f"{job['job_id']} {job['state']}, owner {job['owner']}, generation "
                    f"{job['generation']}, attempts {job['attempts']} of "
                    f"{job['max_attempts']}, result {format_value(job['result'])}",
                    "good" if job["state"] == "done" else "bad",
                ),
            )
        )
    for row in result.destination:
        final.append(
            (
                "destination",
                f"reports[{row['report_id']}] = {row['body']!r}, written by "
                f"{row['written_by']} with generation {row['generation']}",
            )
        )
    for row in result.fence:
        final.append(
            (
                "fence",
                f"tenure_fence[{row['job_id']}] = {row['generation']} "
                "(highest generation the destination accepted)",
            )
        )
    out.fields(final, title="Final state")
    out.line()
    if kept is not None:
        out.line(f"Look at it in the browser: {dashboard_hint(dashboard_command(kept))}")
        out.line(f"(the demo's store and destination are kept in {kept}; remove it after)")
        out.line()
    if result.ok:
        out.line("OK: every step behaved as the story says.", "good")
        out.line(
            f"The store and the destination each refused worker-a's stale generation "
            f"{EARLIER + 1} on their own."
        )


def _refuse_store_option(ctx: click.Context) -> None:
    """A --store given on the command line (before or after ``demo``) would be ignored:
    refuse it (a usage error, exit code 2). TENURE_STORE_URL, set for the other commands,
    is no reason to fail."""
    given = click.core.ParameterSource.COMMANDLINE
    root = ctx.find_root()
    if given not in (ctx.get_parameter_source("store"), root.get_parameter_source("store_url")):
        return
    where = Path(tempfile.gettempdir()) / f"{WORKDIR_PREFIX}*"
    raise click.UsageError(
        f"tenure demo runs on a throwaway store of its own, in a new directory {where} "
        "(it prints the tenure dashboard command that shows it), never on --store: run it "
        "without --store",
        ctx,
    )


def _store_help(command: click.Command) -> click.Command:
    """The --store of `common_options` says what it does here: refuse."""
    for param in command.params:
        if isinstance(param, click.Option) and param.name == "store":
            param.help = "Refused: the demo runs on a throwaway store of its own."
    return command


@_store_help
@click.command(short_help="Watch a stalled worker's late write and completion be refused.")
@common_options
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Run the worked example: worker A stalls past its lease, B takes over, and A's late
    write and completion are both refused. Exit 0 only if every step behaves so.

    It runs on a throwaway SQLite store of its own, in a new temporary directory
    (tenure-demo-*) kept after the run; --store is refused. It prints the timeline, the
    final state, the 'tenure dashboard' command that shows the demo's store (and where it
    is kept), then the verdict."""
    _refuse_store_option(ctx)
    state = ctx.ensure_object(CliState)
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    result = run_demo(workdir)
    look = dashboard_command(workdir)
    out = state.output()
    if out.json_mode:
        install = INSTALL_DASHBOARD if dashboard_missing() else None
        out.json(
            {
                **result.to_dict(),
                "dashboard": look,
                "dashboard_install": install,
                "kept": str(workdir),
            }
        )
    else:
        render(out, result, workdir)
    if not result.ok:
        raise CliError(f"demo failed at {result.failure}", json_mode=state.json, kind="DemoFailed")
